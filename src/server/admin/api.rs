//! The console's JSON: `/api/overview` (the node, its topics and queues,
//! consumer lag, traffic totals and the storage's latency buckets, all from
//! one scrape of every shard; the cluster's groups and leaders in cluster
//! mode) and `/api/message?id=` or `?topic=&key=` (messages looked up on
//! every shard, each with its trace). The browser turns totals into rates
//! and buckets into percentiles, second by second.

use super::http::{Request, Response};
use super::scrape;
use crate::client::MessageId;
use crate::protocol::frame;
use crate::protocol::messages::{LookedUp, LookupQuery, TRACE_TOPIC};
use crate::protocol::{ApiKey, Reader, Writer};
use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::metrics::{samples, Family, Sample, Value};
use crate::server::core::{Core, Failure, Reason};
use crate::server::data::lookup;
use ringmq_shards::batch::{self, BatchHeader};
use serde_json::{json, Value as Json};
use std::collections::BTreeMap;

/// Longest value shown of a looked-up message (the console is not a download tool).
const VALUE_SHOWN_MAX: usize = 4096;
/// Most messages one lookup shows.
const FOUND_SHOWN_MAX: usize = 100;

/// GET /api/overview.
pub async fn overview(core: &Core) -> Response {
    let families = match scrape::gather(core).await {
        Ok(families) => scrape::without_shards(families),
        Err(why) => return Response::text(503, format!("{why}\n")),
    };
    let samples = |name: &'static str| samples(&families, name);
    let label = |s: &Sample, key: &str| s.label(key).unwrap_or_default().to_string();
    let mut topics: BTreeMap<String, Vec<Json>> = BTreeMap::new();
    for name in core.metadata().topics.keys() {
        topics.insert(name.clone(), Vec::new());
    }
    let starts: BTreeMap<(String, String), f64> =
        samples("ringmq_queue_start_offset").map(|s| ((label(s, "topic"), label(s, "queue")), s.number())).collect();
    for s in samples("ringmq_queue_end_offset") {
        let (topic, queue) = (label(s, "topic"), label(s, "queue"));
        let start = starts.get(&(topic.clone(), queue.clone())).copied().unwrap_or(0.0);
        let entry = json!({"queue": queue.parse::<u32>().unwrap_or(0), "start": start, "end": s.number()});
        topics.entry(topic).or_default().push(entry);
    }
    let per_topic = |family: &'static str, topic: &str| {
        samples(family).filter(|s| s.label("topic") == Some(topic)).map(Sample::number).sum::<f64>()
    };
    let topics: Vec<Json> = topics
        .into_iter()
        .map(|(name, mut queues)| {
            queues.sort_by_key(|q| q["queue"].as_u64());
            json!({"name": name, "queues": queues,
                "produce_messages": per_topic("ringmq_produce_messages", &name),
                "produce_bytes": per_topic("ringmq_produce_bytes", &name),
                "fetch_messages": per_topic("ringmq_fetch_messages", &name)})
        })
        .collect();
    let groups: Vec<Json> = samples("ringmq_consumer_lag")
        .map(|s| {
            let (group, topic, queue) = (label(s, "group"), label(s, "topic"), label(s, "queue"));
            json!({"group": group, "topic": topic, "queue": queue.parse::<u32>().unwrap_or(0), "lag": s.number()})
        })
        .collect();
    let total = |name: &'static str| samples(name).map(Sample::number).sum::<f64>();
    let totals = json!({
        "produce_messages": total("ringmq_produce_messages"),
        "produce_bytes": total("ringmq_produce_bytes"),
        "fetch_messages": total("ringmq_fetch_messages"),
        "fetch_bytes": total("ringmq_fetch_bytes"),
        "connections": total("ringmq_connections"),
    });
    let latency = histogram(&families, "ringmq_storage_append_seconds");
    let role = samples("ringmq_shard_role").map(|s| label(s, "role")).next().unwrap_or_default();
    Response::json(&json!({
        "time_ms": crate::duration::unix_ms(),
        "node": {
            "shards": core.shards(),
            "role": role,
            "busy_seconds": total("ringmq_shard_busy_seconds"),
            "cluster_id": core.cluster_id(),
        },
        "topics": topics,
        "groups": groups,
        "totals": totals,
        "append_latency": latency,
        "cluster": cluster(core, &families),
        "tiered": tiered(core, &families),
    }))
}

