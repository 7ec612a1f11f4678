//! Keeps one spare segment ready while the active one fills, so rollover
//! never waits on file creation and appends never extend a file: recycled
//! from the pool of retired segments when it holds one (a rename), else
//! created, fallocate'd and zero-filled in the background.

use crate::log::pool::Pooled;
use crate::log::segment::{segment_name, Segment};
use crate::position::LogPos;
use crate::probe::stats::add;
use crate::shard::Inner;
use std::rc::Rc;
use std::time::Duration;

/// Pause before retrying a failed segment creation.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// The spare must be ready before appends reach the active segment's end:
/// its fill hurries while it leads the active segment by less than this
/// fraction of a segment (the fdatasync, rename and directory sync after the
/// fill need time too).
const FILL_LEAD_DIVISOR: u64 = 8;

/// Zero-fill writes in flight for a spare `filled` bytes along: one while it
/// leads the active segment's use comfortably, more when appends catch up.
fn fill_depth(inner: &Inner, filled: u64) -> usize {
    let st = inner.state.borrow();
    depth_for(st.log.active_used(), filled, inner.config.segment_bytes)
}

/// The fill depth when the active segment holds `used` bytes and the spare
/// has `filled` of its `segment_bytes` zero-filled.
fn depth_for(used: u64, filled: u64, segment_bytes: u64) -> usize {
    if used + segment_bytes / FILL_LEAD_DIVISOR >= filled {
        crate::fs::ZERO_FILL_DEPTH_MAX
    } else {
        1
    }
}

/// Creates spare segments until the shard closes.
pub(crate) async fn run(inner: Rc<Inner>) {
    loop {
        let wake = inner.spare_needed.wait();
        let base = {
            let st = inner.state.borrow();
            if inner.is_closed() || st.failed().is_some() {
                return;
            }
            st.log.spare_wanted()
        };
        let Some(base) = base else {
            wake.await;
            continue;
        };
        let pooled = inner.state.borrow_mut().pool.take();
        if let Some(pooled) = pooled {
            recycle(&inner, base, pooled).await;
            continue;
        }
        if inner.space_short().is_some() && !inner.room_for_segment().await {
            glommio::timer::sleep(RETRY_DELAY).await;
            continue;
        }
        let depth = |filled: u64| fill_depth(&inner, filled);
        match Segment::create(&inner.config.dir, base, inner.config.segment_bytes, &depth).await {
            Ok(segment) => {
                add(&inner.counters.segments_created, 1);
                add(&inner.counters.zero_fill_bytes, inner.config.segment_bytes);
                spare_ready(&inner, segment).await;
            }
            Err(error) if error.is_no_space() => {
                if inner.short_of_space(error.to_string()) {
                    tracing::error!(%error, base = base.0, "the disk is full: appends that need a new segment are refused");
                }
                inner.on_no_space(&error).await;
                // Blocked appends wake to be refused.
                inner.space_freed.notify();
                glommio::timer::sleep(RETRY_DELAY).await;
            }
            Err(error) => {
                tracing::error!(%error, base = base.0, "could not preallocate the next segment; retrying");
                glommio::timer::sleep(RETRY_DELAY).await;
            }
        }
    }
}

/// Makes the spare at `base` from a pooled file. A file that cannot be
/// recycled is deleted; the next turn makes the spare another way.
async fn recycle(inner: &Inner, base: LogPos, pooled: Pooled) {
    let dir = &inner.config.dir;
    match Segment::recycle(dir, &pooled.path, pooled.generation, base, inner.config.segment_bytes).await {
        Ok(segment) => {
            tracing::debug!(base = base.0, generation = %segment.generation, "recycled a pooled segment");
            add(&inner.counters.segments_recycled, 1);
            spare_ready(inner, segment).await;
        }
        Err(error) => {
            tracing::warn!(%error, base = base.0, pooled = %pooled.path.display(), "could not recycle a pooled segment; deleting it");
            // Under its pooled name, or its new one if the rename was done.
            let names = [pooled.path.clone(), dir.join(segment_name(base.0, pooled.generation.next()))];
            let removed = crate::fs::blocking("deleting a pooled segment", &pooled.path, move |_| {
                for name in &names {
                    match std::fs::remove_file(name) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                }
                Ok(())
            });
            if let Err(error) = removed.await {
                tracing::warn!(%error, "could not delete it either");
            }
        }
    }
}

/// The spare is ready: appends waiting for it go on, and if the disk had
/// been full, the ballast is made again.
async fn spare_ready(inner: &Inner, segment: Rc<Segment>) {
    let base = segment.base;
    inner.state.borrow_mut().log.set_spare(segment);
    if inner.space_back() {
        tracing::info!(base = base.0, "there is space again: appends resume");
        if let Err(error) = crate::lifecycle::ballast::ensure(&inner.config.dir, inner.config.ballast_bytes).await {
            tracing::warn!(%error, "could not make the ballast again");
        }
    }
    inner.space_freed.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fill_hurries_only_while_appends_are_within_an_eighth_of_a_segment_of_it() {
        let seg = 1 << 30;
        assert_eq!(depth_for(0, 0, seg), 4, "a new spare starts fast");
        assert_eq!(depth_for(0, seg / 8 + 1, seg), 1, "a lead of over 1/8 is enough");
        assert_eq!(depth_for(seg / 2, seg / 2 + seg / 8, seg), 4, "appends caught up");
        assert_eq!(depth_for(seg / 2, seg - 1, seg), 1);
    }
}
