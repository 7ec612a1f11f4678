//! DescribeTopicConfigs: the configs a topic set for itself, by Kafka's
//! names (the rest are the broker's defaults). Describe on the topic.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::encode_configs;
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Describe;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct DescribeTopicConfigs;

impl Api for DescribeTopicConfigs {
    const KEY: ApiKey = ApiKey::DescribeTopicConfigs;
    const BODIES: (&'static str, &'static str) = ("string topic", "[string config, string value] (the topic's own)");
    type Request<'a> = String;

    fn decode(r: &mut Reader, _: u16) -> Result<String, DecodeError> {
        r.string()
    }

    fn authorize(name: &String, need: &mut Need) -> Result<(), Failure> {
        need(Describe, topic(name))
    }

    async fn serve(s: &Services, name: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let metadata = s.core.metadata();
        let t = metadata.topics.get(&name).ok_or_else(|| Failure::unknown_topic(&name))?;
        let entries: Vec<(String, String)> = t.configs.entries().into_iter().map(|(n, v)| (n.to_string(), v)).collect();
        encode_configs(&entries, w);
        Ok(())
    }
}
