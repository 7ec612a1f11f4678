//! CreateTopic: a topic with its queues (and from version 1 its own
//! configs, by Kafka's names, all valid or the topic is not made), made on
//! shard 0 (in a cluster in etcd) and applied on every shard before the answer.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages as msg;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Create;
use crate::server::auth::authorizer::{cluster, topic};
use crate::server::core::topic_configs::TopicConfigs;
use crate::server::core::topics::NewTopic;
use crate::server::core::Failure;
use crate::server::wire::codes::flush_policy;
use crate::server::wire::Services;

pub struct CreateTopic;

impl Api for CreateTopic {
    const KEY: ApiKey = ApiKey::CreateTopic;
    const VERSIONS: (u16, u16) = (0, 1);
    const BODIES: (&'static str, &'static str) =
        ("string name, u32 queues, u8 flush (0 sync, 1 async), (version 1: [string config, string value])", "(empty)");
    const WRITES: bool = true;
    type Request<'a> = msg::CreateTopic;

    fn decode(r: &mut Reader, version: u16) -> Result<msg::CreateTopic, DecodeError> {
        msg::CreateTopic::decode(r, version)
    }

    fn authorize(c: &msg::CreateTopic, need: &mut Need) -> Result<(), Failure> {
        need(Create, topic(&c.name)).or_else(|_| need(Create, cluster()))
    }

    async fn serve(s: &Services, c: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        let flush = flush_policy(c.flush).ok_or_else(|| Failure::invalid("flush must be 0 (sync) or 1 (async)"))?;
        let configs = TopicConfigs::from_entries(c.configs.iter().map(|(n, v)| (n.as_str(), v.as_str())))?;
        s.core.check_topic_configs(&configs)?;
        s.core.create_topic(NewTopic { name: c.name, queues: c.queues, flush, configs }).await
    }
}
