//! What the ACL APIs share: Kafka's codes for resource types, pattern
//! types, operations and permissions as ringmq's rules name them, both
//! ways. A rule holds for every host (`*`): a rule for one host is refused,
//! and a filter for one host matches none. Kafka's cluster resource
//! (`kafka-cluster`) is ringmq's (`ringmq-cluster`). Kafka operations
//! ringmq's rules do not have (DescribeConfigs, AlterConfigs,
//! IdempotentWrite) are refused with a message naming those it has.
//! A principal's authorized operations on a resource (Metadata,
//! DescribeCluster, DescribeGroups ask for them) are Kafka's bit field of
//! these codes.

use crate::security::acl::{Acl, AclFilter, Operation, PatternType, Permission, ResourceType, CLUSTER};
use crate::server::auth::authorizer::{Principal, Resource};
use crate::server::core::Core;

/// Kafka's name of the cluster resource.
const KAFKA_CLUSTER: &str = "kafka-cluster";
/// Kafka's ANY in every filter field.
const ANY: i8 = 1;
/// Kafka's MATCH pattern type: rules whose pattern matches the name.
const MATCH: i8 = 2;

const RESOURCES: [(i8, ResourceType); 4] = [
    (2, ResourceType::Topic),
    (3, ResourceType::Group),
    (4, ResourceType::Cluster),
    (5, ResourceType::TransactionalId),
];
const PATTERNS: [(i8, PatternType); 2] = [(3, PatternType::Literal), (4, PatternType::Prefixed)];
const OPERATIONS: [(i8, Operation); 8] = [
    (2, Operation::All),
    (3, Operation::Read),
    (4, Operation::Write),
    (5, Operation::Create),
    (6, Operation::Delete),
    (7, Operation::Alter),
    (8, Operation::Describe),
    (9, Operation::ClusterAction),
];
const PERMISSIONS: [(i8, Permission); 2] = [(2, Permission::Deny), (3, Permission::Allow)];

fn from_code<T: Copy>(table: &[(i8, T)], code: i8, what: &str) -> Result<T, String> {
    table.iter().find(|(c, _)| *c == code).map(|(_, v)| *v).ok_or_else(|| match what {
        "operation" => format!(
            "operation {code} is not one ringmq's rules have (All 2, Read 3, Write 4, Create 5, Delete 6, Alter 7, \
             Describe 8, ClusterAction 9)"
        ),
        _ => format!("{what} {code} is not one ringmq takes here"),
    })
}

fn to_code<T: PartialEq>(table: &[(i8, T)], value: T) -> i8 {
    table.iter().find(|(_, v)| *v == value).map_or(0, |(c, _)| *c)
}

/// A filter field: ANY is none, else the one value.
fn filter_field<T: Copy>(table: &[(i8, T)], code: i8, what: &str) -> Result<Option<T>, String> {
    if code == ANY {
        return Ok(None);
    }
    from_code(table, code, what).map(Some)
}

/// A rule in Kafka's terms, as the APIs carry it.
pub struct KafkaAcl<'a> {
    pub resource_type: i8,
    pub name: &'a str,
    pub pattern: i8,
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub permission: i8,
}

impl KafkaAcl<'_> {
    /// The ringmq rule, checked.
    pub fn to_rule(&self) -> Result<Acl, String> {
        if self.host != "*" {
            return Err(format!("host {:?}: ringmq's rules hold for every host; use *", self.host));
        }
        let resource = from_code(&RESOURCES, self.resource_type, "resource type")?;
        let rule = Acl {
            principal: self.principal.to_string(),
            resource,
            pattern: from_code(&PATTERNS, self.pattern, "pattern type")?,
            name: ringmq_name(resource, self.name),
            operation: from_code(&OPERATIONS, self.operation, "operation")?,
            permission: from_code(&PERMISSIONS, self.permission, "permission")?,
        };
        rule.check().map_err(|e| e.to_string())?;
        Ok(rule)
    }
}

/// A rule's fields as Kafka's codes: resource type, name, pattern type, operation, permission.
pub fn kafka_codes(rule: &Acl) -> (i8, String, i8, i8, i8) {
    let name = if rule.resource == ResourceType::Cluster && rule.name == CLUSTER { KAFKA_CLUSTER } else { &rule.name };
    (
        to_code(&RESOURCES, rule.resource),
        name.to_string(),
        to_code(&PATTERNS, rule.pattern),
        to_code(&OPERATIONS, rule.operation),
        to_code(&PERMISSIONS, rule.permission),
    )
}

fn ringmq_name(resource: ResourceType, name: &str) -> String {
    if resource == ResourceType::Cluster && name == KAFKA_CLUSTER {
        CLUSTER.to_string()
    } else {
        name.to_string()
    }
}

