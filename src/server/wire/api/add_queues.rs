//! AddQueues: a topic grown to more queues (never fewer; the new ones
//! placed as a new topic's are), made on shard 0 (in a cluster in etcd) and
//! applied on every shard before the answer. Keys hashed to a queue may
//! move to another once there are more. Alter on the topic.

use super::{Api, At, Need};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Alter;
use crate::server::auth::authorizer::topic;
use crate::server::core::Failure;
use crate::server::wire::Services;

pub struct AddQueues;

impl Api for AddQueues {
    const KEY: ApiKey = ApiKey::AddQueues;
    const BODIES: (&'static str, &'static str) = ("string topic, u32 queues (the new total)", "(empty)");
    const WRITES: bool = true;
    type Request<'a> = (String, u32);

    fn decode(r: &mut Reader, _: u16) -> Result<(String, u32), DecodeError> {
        Ok((r.string()?, r.u32()?))
    }

    fn authorize((name, _): &(String, u32), need: &mut Need) -> Result<(), Failure> {
        need(Alter, topic(name))
    }

    async fn serve(s: &Services, (name, queues): Self::Request<'_>, _: &At<'_>, _: &mut Writer) -> Result<(), Failure> {
        s.core.add_queues(&name, queues).await
    }
}
