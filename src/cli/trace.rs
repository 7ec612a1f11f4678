//! `ringmq trace ID`: a message's timeline as the brokers traced it.

use crate::{BrokerArg, Format};
use clap::Args;
use ringmq::client::MessageId;

#[derive(Args)]
pub struct TraceArgs {
    /// The message id (32 hex digits, as `produce` prints it)
    id: String,
    #[command(flatten)]
    broker: BrokerArg,
    /// Text: one event per line, with the time since the first; JSON: the events as stored.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run(a: TraceArgs) -> Result<(), String> {
    let id: MessageId = a.id.parse().map_err(|e: ringmq::client::BadMessageId| e.to_string())?;
    let events = crate::connect(&a.broker)?.trace(id).map_err(|e| e.to_string())?;
    if events.is_empty() {
        return Err(format!(
            "no trace of message {id}: tracing is off for its topic (serve --trace-topics, --trace-sample-rate), \
             or the trace is not written yet (within 100 ms) or was removed by retention"
        ));
    }
    let first = events[0]["time_ms"].as_i64().unwrap_or(0);
    for e in &events {
        match a.format {
            Format::Json => println!("{e}"),
            Format::Text => println!("{}", line(e, first)),
        }
    }
    Ok(())
}

/// `+12 ms  store  shard=1 queue=2 offset=17`: the time since the first event, the event, its details.
fn line(e: &serde_json::Value, first: i64) -> String {
    let time = e["time_ms"].as_i64().unwrap_or(0);
    let name = e["event"].as_str().unwrap_or("?");
    let details: Vec<String> = e
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| *k != "event" && *k != "time_ms")
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    format!("{time} +{} ms  {name:<12} {}", time - first, details.join(" "))
}
