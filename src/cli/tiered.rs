//! `ringmq tiered`: tiered storage's bucket from the command line. `check`
//! makes the calls the broker makes (a bucket check, put, ranged get, list,
//! delete) with a probe object, and says which one fails and why.

use ringmq::objects::{Credentials, ObjectStore, ObjectStoreConfig, UrlStyle};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand)]
pub enum TieredAction {
    /// Checks that the broker can use a bucket: it exists, the credentials
    /// reach it, and an object can be written, read in part, listed and deleted.
    Check(ObjectStoreArgs),
}

/// Where tiered storage's bucket is.
#[derive(clap::Args, Debug, Clone)]
pub struct ObjectStoreArgs {
    /// The S3 endpoint: http://host:port or https://host.
    #[arg(long)]
    pub s3_endpoint: String,
    #[arg(long)]
    pub s3_bucket: String,
    #[arg(long, default_value = "us-east-1")]
    pub s3_region: String,
    /// path (S3-compatible servers) or virtual-host (AWS S3).
    #[arg(long, default_value = "path")]
    pub s3_url_style: UrlStyle,
    /// Put before every key, so that several clusters share a bucket.
    #[arg(long, default_value = "")]
    pub s3_prefix: String,
    /// An AWS shared credentials file (else AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).
    #[arg(long)]
    pub s3_credentials_file: Option<PathBuf>,
    /// Its profile.
    #[arg(long, default_value = "default")]
    pub s3_profile: String,
    /// Tries of a call whose failure may pass (connection, timeout, 5xx), the first included.
    #[arg(long, default_value_t = 5)]
    pub s3_attempts: u32,
    /// Longest one request may take, ms.
    #[arg(long, default_value_t = 30_000)]
    pub s3_request_timeout_ms: u64,
}

impl ObjectStoreArgs {
    /// The store's settings, with its credentials loaded.
    pub fn config(&self) -> Result<ObjectStoreConfig, String> {
        let credentials =
            Credentials::load(self.s3_credentials_file.as_deref(), &self.s3_profile).map_err(|e| e.to_string())?;
        Ok(ObjectStoreConfig {
            endpoint: self.s3_endpoint.clone(),
            bucket: self.s3_bucket.clone(),
            region: self.s3_region.clone(),
            url_style: self.s3_url_style,
            prefix: self.s3_prefix.clone(),
            credentials,
            attempts: self.s3_attempts,
            request_timeout: Duration::from_millis(self.s3_request_timeout_ms),
        })
    }
}

pub fn run(action: TieredAction) -> Result<(), String> {
    match action {
        TieredAction::Check(args) => check(&args),
    }
}

/// Bytes of the probe object.
const PROBE_BYTES: usize = 64 << 10;

fn check(args: &ObjectStoreArgs) -> Result<(), String> {
    let store = ObjectStore::new(args.config()?).map_err(|e| e.to_string())?;
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
        println!("bucket={} endpoint={} usable=yes", args.s3_bucket, args.s3_endpoint);
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
