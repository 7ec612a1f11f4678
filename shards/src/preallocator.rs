//! Keeps one spare segment ready: created, fallocate'd and zero-filled in the
//! background while the active one fills, so rollover never waits on file
//! creation and appends never extend a file.

use crate::segment::Segment;
use crate::shard::Inner;
use crate::stats::add;
use std::rc::Rc;
use std::time::Duration;

/// Pause before retrying a failed segment creation.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Creates spare segments until the shard closes.
pub(crate) async fn run(inner: Rc<Inner>) {
    loop {
        let wake = inner.spare_needed.wait();
        let base = {
            let st = inner.state.borrow();
            if inner.closed.get() || st.failed.is_some() {
                return;
            }
            st.log.spare.is_none().then(|| st.log.active.end(inner.config.segment_bytes))
        };
        let Some(base) = base else {
            wake.await;
            continue;
        };
        match Segment::create(&inner.config.dir, base, inner.config.segment_bytes).await {
            Ok(segment) => {
                inner.state.borrow_mut().log.spare = Some(segment);
                add(&inner.counters.segments_created, 1);
                inner.space_freed.notify();
            }
            Err(error) => {
                tracing::error!(%error, base, "could not preallocate the next segment; retrying");
                glommio::timer::sleep(RETRY_DELAY).await;
            }
        }
    }
}
