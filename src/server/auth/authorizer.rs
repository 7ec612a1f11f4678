//! Whether a connection's principal may do an operation to a resource. With
//! authentication on, nothing is allowed but what an ACL allows and no ACL
//! denies, and super users may do everything; with it off, everything is
//! allowed (one branch per request). A refusal is a `NotAuthorized` failure
//! naming the operation and the resource, logged once per connection and
//! resource.

use crate::security::acl::{principal_of, Operation, ResourceType, ANONYMOUS, CLUSTER};
use crate::server::core::Reason;
use crate::server::core::{Core, Failure};
use std::cell::RefCell;
use std::collections::HashSet;

/// A resource a request touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource<'a> {
    pub kind: ResourceType,
    pub name: &'a str,
}

pub fn topic(name: &str) -> Resource<'_> {
    Resource { kind: ResourceType::Topic, name }
}

pub fn group(name: &str) -> Resource<'_> {
    Resource { kind: ResourceType::Group, name }
}

/// A transactional producer group.
pub fn transactional(name: &str) -> Resource<'_> {
    Resource { kind: ResourceType::TransactionalId, name }
}

pub fn cluster() -> Resource<'static> {
    Resource { kind: ResourceType::Cluster, name: CLUSTER }
}

/// Most distinct refusals a connection remembers having logged.
const LOGGED_MAX: usize = 1024;

/// One connection's principal and the refusals it has logged.
#[derive(Debug, Default)]
pub struct Principal {
    user: Option<std::rc::Rc<str>>,
    /// The connection's client address.
    peer: Option<std::net::SocketAddr>,
    logged: RefCell<HashSet<(Operation, ResourceType, String)>>,
}

impl Principal {
    /// The principal of a connection from `peer` authenticated as `user` (None: anonymous).
    pub fn new(user: Option<std::rc::Rc<str>>, peer: Option<std::net::SocketAddr>) -> Principal {
        Principal { user, peer, logged: RefCell::default() }
    }

    /// Who the client is, as traces name it: `user@address`, or the address.
    pub fn client(&self) -> String {
        let peer = self.peer.map_or_else(|| "?".to_string(), |p| p.to_string());
        match &self.user {
            Some(user) => format!("{user}@{peer}"),
            None => peer,
        }
    }

    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Whether it may do `operation` to `resource`.
    pub fn allows(&self, core: &Core, operation: Operation, resource: Resource) -> bool {
        let auth = &core.config().auth;
        if !auth.required {
            return true;
        }
        let Some(user) = self.user.as_deref() else { return false };
        auth.super_users.iter().any(|u| u == user)
            || core.acls().allows(&principal_of(user), operation, resource.kind, resource.name)
    }

    /// `allows`, or the refusal (logged the first time for this resource).
    pub fn check(&self, core: &Core, operation: Operation, resource: Resource) -> Result<(), Failure> {
        if self.allows(core, operation, resource) {
            return Ok(());
        }
        let who = self.user.as_deref().map_or(ANONYMOUS.to_string(), principal_of);
        let key = (operation, resource.kind, resource.name.to_string());
        let mut logged = self.logged.borrow_mut();
        if logged.len() < LOGGED_MAX && logged.insert(key) {
            tracing::warn!(shard = core.id(), principal = %who, %operation, resource = %resource.kind, name = resource.name, "not authorized");
        }
        Err(Failure(
            Reason::NotAuthorized,
            format!(
                "{who} may not {operation} {} {:?}: no ACL allows it, or one denies it (see `ringmq acl list`)",
                resource.kind, resource.name
            ),
        ))
    }
}
