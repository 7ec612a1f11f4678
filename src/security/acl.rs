//! Access control lists: rules that allow or deny a principal an operation
//! on resources (topics, consumer groups, transactional producer groups,
//! the cluster) named literally or by prefix. A deny that matches wins over
//! any allow; with no allow that matches, the answer is no. Stored as JSON
//! in `DATA_DIR/acls`, replaced whole and durably on each change.

use std::path::Path;

/// The file under the data directory.
pub const FILE: &str = "acls";
/// Most rules a broker keeps (each request is checked against them).
pub const RULES_MAX: usize = 100_000;
/// The principal of every user: `User:*`.
pub const ANY_USER: &str = "User:*";
/// The principal of a connection that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

macro_rules! names {
    ($(#[$meta:meta])* pub enum $name:ident { $($variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum $name { $(#[serde(rename = $text)] $variant,)+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            /// Parses a name, case-insensitively.
            pub fn parse(text: &str) -> Result<$name, String> {
                $name::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(text)).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                    format!("{text:?} is not one of {}", names.join(", "))
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

names! {
    /// What a rule is about.
    pub enum ResourceType {
        Topic = "Topic",
        Group = "Group",
        TransactionalId = "TransactionalId",
        Cluster = "Cluster",
    }
}

names! {
    /// How a rule's name matches resource names.
    pub enum PatternType {
        Literal = "Literal",
        Prefixed = "Prefixed",
    }
}

names! {
    /// What may be done. Read, Write, Delete and Alter imply Describe, as in Kafka.
    pub enum Operation {
        All = "All",
        Read = "Read",
        Write = "Write",
        Create = "Create",
        Delete = "Delete",
        Alter = "Alter",
        Describe = "Describe",
        ClusterAction = "ClusterAction",
    }
}

names! {
    pub enum Permission {
        Allow = "Allow",
        Deny = "Deny",
    }
}

/// The one name of the cluster resource.
pub const CLUSTER: &str = "ringmq-cluster";

/// One rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Acl {
    /// `User:NAME`, or `User:*` for every user.
    pub principal: String,
    pub resource: ResourceType,
    pub pattern: PatternType,
    /// The resource's name or prefix; `*` (literal) matches every name.
    pub name: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl Acl {
    /// Checks that the rule is well formed before it is stored.
    pub fn check(&self) -> Result<(), String> {
        let user = self.principal.strip_prefix("User:").unwrap_or_default();
        if user.is_empty() || user.len() > 255 {
            return Err(format!("principal {:?}: User:NAME or User:*", self.principal));
        }
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(format!("resource name {:?}: 1 to 255 bytes", self.name));
        }
        if self.resource == ResourceType::Cluster && self.name != CLUSTER && self.name != "*" {
            return Err(format!("the cluster resource is named {CLUSTER}"));
        }
        Ok(())
    }

    /// Whether the rule speaks of `principal` doing `operation` to this resource.
    fn matches(&self, principal: &str, operation: Operation, resource: ResourceType, name: &str) -> bool {
        let who = self.principal == principal || self.principal == ANY_USER;
        let what = match self.pattern {
            PatternType::Literal => self.name == name || self.name == "*",
            PatternType::Prefixed => name.starts_with(&self.name),
        };
        let implied = match self.permission {
            // An allowed Read, Write, Delete or Alter lets the principal see the resource too.
            Permission::Allow => {
                operation == Operation::Describe
                    && matches!(
                        self.operation,
                        Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                    )
            }
            Permission::Deny => false,
        };
        who && what
            && self.resource == resource
            && (self.operation == operation || self.operation == Operation::All || implied)
    }
}

/// Every rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acls {
    rules: Vec<Acl>,
}

impl Acls {
    /// Loads `DATA_DIR/acls`, or none if there is none.
    pub fn load(data_dir: &Path) -> Result<Acls, String> {
        super::json_file::load(data_dir, FILE)
    }

    /// Stores them durably (a blocking call).
    pub fn store(&self, data_dir: &Path) -> std::io::Result<()> {
        super::json_file::store(self, data_dir, FILE)
    }

    pub fn rules(&self) -> &[Acl] {
        &self.rules
    }

    /// Whether `principal` may do `operation` to the named resource: some
    /// allow matches and no deny does.
    pub fn allows(&self, principal: &str, operation: Operation, resource: ResourceType, name: &str) -> bool {
        let mut allowed = false;
        for rule in self.rules.iter().filter(|r| r.matches(principal, operation, resource, name)) {
            match rule.permission {
                Permission::Deny => return false,
                Permission::Allow => allowed = true,
            }
        }
        allowed
    }

    /// With these rules added (each checked; those already there are kept once).
    pub fn with(&self, added: Vec<Acl>) -> Result<Acls, String> {
        for rule in &added {
            rule.check()?;
        }
        let mut rules = self.rules.clone();
        rules.extend(added);
        rules.sort();
        rules.dedup();
        if rules.len() > RULES_MAX {
            return Err(format!("{} rules; a broker keeps at most {RULES_MAX}", rules.len()));
        }
        Ok(Acls { rules })
    }

    /// Without the rules `filter` matches; how many went.
    pub fn without(&self, filter: &AclFilter) -> (Acls, usize) {
        let rules: Vec<Acl> = self.rules.iter().filter(|r| !filter.matches(r)).cloned().collect();
        let removed = self.rules.len() - rules.len();
        (Acls { rules }, removed)
    }
}

/// Selects rules to list or remove: each field set must be equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFilter {
    pub principal: Option<String>,
    pub resource: Option<ResourceType>,
    pub pattern: Option<PatternType>,
    pub name: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    pub fn matches(&self, rule: &Acl) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == rule.principal)
            && self.resource.is_none_or(|r| r == rule.resource)
            && self.pattern.is_none_or(|p| p == rule.pattern)
            && self.name.as_ref().is_none_or(|n| *n == rule.name)
            && self.operation.is_none_or(|o| o == rule.operation)
            && self.permission.is_none_or(|p| p == rule.permission)
    }
}

