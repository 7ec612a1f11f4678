//! DeleteTopic: the topic and its queues' storage, on every shard.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Delete;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct DeleteTopic;

impl Api for DeleteTopic {
    const KEY: ApiKey = ApiKey::DeleteTopic;
    const BODIES: (&'static str, &'static str) = ("string name", "(empty)");
    const WRITES: bool = true;
    type Request<'a> = String;

    fn decode(r: &mut Reader, _: u16) -> Result<String, DecodeError> {
        r.string()
    }

    fn authorize(name: &String, need: &mut Need) -> Result<(), Failure> {
        need(Delete, topic(name))
    }

    async fn serve(s: &Services, name: Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.core.delete_topic(&name).await
    }
}
