//! AlterTopic: changes to a topic's own configs (Kafka's names: set,
//! unset, and append or subtract items of a list config), checked whole and
//! made all or none through the core (in a cluster in etcd), or only
//! checked. Alter on the topic.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{AlterTopic as Request, TopicChange};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::server::auth::authorizer::topic;
use crate::server::core::topic_configs::ConfigChange;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct AlterTopic;

impl Api for AlterTopic {
    const KEY: ApiKey = ApiKey::AlterTopic;
    const BODIES: (&'static str, &'static str) = (
        "string topic, u8 validate_only, [u8 op (0 set, 1 unset, 2 append, 3 subtract), string config, string value]",
        "(empty)",
    );
    const WRITES: bool = true;
    type Request<'a> = Request;

    fn decode(r: &mut Reader, _: u16) -> Result<Request, DecodeError> {
        Request::decode(r)
    }

    fn authorize(a: &Request, need: &mut Need) -> Result<(), Failure> {
        need(Alter, topic(&a.topic))
    }

    async fn serve(s: &Services, a: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        let changes: Vec<ConfigChange> = a.changes.into_iter().map(change).collect();
        if a.validate_only {
            return s.core.check_topic_change(&a.topic, &changes);
        }
        s.core.configure_topic(&a.topic, changes).await
    }
}

fn change(c: TopicChange) -> ConfigChange {
    match c {
        TopicChange::Set(name, value) => ConfigChange::Set(name, value),
        TopicChange::Unset(name) => ConfigChange::Unset(name),
        TopicChange::Append(name, value) => ConfigChange::Append(name, value),
        TopicChange::Subtract(name, value) => ConfigChange::Subtract(name, value),
    }
}
