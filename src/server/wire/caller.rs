//! Who sent a request: a client connection of this shard (and who it
//! authenticated as), or another shard forwarding a client's request it
//! already checked. Listings are filtered by what the caller may see.

use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::Core;
use std::rc::Rc;

/// Who sent a request.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A client connection of this shard: who it authenticated as.
    Client(Rc<Principal>),
    /// Another shard, forwarding a client's request it already checked.
    Shard,
}

impl Caller {
    /// Whether the caller sees `topic` in a listing (Describe).
    pub fn sees(&self, core: &Core, topic: &str) -> bool {
        self.allows(core, Operation::Describe, authorizer::topic(topic))
    }

    /// Whether the caller sees consumer group `group` in a listing (Describe).
    pub fn sees_group(&self, core: &Core, group: &str) -> bool {
        self.allows(core, Operation::Describe, authorizer::group(group))
    }

    /// Whether the caller may read messages of `topic` (a lookup by id).
    pub fn reads(&self, core: &Core, topic: &str) -> bool {
        self.allows(core, Operation::Read, authorizer::topic(topic))
    }

    /// Who the caller is, as a message trace names the client.
    pub fn client(&self) -> String {
        match self {
            Caller::Client(principal) => principal.client(),
            Caller::Shard => "(forwarded by another shard)".to_string(),
        }
    }

    fn allows(&self, core: &Core, operation: Operation, resource: authorizer::Resource) -> bool {
        match self {
            Caller::Client(principal) => principal.allows(core, operation, resource),
            Caller::Shard => true,
        }
    }
}
