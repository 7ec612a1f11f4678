//! What AlterConfigs and IncrementalAlterConfigs share: a resource's
//! changes authorized (Alter on the topic), checked whole and made through
//! the core, or only checked (`validate_only`). Only topics have configs a
//! client may change; the broker's are its start-up settings.

use crate::security::acl::Operation;
use crate::server::auth::authorizer::{self, Principal};
use crate::server::core::topic_configs::ConfigChange;
use crate::server::core::{Core, Failure};
use crate::server::kafka::codes;
use kafka_protocol::ResponseError;
use std::rc::Rc;

/// Config resource types.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;

/// Makes (or with `validate_only` checks) `changes` to a resource's
/// configs; Kafka's code and a message if refused.
pub async fn alter(
    core: &Rc<Core>,
    p: &Principal,
    (resource_type, name): (i8, &str),
    changes: Vec<ConfigChange>,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    match resource_type {
        TOPIC => {}
        BROKER => {
            let m = "a broker's configs are its start-up settings (serve's flags or --config file)";
            return Err((ResponseError::InvalidRequest.code(), m.into()));
        }
        other => {
            let m = format!("resource type {other} has no configs here (topics: 2)");
            return Err((ResponseError::InvalidRequest.code(), m));
        }
    }
    if let Err(f) = p.check(core, Operation::Alter, authorizer::topic(name)) {
        return Err((ResponseError::TopicAuthorizationFailed.code(), f.1));
    }
    let refused = |f: Failure| (codes::of(f.0), f.1);
    if validate_only {
        return core.check_topic_change(name, &changes).map_err(refused);
    }
    core.configure_topic(name, changes).await.map_err(refused)
}

/// An outcome as a response's error code and message (0 and none: done).
pub fn answer(outcome: Result<(), (i16, String)>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((code, message)) => (code, Some(super::text(message))),
    }
}
