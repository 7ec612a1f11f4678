//! `ringmq topic create|list|describe|alter|add-queues|delete-records|delete`:
//! topics, their queues and offsets, their own configs (Kafka's names, the
//! same ones a Kafka client sets), more queues, and records deleted below
//! an offset.

use crate::cli::name_value;
use crate::cli::settings::Flush;
use crate::BrokerArg;
use clap::Subcommand;
use ringmq::protocol::messages::TopicChange;

#[derive(Subcommand)]
pub enum TopicAction {
    /// Create a topic.
    Create {
        name: String,
        /// Number of queues (spread over all shards).
        #[arg(long, default_value_t = 8)]
        queues: u32,
        #[arg(long, value_enum, default_value_t = Flush::Sync)]
        flush: Flush,
        /// A config of its own, NAME=VALUE (repeatable): retention.ms, retention.bytes, cleanup.policy, delete.retention.ms, min.cleanable.dirty.ratio, min.compaction.lag.ms, max.compaction.lag.ms, max.message.bytes, message.timestamp.type, min.insync.replicas, remote.storage.enable, local.retention.ms, local.retention.bytes
        #[arg(long = "config", value_parser = name_value)]
        configs: Vec<(String, String)>,
        /// delete, compact or compact,delete (the config cleanup.policy)
        #[arg(long)]
        cleanup_policy: Option<String>,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// List topic names.
    List {
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Show a topic's own configs, then its queues, owning shards and offsets.
    Describe {
        name: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Change a topic's configs, all or none.
    Alter {
        name: String,
        /// NAME=VALUE (repeatable)
        #[arg(long = "set", value_parser = name_value)]
        set: Vec<(String, String)>,
        /// NAME, back to the broker's default (repeatable)
        #[arg(long = "unset")]
        unset: Vec<String>,
        /// NAME=ITEMS added to a list config such as cleanup.policy (repeatable)
        #[arg(long = "append", value_parser = name_value)]
        append: Vec<(String, String)>,
        /// NAME=ITEMS removed from a list config (repeatable)
        #[arg(long = "subtract", value_parser = name_value)]
        subtract: Vec<(String, String)>,
        /// Only check the changes.
        #[arg(long)]
        validate_only: bool,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Grow a topic to more queues (keys hashed to a queue may then move).
    AddQueues {
        name: String,
        /// The new number of queues.
        #[arg(long)]
        queues: u32,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Delete a queue's records below an offset (its start moves there).
    DeleteRecords {
        name: String,
        #[arg(long)]
        queue: u32,
        /// The first offset kept (default: the end, deleting every record).
        #[arg(long)]
        before: Option<u64>,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Delete a topic.
    Delete {
        name: String,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

pub fn run(action: TopicAction) -> Result<(), String> {
    let failed = |e: ringmq::client::ClientError| e.to_string();
    match action {
        TopicAction::Create { name, queues, flush, mut configs, cleanup_policy, broker } => {
            configs.extend(cleanup_policy.map(|p| ("cleanup.policy".to_string(), p)));
            let client = crate::connect(&broker)?;
            client.create_topic_with_configs(&name, queues, flush as u8, &configs).map_err(failed)?;
            println!("created topic {name} with {queues} queues");
        }
        TopicAction::List { broker } => {
            for name in crate::connect(&broker)?.list_topics().map_err(failed)? {
                println!("{name}");
            }
        }
        TopicAction::Describe { name, broker } => describe(&name, &broker)?,
        TopicAction::Alter { name, set, unset, append, subtract, validate_only, broker } => {
            let changes: Vec<TopicChange> = set
                .into_iter()
                .map(|(n, v)| TopicChange::Set(n, v))
                .chain(unset.into_iter().map(TopicChange::Unset))
                .chain(append.into_iter().map(|(n, v)| TopicChange::Append(n, v)))
                .chain(subtract.into_iter().map(|(n, v)| TopicChange::Subtract(n, v)))
                .collect();
            if changes.is_empty() {
                return Err("nothing to change: give --set, --unset, --append or --subtract".into());
            }
            crate::connect(&broker)?.alter_topic(&name, &changes, validate_only).map_err(failed)?;
            let done = if validate_only { "would take" } else { "took" };
            println!("topic {name} {done} {} change(s)", changes.len());
        }
        TopicAction::AddQueues { name, queues, broker } => {
            crate::connect(&broker)?.add_queues(&name, queues).map_err(failed)?;
            println!("topic {name} has {queues} queues");
        }
        TopicAction::DeleteRecords { name, queue, before, broker } => {
            let start = crate::connect(&broker)?.delete_records(&name, queue, before).map_err(failed)?;
            println!("queue {queue} of topic {name} starts at {start}");
        }
        TopicAction::Delete { name, broker } => {
            crate::connect(&broker)?.delete_topic(&name).map_err(failed)?;
            println!("deleted topic {name}");
        }
    }
    Ok(())
}

fn describe(name: &str, broker: &BrokerArg) -> Result<(), String> {
    let client = crate::connect(broker)?;
    let t = client.topic(name).map_err(|e| e.to_string())?;
    println!("topic {} flush {}", t.name, if t.flush == 1 { "async" } else { "sync" });
    let configs = client.topic_configs(name).map_err(|e| e.to_string())?;
    if configs.is_empty() {
        println!("configs: the broker's defaults");
    }
    for (config, value) in configs {
        println!("config {config}={value}");
    }
    println!("{:>6} {:>6} {:>22} {:>12} {:>12}", "queue", "shard", "address", "start", "end");
    for (q, shard) in t.queue_shards.iter().enumerate() {
        let (start, end) = client.list_offsets(name, q as u32).map_err(|e| e.to_string())?;
        let addr = client.owner(name, q as u32).map_err(|e| e.to_string())?;
        println!("{q:>6} {shard:>6} {addr:>22} {start:>12} {end:>12}");
    }
    Ok(())
}
