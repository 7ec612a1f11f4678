//! JoinGroup: a member joins (or rejoins) a consumer group on its
//! coordinator, parked until the group's rebalance completes.

use super::{check_wait, Api, At, Need, Route};
use crate::protocol::codec::{DecodeError, Reader};
use crate::protocol::messages::{self as msg, Joined};
use crate::protocol::{ApiKey, Writer};
use crate::security::acl::Operation::Read;
use crate::server::auth::authorizer::group;
use crate::server::core::{Core, Failure, Reason};
use crate::server::groups::coordinator::{JoinRequest, NATIVE};
use crate::server::groups::JoinAnswer;
use crate::server::wire::Services;

pub struct JoinGroup;

impl Api for JoinGroup {
    const KEY: ApiKey = ApiKey::JoinGroup;
    const BODIES: (&'static str, &'static str) = (
        "string group, string member (\"\" when new), string client_id, u32 session_timeout_ms, u32 rebalance_timeout_ms, bytes subscription",
        "u32 generation, string member, string leader, [string member, bytes subscription] (every member for the leader; empty for the others)",
    );
    type Request<'a> = msg::JoinGroup;

    fn decode(r: &mut Reader, _: u16) -> Result<msg::JoinGroup, DecodeError> {
        msg::JoinGroup::decode(r)
    }

    fn check(j: &msg::JoinGroup, core: &Core) -> Result<(), Failure> {
        let max = core.config().group_wait_max;
        check_wait("rebalance_timeout_ms", j.rebalance_timeout_ms, max, "--group-wait-ms-max")?;
        check_wait("session_timeout_ms", j.session_timeout_ms, max, "--group-wait-ms-max")
    }

    fn authorize(j: &msg::JoinGroup, need: &mut Need) -> Result<(), Failure> {
        need(Read, group(&j.group))
    }

    fn route(j: &msg::JoinGroup) -> Route<'_> {
        Route::Group(&j.group)
    }

    async fn serve(s: &Services, j: Self::Request<'_>, _: &At<'_>, w: &mut Writer) -> Result<(), Failure> {
        let req = JoinRequest {
            member: j.member,
            client_id: j.client_id,
            session_timeout_ms: j.session_timeout_ms,
            rebalance_timeout_ms: j.rebalance_timeout_ms,
            protocol_type: NATIVE.into(),
            protocols: vec![(NATIVE.into(), j.metadata)],
            instance: None,
            id_first: false,
        };
        // A native join is never asked to come back with an id (`id_first` off).
        let JoinAnswer::Formed(f) = s.groups.join(&j.group, req).await? else {
            return Err(Failure(Reason::Internal, "a native join was asked for a member id".into()));
        };
        Joined { generation: f.generation, member: f.member, leader: f.leader, members: f.members }.encode(w);
        Ok(())
    }
}
