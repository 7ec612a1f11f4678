//! `ringmq doctor`: the host checks (`ringmq::doctor`), and with `--admin`
//! the running broker's own: its tiered storage bucket, its uploads, and
//! the queues whose local retention waits for them, read from its admin
//! listener's overview.

use super::admin_access::AdminAccess;
use clap::Args;
use ringmq::doctor::{Check, DiskNeeds, Status};
use ringmq::server::{config, ServerConfig};
use serde_json::Value;
use std::path::PathBuf;

#[derive(Args)]
pub struct DoctorArgs {
    /// Data directory to check for O_DIRECT and fallocate.
    #[arg(long, default_value = config::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// CPUs the broker would run on [default: all].
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
    /// Connections per shard to size the open-file limit for.
    #[arg(long, default_value_t = ServerConfig::new(config::DEFAULT_DATA_DIR).connections_max)]
    connections_max: usize,
    /// Segment size the broker would use, MiB (for the free-space check).
    #[arg(long, default_value_t = ServerConfig::new(config::DEFAULT_DATA_DIR).segment_bytes >> 20)]
    segment_mib: u64,
    /// Size retention per shard the broker would use, GiB [default: none].
    #[arg(long)]
    retention_gib: Option<u64>,
    /// Segment files per shard the broker would keep for recycling.
    #[arg(long, default_value_t = ringmq_shards::config::SEGMENT_POOL_MAX)]
    segment_pool_max: usize,
    /// Also check the broker serving this admin listener (serve --admin-listen): its tiered storage
    #[arg(long)]
    admin: Option<String>,
    #[command(flatten)]
    access: AdminAccess,
}

pub fn run(a: DoctorArgs) -> Result<(), String> {
    let cores = if a.cores.is_empty() { ServerConfig::new(&a.data_dir).cores } else { a.cores.clone() };
    let disk = DiskNeeds {
        segment_bytes: a.segment_mib.saturating_mul(1 << 20),
        retention_bytes: a.retention_gib.map(|g| g.saturating_mul(1 << 30)),
        segment_pool_max: a.segment_pool_max as u64,
    };
    let mut checks = ringmq::doctor::run(&a.data_dir, &cores, a.connections_max, disk);
    if let Some(admin) = &a.admin {
        let listener = a.access.listener(admin)?;
        checks.extend(match listener.get("/api/overview") {
            Ok(overview) => broker_checks(listener.addr(), &overview),
            Err(why) => vec![Check { name: "broker", status: Status::Fail, detail: why }],
        });
    }
    for c in &checks {
        let status = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        println!("{status} {:<18} {}", c.name, c.detail);
    }
    match checks.iter().filter(|c| c.failed()).count() {
        0 => Ok(()),
        n => Err(format!("{n} check(s) failed")),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// The checks of a running broker, from its `/api/overview`.
fn broker_checks(admin: &str, overview: &Value) -> Vec<Check> {
    let node = &overview["node"];
    let role = node["role"].as_str().filter(|r| !r.is_empty()).unwrap_or("single");
    let reached = format!("{admin}: {} shards, {role}", node["shards"]);
    let mut checks = vec![Check { name: "broker", status: Status::Ok, detail: reached }];
    let tiered = &overview["tiered"];
    if tiered.is_null() {
        let detail = "off (the broker has no --s3-bucket)".to_string();
        checks.push(Check { name: "tiered storage", status: Status::Ok, detail });
        return checks;
    }
    let number = |key: &str| tiered[key].as_f64().unwrap_or(0.0);
    checks.push(match tiered["bucket_usable"].as_bool() {
        Some(true) => Check { name: "tiered bucket", status: Status::Ok, detail: "its last check passed".into() },
        Some(false) => Check {
            name: "tiered bucket",
            status: Status::Fail,
            detail: "the broker's last check of its bucket failed: uploads wait, reads below the local start fail \
                     (retriable); `ringmq tiered check` with the broker's --s3-* flags says why"
                .into(),
        },
        None => Check { name: "tiered bucket", status: Status::Warn, detail: "not checked yet".into() },
    });
    let failing = number("failing_shards");
    checks.push(if failing > 0.0 {
        let detail = format!(
            "{failing} shard(s) fail their rounds ({} failed rounds in all; each retried within 16 s): \
             the broker's log says why",
            number("upload_failures")
        );
        Check { name: "tiered uploads", status: Status::Fail, detail }
    } else {
        let detail = format!("{} objects uploaded, no shard failing", number("uploaded_objects"));
        Check { name: "tiered uploads", status: Status::Ok, detail }
    });
    let held = number("held_queues");
    let free = tiered["data_dir_free_bytes"].as_f64().map_or("unknown".into(), |b| format!("{:.1} GiB", b / GIB));
    checks.push(if held > 0.0 {
        let detail = format!(
            "{held} tiered queue(s) keep on local disk what the bucket does not hold yet (their local retention \
             waits for uploads; {free} free in the data directory): local disk fills toward its limits, then \
             appends are refused (StorageFull), and nothing the bucket lacks is deleted"
        );
        Check { name: "tiered retention", status: Status::Warn, detail }
    } else {
        let detail = format!("no queue's local retention waits for uploads ({free} free in the data directory)");
        Check { name: "tiered retention", status: Status::Ok, detail }
    });
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn statuses(overview: Value) -> Vec<(&'static str, Status)> {
        broker_checks("127.0.0.1:9300", &overview).into_iter().map(|c| (c.name, c.status)).collect()
    }

    #[test]
    fn a_bucket_down_fails_and_held_retention_warns() {
        let node = json!({"shards": 2, "role": ""});
        assert_eq!(
            statuses(json!({"node": node, "tiered": null})),
            vec![("broker", Status::Ok), ("tiered storage", Status::Ok)]
        );
        let down = json!({"bucket_usable": false, "failing_shards": 2.0, "upload_failures": 9.0,
            "held_queues": 3.0, "uploaded_objects": 4.0, "data_dir_free_bytes": 1e10});
        assert_eq!(
            statuses(json!({"node": node, "tiered": down})),
            vec![
                ("broker", Status::Ok),
                ("tiered bucket", Status::Fail),
                ("tiered uploads", Status::Fail),
                ("tiered retention", Status::Warn)
            ]
        );
        let fine = json!({"bucket_usable": true, "failing_shards": 0.0, "upload_failures": 9.0,
            "held_queues": 0.0, "uploaded_objects": 4.0, "data_dir_free_bytes": null});
        let checks = broker_checks("127.0.0.1:9300", &json!({"node": node, "tiered": fine}));
        assert!(checks.iter().all(|c| c.status == Status::Ok), "{checks:?}");
        assert!(checks[3].detail.contains("unknown free"), "{}", checks[3].detail);
    }
}
