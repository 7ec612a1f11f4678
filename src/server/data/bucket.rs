//! Tiered storage's bucket, watched from shard 0: every
//! `bucket_check_interval` a check that it exists and the credentials
//! reach it, through the node's S3 thread. `ringmq_tiered_bucket_usable`
//! says how the last one went; a failure is logged when it begins (with
//! what to fix) and the recovery when it ends, not every time.

use crate::server::core::metrics::{Probe, Samples};
use crate::server::core::Core;
use std::cell::Cell;
use std::rc::Rc;

/// How the checks went.
#[derive(Default)]
struct BucketChecks {
    usable: Cell<bool>,
    failed: Cell<u64>,
}

impl Probe for BucketChecks {
    fn collect(&self, out: &mut Samples) {
        let help =
            "1 if the last check of tiered storage's bucket passed (it exists, the credentials reach it), else 0.";
        out.gauge("ringmq_tiered_bucket_usable", help, &[], f64::from(u8::from(self.usable.get())));
        let help = "Checks of tiered storage's bucket that failed.";
        out.counter("ringmq_tiered_bucket_checks_failed", help, &[], self.failed.get());
    }
}

/// Checks the bucket until the shard stops (shard 0 of a broker with one).
pub async fn run(core: Rc<Core>) {
    let Some(link) = core.objects().cloned() else { return };
    let checks = Rc::new(BucketChecks { usable: Cell::new(true), failed: Cell::new(0) });
    core.probes().register(&(checks.clone() as Rc<dyn Probe>));
    loop {
        let result = link.call(|store| async move { store.check().await }).await;
        match &result {
            Err(error) if checks.usable.get() => tracing::warn!(%error, "tiered storage's bucket is not usable"),
            Ok(()) if !checks.usable.get() => tracing::info!("tiered storage's bucket is usable again"),
            _ => {}
        }
        if result.is_err() {
            checks.failed.set(checks.failed.get() + 1);
        }
        checks.usable.set(result.is_ok());
        if !core.tasks().sleep(core.config().bucket_check_interval).await {
            return;
        }
    }
}
