//! The broker's access control lists: the set of rules (types in
//! `ringmq_protocol::acl`), checked for every request. A deny that matches
//! wins over any allow; with no allow that matches, the answer is no. Stored
//! as JSON in `DATA_DIR/acls`, replaced whole and durably on each change.

use super::AccountsError;
pub use ringmq_protocol::acl::*;
use std::path::Path;

/// The file under the data directory.
pub const FILE: &str = "acls";
/// Most rules a broker keeps (each request is checked against them).
pub const RULES_MAX: usize = 100_000;

/// Every rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acls {
    rules: Vec<Acl>,
}

impl Acls {
    /// Loads `DATA_DIR/acls`, or none if there is none.
    pub fn load(data_dir: &Path) -> Result<Acls, AccountsError> {
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
    pub fn with(&self, added: Vec<Acl>) -> Result<Acls, AccountsError> {
        for rule in &added {
            rule.check()?;
        }
        let mut rules = self.rules.clone();
        rules.extend(added);
        rules.sort();
        rules.dedup();
        if rules.len() > RULES_MAX {
            return Err(AccountsError::TooManyRules(rules.len()));
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
