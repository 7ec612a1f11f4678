//! `ringmq quota set|list`: produce and fetch bytes per second and requests
//! per second for a user (or every user) and a client id (or every client).

use crate::BrokerArg;
use clap::Subcommand;
use ringmq::security::quota::{Entity, Entry, Limits};

#[derive(Subcommand)]
pub enum QuotaAction {
    /// Set the limits of a user and client id; with no limit given, remove them.
    Set {
        /// The user [default: every user, each with its own quota]
        #[arg(long)]
        user: Option<String>,
        /// The client id (Kafka clients) [default: every client of the user, sharing the quota]
        #[arg(long)]
        client_id: Option<String>,
        #[arg(long)]
        produce_bytes_per_sec: Option<u64>,
        #[arg(long)]
        fetch_bytes_per_sec: Option<u64>,
        #[arg(long)]
        requests_per_sec: Option<u64>,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// One line per entry: user, client id, then each limit set.
    List {
        #[command(flatten)]
        broker: BrokerArg,
    },
}

pub fn run(action: QuotaAction) -> Result<(), String> {
    match action {
        QuotaAction::Set { user, client_id, produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec, broker } => {
            let entry = Entry {
                entity: Entity { user, client_id },
                limits: Limits { produce_bytes_per_sec, fetch_bytes_per_sec, requests_per_sec },
            };
            crate::connect(&broker)?.set_quota(&entry).map_err(|e| e.to_string())
        }
        QuotaAction::List { broker } => {
            for e in crate::connect(&broker)?.list_quotas().map_err(|e| e.to_string())? {
                let name = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".into());
                let mut line = format!("user={} client_id={}", name(&e.entity.user), name(&e.entity.client_id));
                let limits = [
                    ("produce_bytes_per_sec", e.limits.produce_bytes_per_sec),
                    ("fetch_bytes_per_sec", e.limits.fetch_bytes_per_sec),
                    ("requests_per_sec", e.limits.requests_per_sec),
                ];
                for (key, value) in limits {
                    if let Some(v) = value {
                        line.push_str(&format!(" {key}={v}"));
                    }
                }
                println!("{line}");
            }
            Ok(())
        }
    }
}
