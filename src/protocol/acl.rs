//! Access control lists' rules: allow or deny a principal an operation on
//! resources (topics, consumer groups, transactional producer groups, the
//! cluster) named literally or by prefix. The broker keeps and checks the
//! set of rules; clients send rules and filters to add, list and remove them.

/// The principal of every user: `User:*`.
pub const ANY_USER: &str = "User:*";
/// The principal of a connection that did not authenticate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// An ACL rule, or a word of one, that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    #[error("{text:?} is not one of {names}")]
    NotOneOf { text: String, names: String },
    #[error("principal {0:?}: User:NAME or User:*")]
    Principal(String),
    #[error("resource name {0:?}: 1 to 255 bytes")]
    ResourceName(String),
    #[error("the cluster resource is named {CLUSTER}")]
    ClusterName,
}

macro_rules! names {
    ($(#[$meta:meta])* pub enum $name:ident { $($variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        pub enum $name { $(#[cfg_attr(feature = "serde", serde(rename = $text))] $variant,)+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }

            /// Parses a name, case-insensitively.
            pub fn parse(text: &str) -> Result<$name, AclError> {
                $name::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(text)).ok_or_else(|| {
                    let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                    AclError::NotOneOf { text: text.to_string(), names: names.join(", ") }
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
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
    pub fn check(&self) -> Result<(), AclError> {
        let user = self.principal.strip_prefix("User:").unwrap_or_default();
        if user.is_empty() || user.len() > 255 {
            return Err(AclError::Principal(self.principal.clone()));
        }
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(AclError::ResourceName(self.name.clone()));
        }
        if self.resource == ResourceType::Cluster && self.name != CLUSTER && self.name != "*" {
            return Err(AclError::ClusterName);
        }
        Ok(())
    }

    /// Whether the rule speaks of `principal` doing `operation` to this resource.
    pub fn matches(&self, principal: &str, operation: Operation, resource: ResourceType, name: &str) -> bool {
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
