//! `ringmq acl add|remove|list`: rules that allow or deny a principal
//! operations on a topic, a consumer group, a transactional producer group
//! or the cluster, named literally or by prefix (deny wins).

use crate::BrokerArg;
use clap::{Args, Subcommand};
use ringmq::security::acl::{principal_of, Acl, AclFilter, Operation, PatternType, Permission, ResourceType, CLUSTER};

#[derive(Subcommand)]
pub enum AclAction {
    /// Add rules: one per --operation.
    Add {
        /// User:NAME (or NAME), or User:* for every user.
        #[arg(long)]
        principal: String,
        #[command(flatten)]
        resource: ResourceArgs,
        /// Match every name starting with the one given (not with --cluster).
        #[arg(long)]
        prefixed: bool,
        /// Read, Write, Create, Delete, Alter, Describe, ClusterAction or All (repeatable)
        #[arg(long = "operation", required = true, value_parser = Operation::parse)]
        operations: Vec<Operation>,
        /// A deny rule (it wins over any allow).
        #[arg(long)]
        deny: bool,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// Remove every rule matching the selectors given.
    Remove {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        broker: BrokerArg,
    },
    /// List the rules matching the selectors given: principal, permission, operation, resource type, pattern, name.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        broker: BrokerArg,
    },
}

/// The resource a rule is about: exactly one of these.
#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct ResourceArgs {
    #[arg(long)]
    topic: Option<String>,
    /// A consumer group.
    #[arg(long)]
    group: Option<String>,
    /// A transactional producer group.
    #[arg(long)]
    transactional_id: Option<String>,
    /// The cluster (topic creation, users, ACLs, replication).
    #[arg(long)]
    cluster: bool,
}

/// Selectors of `remove` and `list`; each one given must match.
#[derive(Args)]
pub struct FilterArgs {
    #[arg(long)]
    principal: Option<String>,
    #[arg(long)]
    topic: Option<String>,
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    transactional_id: Option<String>,
    #[arg(long)]
    cluster: bool,
    #[arg(long, value_parser = Operation::parse)]
    operation: Option<Operation>,
    #[arg(long, value_parser = Permission::parse)]
    permission: Option<Permission>,
}

/// The resource `--topic`, `--group`, `--transactional-id` or `--cluster` names, if one does.
fn named(
    topic: &Option<String>,
    group: &Option<String>,
    transactional_id: &Option<String>,
    cluster: bool,
) -> Option<(ResourceType, String)> {
    match (topic, group, transactional_id, cluster) {
        (Some(t), ..) => Some((ResourceType::Topic, t.clone())),
        (_, Some(g), ..) => Some((ResourceType::Group, g.clone())),
        (_, _, Some(t), _) => Some((ResourceType::TransactionalId, t.clone())),
        (.., true) => Some((ResourceType::Cluster, CLUSTER.to_string())),
        _ => None,
    }
}

impl ResourceArgs {
    fn resource(&self) -> (ResourceType, String) {
        named(&self.topic, &self.group, &self.transactional_id, self.cluster).expect("clap requires one resource")
    }
}

impl FilterArgs {
    fn filter(&self) -> AclFilter {
        let named = named(&self.topic, &self.group, &self.transactional_id, self.cluster);
        let resource = named.as_ref().map(|(kind, _)| *kind);
        // The cluster's rules are selected by kind alone (they may be named `*`).
        let name = named.filter(|(kind, _)| *kind != ResourceType::Cluster).map(|(_, name)| name);
        AclFilter {
            principal: self.principal.as_deref().map(principal_of),
            resource,
            pattern: None,
            name,
            operation: self.operation,
            permission: self.permission,
        }
    }
}

pub fn run(action: AclAction) -> Result<(), String> {
    match action {
        AclAction::Add { principal, resource, prefixed, operations, deny, broker } => {
            if resource.cluster && prefixed {
                return Err("--prefixed names a prefix of topics, groups or transactional ids, not the cluster".into());
            }
            let (kind, name) = resource.resource();
            let pattern = if prefixed { PatternType::Prefixed } else { PatternType::Literal };
            let permission = if deny { Permission::Deny } else { Permission::Allow };
            let principal = principal_of(&principal);
            let rules: Vec<Acl> = operations
                .into_iter()
                .map(|operation| Acl {
                    principal: principal.clone(),
                    resource: kind,
                    pattern,
                    name: name.clone(),
                    operation,
                    permission,
                })
                .collect();
            crate::connect(&broker)?.create_acls(&rules).map_err(|e| e.to_string())
        }
        AclAction::Remove { filter, broker } => {
            let removed = crate::connect(&broker)?.delete_acls(&filter.filter()).map_err(|e| e.to_string())?;
            println!("removed {removed} rules");
            Ok(())
        }
        AclAction::List { filter, broker } => {
            for a in crate::connect(&broker)?.list_acls(&filter.filter()).map_err(|e| e.to_string())? {
                println!("{} {} {} {} {} {}", a.principal, a.permission, a.operation, a.resource, a.pattern, a.name);
            }
            Ok(())
        }
    }
}