/// With a tiered storage bucket: whether its last check passed, the shards
/// whose rounds fail, the queues whose local retention waits for uploads,
/// and the data directory's free bytes (what those queues fill).
fn tiered(core: &Core, families: &[Family]) -> Json {
    if core.objects().is_none() {
        return Json::Null;
    }
    let number = |name: &'static str| samples(families, name).map(Sample::number).sum::<f64>();
    let free = rustix::fs::statvfs(&core.config().data_dir).ok().map(|fs| fs.f_bavail.saturating_mul(fs.f_frsize));
    json!({
        "bucket_usable": samples(families, "ringmq_tiered_bucket_usable").next().map(|s| s.number() == 1.0),
        "failing_shards": number("ringmq_tiered_uploads_failing"),
        "upload_failures": number("ringmq_tiered_upload_failures"),
        "held_queues": number("ringmq_tiered_local_retention_held_queues"),
        "uploaded_objects": number("ringmq_tiered_uploaded_objects"),
        "data_dir_free_bytes": free,
    })
}

/// A node-wide histogram as {bounds, counts (per bucket), sum}.
fn histogram(families: &[Family], name: &'static str) -> Json {
    let found = samples(families, name).find_map(|s| match &s.value {
        Value::Histogram(h) => Some(h.clone()),
        Value::Number(_) => None,
    });
    match found {
        Some(h) => json!({"bounds": h.bounds, "counts": h.counts, "sum": h.sum}),
        None => Json::Null,
    }
}

/// Cluster mode: every broker group and its leader, and this node's replication as its shards report it.
fn cluster(core: &Core, families: &[Family]) -> Json {
    let Some(placement) = core.placement() else { return Json::Null };
    let groups: Vec<Json> = placement
        .view
        .borrow()
        .groups
        .iter()
        .map(|g| json!({"group": g.broker_group, "shards": g.shards, "leader": g.leader}))
        .collect();
    let gauge = |name: &'static str| samples(families, name).next().map(Sample::number);
    let followers: Vec<Json> = samples(families, "ringmq_replication_lag_bytes")
        .map(|s| json!({"follower": s.label("follower"), "lag_bytes": s.number()}))
        .collect();
    json!({
        "groups": groups,
        "epoch": gauge("ringmq_replication_leader_epoch"),
        "isr_size": gauge("ringmq_replication_isr_size"),
        "followers": followers,
    })
}

/// GET /api/message?id=ID or ?topic=T&key=K: the messages found (of the
/// topics `principal` may read), each with its trace.
pub async fn message(core: &Core, request: &Request, principal: &Principal) -> Response {
    let param = |key: &str| request.query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let query = match (param("id"), param("topic"), param("key")) {
        (Some(id), _, _) => match id.parse::<MessageId>() {
            Ok(id) => LookupQuery::Id(id.0),
            Err(why) => return Response::text(400, format!("{why}\n")),
        },
        (None, Some(topic), Some(key)) => LookupQuery::Key { topic, key: key.into_bytes() },
        _ => return Response::text(400, "ask for ?id=MESSAGE_ID or ?topic=TOPIC&key=KEY\n"),
    };
    let found = match lookup_everywhere(core, &query).await {
        Ok(found) => found,
        Err(why) => return Response::text(503, format!("{why}\n")),
    };
    let mut messages = Vec::new();
    let readable =
        found.iter().filter(|(topic, _, _)| principal.allows(core, Operation::Read, authorizer::topic(topic)));
    for (topic, queue, batch_bytes) in readable {
        messages.extend(matching(&query, topic, *queue, batch_bytes));
    }
    messages.truncate(FOUND_SHOWN_MAX);
    for m in &mut messages {
        let id = m["id"].as_str().unwrap_or("").as_bytes().to_vec();
        let key = LookupQuery::Key { topic: TRACE_TOPIC.into(), key: id.clone() };
        let mut events: Vec<Json> = match lookup_everywhere(core, &key).await {
            Ok(found) => found.iter().flat_map(|(_, _, b)| values(b, &id)).collect(),
            Err(_) => Vec::new(),
        };
        events.sort_by_key(|e| e["time_ms"].as_i64().unwrap_or(0));
        m["trace"] = Json::Array(events);
    }
    Response::json(&json!({"messages": messages}))
}

