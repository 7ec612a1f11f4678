//! `ringmq top`: a live terminal view of a broker from its admin listener
//! (`serve --admin-listen`): per topic the produce and fetch rates, stored
//! messages and consumer lag, and the shards' busy share and durable-append
//! p50/p99 of the last interval, redrawn every interval.

use super::admin_access::AdminAccess;
use clap::Args;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Args)]
pub struct TopArgs {
    /// The broker's admin listener (serve --admin-listen)
    #[arg(long, default_value = "127.0.0.1:9300")]
    admin: String,
    /// Redraw every this many ms
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Stop after this many redraws [default: run until interrupted]
    #[arg(long)]
    count: Option<u64>,
    #[command(flatten)]
    access: AdminAccess,
}

pub fn run(a: TopArgs) -> Result<(), String> {
    let listener = a.access.listener(&a.admin)?;
    let interval = Duration::from_millis(a.interval_ms.max(100));
    let mut previous: Option<Value> = None;
    let mut drawn = 0;
    loop {
        let now = listener.get("/api/overview")?;
        // Clear the screen and go home, as top does; plain lines when drawing a fixed count.
        if a.count.is_none() {
            print!("\x1b[2J\x1b[H");
        }
        print!("{}", screen(&a.admin, &now, previous.as_ref()));
        previous = Some(now);
        drawn += 1;
        if a.count.is_some_and(|count| drawn >= count) {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

/// One screen: the node line, then a line per topic.
fn screen(admin: &str, now: &Value, before: Option<&Value>) -> String {
    let seconds =
        before.map_or(0.0, |b| (now["time_ms"].as_f64().unwrap_or(0.0) - b["time_ms"].as_f64().unwrap_or(0.0)) / 1e3);
    let (p50, p99) = before.map_or((None, None), |b| latency(&now["append_latency"], &b["append_latency"]));
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{:.2}", v * 1e3));
    let mut out = format!(
        "ringmq top  {admin}  {} shards, {}  busy {}  append p50 {} ms  p99 {} ms\n\n",
        now["node"]["shards"],
        now["node"]["role"].as_str().unwrap_or("?"),
        busy(now, before, seconds),
        ms(p50),
        ms(p99)
    );
    let mut lag: BTreeMap<&str, f64> = BTreeMap::new();
    for g in now["groups"].as_array().into_iter().flatten() {
        *lag.entry(g["topic"].as_str().unwrap_or("")).or_default() += g["lag"].as_f64().unwrap_or(0.0);
    }
    let before_topic = |name: &str| {
        before.and_then(|b| b["topics"].as_array()?.iter().find(|t| t["name"].as_str() == Some(name)).cloned())
    };
    out.push_str(&format!(
        "{:<32} {:>6} {:>12} {:>12} {:>10} {:>12} {:>10}\n",
        "TOPIC", "QUEUES", "PRODUCED/s", "FETCHED/s", "MiB/s IN", "STORED", "LAG"
    ));
    for t in now["topics"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or("");
        if name.starts_with('%') {
            continue;
        }
        let queues = t["queues"].as_array().map_or(0, Vec::len);
        let stored: f64 = t["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| q["end"].as_f64().unwrap_or(0.0) - q["start"].as_f64().unwrap_or(0.0))
            .sum();
        let earlier = before_topic(name);
        let rate = |key: &str| match (&earlier, seconds > 0.0) {
            (Some(e), true) => {
                format!("{:.0}", (t[key].as_f64().unwrap_or(0.0) - e[key].as_f64().unwrap_or(0.0)).max(0.0) / seconds)
            }
            _ => "-".to_string(),
        };
        let mib = match (&earlier, seconds > 0.0) {
            (Some(e), true) => format!(
                "{:.2}",
                (t["produce_bytes"].as_f64().unwrap_or(0.0) - e["produce_bytes"].as_f64().unwrap_or(0.0)).max(0.0)
                    / seconds
                    / 1048576.0
            ),
            _ => "-".to_string(),
        };
        let lagging = lag.get(name).map_or_else(|| "-".to_string(), |l| format!("{l:.0}"));
        out.push_str(&format!(
            "{name:<32} {queues:>6} {:>12} {:>12} {mib:>10} {stored:>12.0} {lagging:>10}\n",
            rate("produce_messages"),
            rate("fetch_messages")
        ));
    }
    out
}

/// The shards' busy share between two overviews (their work, without the
/// idle spin that their threads' CPU time counts), as a percentage of
/// their CPUs.
fn busy(now: &Value, before: Option<&Value>, seconds: f64) -> String {
    let node = |v: &Value, key: &str| v["node"][key].as_f64().unwrap_or(0.0);
    match before {
        Some(b) if seconds > 0.0 => {
            let busy = (node(now, "busy_seconds") - node(b, "busy_seconds")).max(0.0);
            format!("{:.0}%", busy / seconds / node(now, "shards").max(1.0) * 100.0)
        }
        _ => "-".to_string(),
    }
}

/// p50 and p99 of what the append histogram counted between two overviews, in seconds.
fn latency(now: &Value, before: &Value) -> (Option<f64>, Option<f64>) {
    let bounds: Vec<f64> = now["bounds"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect();
    let counts =
        |h: &Value| -> Vec<f64> { h["counts"].as_array().into_iter().flatten().filter_map(Value::as_f64).collect() };
    let (a, b) = (counts(now), counts(before));
    let delta: Vec<f64> = a.iter().enumerate().map(|(i, c)| (c - b.get(i).copied().unwrap_or(0.0)).max(0.0)).collect();
    (quantile(0.5, &bounds, &delta), quantile(0.99, &bounds, &delta))
}

/// The value below which fraction `q` of the counts lie, interpolated inside its bucket.
fn quantile(q: f64, bounds: &[f64], counts: &[f64]) -> Option<f64> {
    let total: f64 = counts.iter().sum();
    if total == 0.0 || bounds.is_empty() {
        return None;
    }
    let rank = q * total;
    let mut seen = 0.0;
    for (i, count) in counts.iter().enumerate() {
        if seen + count >= rank {
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            let upper = bounds.get(i).copied().unwrap_or(bounds[bounds.len() - 1]);
            let within = if *count == 0.0 { 0.0 } else { (rank - seen) / count };
            return Some(lower + (upper - lower) * within);
        }
        seen += count;
    }
    bounds.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quantile_is_interpolated_inside_its_bucket() {
        let bounds = [1.0, 2.0, 4.0];
        assert_eq!(quantile(0.5, &bounds, &[0.0, 10.0, 0.0, 0.0]), Some(1.5));
        assert_eq!(quantile(0.99, &bounds, &[100.0, 0.0, 0.0, 0.0]), Some(0.99));
        assert_eq!(quantile(0.5, &bounds, &[0.0; 4]), None);
    }
}
