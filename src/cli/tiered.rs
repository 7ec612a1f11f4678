//! `ringmq tiered`: tiered storage's bucket from the command line. `check`
//! makes the calls the broker makes (a bucket check, put, ranged get, list,
//! delete) with a probe object, and says which one fails and why.

use super::settings::Settings;
use ringmq::objects::ObjectStore;
use std::time::Instant;

#[derive(clap::Subcommand)]
pub enum TieredAction {
    /// Checks that the broker can use its bucket (serve's --s3-* flags or
    /// --config file): it exists, the credentials reach it, and an object
    /// can be written, read in part, listed and deleted.
    Check(Box<Settings>),
}

/// Runs `action`; `on_command_line` says which settings were given as flags.
pub fn run(action: TieredAction, on_command_line: impl Fn(&str) -> bool) -> Result<(), String> {
    match action {
        TieredAction::Check(settings) => check(settings.merge(on_command_line).map_err(|e| e.to_string())?),
    }
}

/// Bytes of the probe object.
const PROBE_BYTES: usize = 64 << 10;

fn check(settings: Settings) -> Result<(), String> {
    let config = settings.object_store().map_err(|e| e.to_string())?;
    let config = config
        .ok_or("no bucket to check: give --s3-endpoint and --s3-bucket (or s3_endpoint and s3_bucket in --config)")?;
    let (bucket, endpoint) = (config.bucket.clone(), config.endpoint.clone());
    let store = ObjectStore::new(config).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let key = format!("ringmq-check/{}", std::process::id());
        let probe: Vec<u8> = (0..PROBE_BYTES).map(|i| (i * 7 % 251) as u8).collect();
        step("bucket", store.check()).await?;
        step("put", store.put(&key, probe.clone().into())).await?;
        let part = step("ranged get", store.get(&key, Some(1_000..5_000))).await?;
        if part[..] != probe[1_000..5_000] {
            return Err(format!("ranged get: bytes 1000..5000 of {key} came back different"));
        }
        let listed = step("list", store.list("ringmq-check/")).await?;
        if !listed.iter().any(|l| l.key == key && l.size == PROBE_BYTES as u64) {
            return Err(format!("list: {key} of {PROBE_BYTES} bytes is not listed: {listed:?}"));
        }
        step("delete", store.delete(&key)).await?;
        if step("head", store.head(&key)).await?.is_some() {
            return Err(format!("head: {key} is still there after its delete"));
        }
        println!("bucket={bucket} endpoint={endpoint} usable=yes");
        Ok(())
    })
}

/// Runs one call of the check, printing how it went.
async fn step<T>(
    name: &str,
    call: impl std::future::Future<Output = Result<T, ringmq::objects::ObjectError>>,
) -> Result<T, String> {
    let began = Instant::now();
    let result = call.await;
    let ms = began.elapsed().as_secs_f64() * 1e3;
    match &result {
        Ok(_) => println!("{name:<10} ok      {ms:8.1} ms"),
        Err(_) => println!("{name:<10} failed  {ms:8.1} ms"),
    }
    result.map_err(|e| format!("{name}: {e}"))
}
