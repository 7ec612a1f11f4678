//! `ringmq group list|describe`: consumer groups, their members, and each
//! queue's committed offset, end and lag.

use crate::{BrokerArg, Format};
use clap::Subcommand;
use ringmq::client::QueueLag;
use ringmq::protocol::groups::GroupDescription;

#[derive(Subcommand)]
pub enum GroupAction {
    /// Every consumer group: name, state, members.
    List {
        #[command(flatten)]
        broker: BrokerArg,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A group's state and members, then per queue: the member holding it,
    /// the committed offset, the queue's end and the lag (end - committed).
    Describe {
        group: String,
        #[command(flatten)]
        broker: BrokerArg,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub fn run(action: GroupAction) -> Result<(), String> {
    match action {
        GroupAction::List { broker, format } => {
            let groups = crate::connect(&broker)?.list_groups().map_err(|e| e.to_string())?;
            match format {
                Format::Text => {
                    println!("{:<32} {:<20} MEMBERS", "GROUP", "STATE");
                    for g in groups {
                        println!("{:<32} {:<20} {}", g.group, g.state, g.members);
                    }
                }
                Format::Json => {
                    for g in groups {
                        let line = serde_json::json!({"group": g.group, "state": g.state, "members": g.members});
                        println!("{line}");
                    }
                }
            }
            Ok(())
        }
        GroupAction::Describe { group, broker, format } => {
            let client = crate::connect(&broker)?;
            let described = client.describe_group(&group).map_err(|e| e.to_string())?;
            if described.members.is_empty() && described.offsets.is_empty() {
                return Err(format!("consumer group {group:?} has no members and no committed offsets"));
            }
            let lags = client.group_lag(&described).map_err(|e| e.to_string())?;
            match format {
                Format::Text => print_text(&described, &lags),
                Format::Json => println!("{}", json(&described, &lags)),
            }
            Ok(())
        }
    }
}

fn print_text(d: &GroupDescription, lags: &[QueueLag]) {
    println!(
        "group {} state {} generation {} protocol {}/{} leader {}",
        d.group,
        d.state,
        d.generation,
        or_dash(&d.protocol_type),
        or_dash(&d.protocol),
        or_dash(&d.leader)
    );
    for m in &d.members {
        println!("member {} client {}", m.member, m.client_id);
    }
    println!("{:<32} {:>6} {:>12} {:>12} {:>10}  MEMBER", "TOPIC", "QUEUE", "COMMITTED", "END", "LAG");
    let number = |n: Option<u64>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    for l in lags {
        let member = l.member.as_deref().unwrap_or("-");
        let (committed, lag) = (number(l.committed), number(l.lag()));
        println!("{:<32} {:>6} {:>12} {:>12} {:>10}  {member}", l.topic, l.queue, committed, l.end, lag);
    }
    let total: u64 = lags.iter().filter_map(QueueLag::lag).sum();
    println!("total lag {total}");
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

fn json(d: &GroupDescription, lags: &[QueueLag]) -> serde_json::Value {
    let members: Vec<_> = d
        .members
        .iter()
        .map(|m| serde_json::json!({"member": m.member, "client_id": m.client_id, "queues": m.assignment.topics}))
        .collect();
    let queues: Vec<_> = lags
        .iter()
        .map(|l| {
            serde_json::json!({"topic": l.topic, "queue": l.queue, "member": l.member, "committed": l.committed,
                "end": l.end, "lag": l.lag()})
        })
        .collect();
    serde_json::json!({"group": d.group, "state": d.state, "generation": d.generation, "protocol_type": d.protocol_type,
        "protocol": d.protocol, "leader": d.leader, "members": members, "queues": queues,
        "total_lag": lags.iter().filter_map(QueueLag::lag).sum::<u64>()})
}
