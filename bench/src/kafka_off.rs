//! `--protocol kafka` without the `kafka` feature: refused with how to get it.

use crate::run::Shared;
use std::sync::Arc;

const NEEDS: &str =
    "--protocol kafka needs ringmq-bench built with --features kafka (librdkafka; Debian: librdkafka-dev)";

/// No producer can be made without librdkafka.
pub(crate) enum Producer {}

pub(crate) fn producer(_: &Arc<Shared>, _: &str) -> Result<Arc<Producer>, String> {
    Err(NEEDS.into())
}

pub(crate) fn prepare_topic(
    _: &crate::run::RunArgs,
    _: &str,
) -> Result<(u32, crate::summary::KafkaBroker, bool), String> {
    Err(NEEDS.into())
}

pub(crate) fn delete_topic(_: &crate::run::RunArgs, _: &str) -> Result<(), String> {
    Err(NEEDS.into())
}

pub(crate) fn produce(_: &Arc<Shared>, p: &Producer, _: u32, _: u32, _: u64) {
    match *p {}
}

pub(crate) fn consumers(
    _: &Arc<Shared>,
    _: &str,
    _: u32,
    _: impl Fn(usize) -> core_affinity::CoreId,
) -> Result<Vec<std::thread::JoinHandle<()>>, String> {
    Err(NEEDS.into())
}