/// What every shard's lookup found: (topic, queue, batch). Shard 0 looks
/// itself; the others are asked with the client's own request, over the mesh.
async fn lookup_everywhere(core: &Core, query: &LookupQuery) -> Result<Vec<(String, u32, Vec<u8>)>, Failure> {
    let mut found = lookup::lookup(core, query).await?.found;
    let mut body = Writer::default();
    query.encode(&mut body);
    for shard in (0..core.shards()).filter(|s| *s != core.id()) {
        let request = frame::request(ApiKey::LookupMessages as u16, 0, 1, &body.buf);
        let reply = core.mesh().forward(shard, request).await?;
        let response = frame::Response::parse(&reply[4..])?;
        if response.error != crate::protocol::ErrorCode::None {
            // Another shard's refusal of the forwarded lookup: named as it answered.
            let m = format!("shard {shard} answered {:?}: {}", response.error, response.message);
            return Err(Failure(Reason::Internal, m));
        }
        found.extend(LookedUp::decode(&mut Reader::new(response.body))?.found);
    }
    Ok(found)
}

/// The records of a found batch the query asked for, as JSON.
fn matching(query: &LookupQuery, topic: &str, queue: u32, bytes: &[u8]) -> Vec<Json> {
    let mut out = Vec::new();
    for b in batch::split(bytes) {
        let Some(h) = BatchHeader::decode(b) else { continue };
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(b, &mut inflated) else { continue };
        for (k, r) in records.enumerate() {
            let Ok(r) = r else { break };
            let wanted = match query {
                LookupQuery::Id(id) => r.message_id == *id,
                LookupQuery::Key { key, .. } => r.key == Some(key.as_slice()),
            };
            if wanted {
                let id = MessageId(r.message_id).to_string();
                // A tombstone's value and a record without a key show as null.
                let value = r.value.map(|v| String::from_utf8_lossy(&v[..v.len().min(VALUE_SHOWN_MAX)]).into_owned());
                out.push(json!({"id": id, "topic": topic, "queue": queue, "offset": h.base_offset + k as u64,
                    "key": r.key.map(String::from_utf8_lossy), "tag": String::from_utf8_lossy(r.tag),
                    "timestamp_ms": h.first_timestamp_ms.saturating_add(r.timestamp_delta_ms),
                    "value": value, "value_bytes": r.value.map_or(0, <[u8]>::len)}));
            }
        }
    }
    out
}

/// The JSON values of a batch's records keyed `key` (a message's trace events).
fn values(bytes: &[u8], key: &[u8]) -> Vec<Json> {
    let mut out = Vec::new();
    for b in batch::split(bytes) {
        let mut inflated = Vec::new();
        let Ok(records) = batch::records(b, &mut inflated) else { continue };
        let values = records.flatten().filter(|r| r.key == Some(key)).filter_map(|r| r.value);
        out.extend(values.filter_map(|v| serde_json::from_slice(v).ok()));
    }
    out
}