/// `User:NAME` for a user name (a name already of that form is kept).
pub fn principal_of(user: &str) -> String {
    if user.starts_with("User:") {
        user.to_string()
    } else {
        format!("User:{user}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(principal: &str, pattern: PatternType, name: &str, operation: Operation, permission: Permission) -> Acl {
        let (principal, name) = (principal.to_string(), name.to_string());
        Acl { principal, resource: ResourceType::Topic, pattern, name, operation, permission }
    }

    #[test]
    fn an_allow_grants_a_deny_beats_it_and_nothing_is_allowed_by_default() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        let acls = Acls::default()
            .with(vec![
                rule("User:alice", Prefixed, "orders-", Write, Allow),
                rule("User:alice", Literal, "orders-secret", All, Deny),
                rule("User:*", Literal, "public", Read, Allow),
            ])
            .unwrap();
        let topic = ResourceType::Topic;
        assert!(acls.allows("User:alice", Write, topic, "orders-eu"));
        assert!(acls.allows("User:alice", Describe, topic, "orders-eu"), "Write implies Describe");
        assert!(!acls.allows("User:alice", Read, topic, "orders-eu"), "nothing allows Read");
        assert!(!acls.allows("User:alice", Write, topic, "orders-secret"), "the deny wins");
        assert!(!acls.allows("User:alice", Describe, topic, "orders-secret"), "a deny of All denies Describe");
        assert!(acls.allows("User:bob", Read, topic, "public") && !acls.allows("User:bob", Write, topic, "public"));
        assert!(!acls.allows("User:alice", Write, ResourceType::Group, "orders-eu"), "another resource type");
        assert!(!Acls::default().allows("User:alice", Describe, topic, "x"), "deny by default");
    }

    #[test]
    fn rules_are_kept_once_removed_by_filter_and_stored_durably() {
        let dir = tempfile::tempdir().unwrap();
        let r = rule("User:a", PatternType::Literal, "t", Operation::Read, Permission::Allow);
        let acls = Acls::default().with(vec![r.clone(), r.clone()]).unwrap();
        assert_eq!(acls.rules().len(), 1);
        acls.store(dir.path()).unwrap();
        assert_eq!(Acls::load(dir.path()).unwrap(), acls);
        let (none, removed) = acls.without(&AclFilter { principal: Some("User:a".into()), ..AclFilter::default() });
        assert_eq!((none.rules().len(), removed), (0, 1));
        assert!(Acls::default()
            .with(vec![rule("alice", PatternType::Literal, "t", Operation::Read, Permission::Allow)])
            .is_err());
        assert_eq!(Operation::parse("write"), Ok(Operation::Write));
    }
}