/// A filter in Kafka's terms: which rules it selects.
pub struct KafkaFilter<'a> {
    pub resource_type: i8,
    pub name: Option<&'a str>,
    pub pattern: i8,
    pub principal: Option<&'a str>,
    pub host: Option<&'a str>,
    pub operation: i8,
    pub permission: i8,
}

impl KafkaFilter<'_> {
    /// The rules of `rules` it selects.
    pub fn select(&self, rules: &[Acl]) -> Result<Vec<Acl>, String> {
        let resource = filter_field(&RESOURCES, self.resource_type, "resource type")?;
        let matching = self.pattern == MATCH;
        let pattern = if matching { None } else { filter_field(&PATTERNS, self.pattern, "pattern type")? };
        let name = self.name.map(|n| ringmq_name(resource.unwrap_or(ResourceType::Topic), n));
        let filter = AclFilter {
            principal: self.principal.map(str::to_string),
            resource,
            pattern,
            name: if matching { None } else { name.clone() },
            operation: filter_field(&OPERATIONS, self.operation, "operation")?,
            permission: filter_field(&PERMISSIONS, self.permission, "permission")?,
        };
        if self.host.is_some_and(|h| h != "*") {
            return Ok(Vec::new());
        }
        let selected = rules.iter().filter(|r| filter.matches(r));
        let matched = selected.filter(|r| !matching || name.as_deref().is_none_or(|n| pattern_matches(r, n)));
        Ok(matched.cloned().collect())
    }
}

/// Whether a rule's pattern covers the resource `name` (Kafka's MATCH).
fn pattern_matches(rule: &Acl, name: &str) -> bool {
    match rule.pattern {
        PatternType::Literal => rule.name == name || rule.name == "*",
        PatternType::Prefixed => name.starts_with(&rule.name),
    }
}

/// Kafka's authorized operations of `principal` on `resource`, if `asked`:
/// a bit (1 << the operation's code) for each operation of those a resource
/// of its type takes that the principal may do (Describe where Read, Write,
/// Delete or Alter is allowed, as Kafka implies it); Kafka's i32::MIN when
/// not asked.
pub fn authorized_operations(asked: bool, core: &Core, principal: &Principal, resource: Resource) -> i32 {
    use Operation::*;
    if !asked {
        return i32::MIN;
    }
    let taken: &[Operation] = match resource.kind {
        ResourceType::Topic => &[Read, Write, Create, Delete, Alter, Describe],
        ResourceType::Group => &[Read, Delete, Describe],
        ResourceType::Cluster => &[Create, Alter, Describe, ClusterAction],
        ResourceType::TransactionalId => &[Write, Describe],
    };
    let allowed = taken.iter().filter(|&&operation| principal.allows(core, operation, resource));
    allowed.fold(0, |bits, &operation| bits | 1 << to_code(&OPERATIONS, operation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kafka_rule_maps_to_ringmqs_and_back_and_a_filter_selects_as_kafkas() {
        let kafka = KafkaAcl {
            resource_type: 4,
            name: "kafka-cluster",
            pattern: 3,
            principal: "User:alice",
            host: "*",
            operation: 7,
            permission: 3,
        };
        let rule = kafka.to_rule().unwrap();
        assert_eq!(
            (rule.resource, rule.name.as_str(), rule.operation),
            (ResourceType::Cluster, CLUSTER, Operation::Alter)
        );
        assert_eq!(kafka_codes(&rule), (4, "kafka-cluster".to_string(), 3, 7, 3));
        assert!(KafkaAcl { host: "10.0.0.1", ..kafka }.to_rule().unwrap_err().contains("every host"));
        assert!(KafkaAcl { operation: 11, ..kafka }.to_rule().unwrap_err().contains("Describe 8"));

        let prefixed = Acl {
            principal: "User:bob".into(),
            resource: ResourceType::Topic,
            pattern: PatternType::Prefixed,
            name: "orders.".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        };
        let rules = [rule, prefixed.clone()];
        let filter = |pattern, name| KafkaFilter {
            resource_type: 2,
            name,
            pattern,
            principal: None,
            host: None,
            operation: ANY,
            permission: ANY,
        };
        assert_eq!(filter(MATCH, Some("orders.eu")).select(&rules).unwrap(), std::slice::from_ref(&prefixed));
        assert!(filter(3, Some("orders.eu")).select(&rules).unwrap().is_empty(), "literal: the name itself");
        assert_eq!(filter(ANY, None).select(&rules).unwrap(), [prefixed]);
        let one_host = KafkaFilter { host: Some("10.0.0.1"), ..filter(ANY, None) };
        assert!(one_host.select(&rules).unwrap().is_empty());
    }
}
