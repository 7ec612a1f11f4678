//! DescribeGroups: each group's state, protocol type and assignment
//! protocol, and its members with their metadata and assignment bytes as
//! their clients sent them; on the group's coordinator, per group
//! authorized (Describe), with the principal's authorized operations on it
//! when asked (v3+). A group unknown here is Dead, as Kafka answers.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::acls::authorized_operations;
use crate::server::kafka::groups::coordinated;
use crate::server::kafka::{text, Services};
use bytes::Bytes;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{ApiKey, DescribeGroupsRequest, DescribeGroupsResponse};

pub struct DescribeGroups;

impl Api for DescribeGroups {
    const KEY: ApiKey = ApiKey::DescribeGroups;
    const VERSIONS: (i16, i16) = (0, 5);
    const NAME: &'static str = "kafka_DescribeGroups";
    const NOTE: &'static str = "state, protocol and members with their metadata and assignment bytes, \
                                on the group's coordinator";
    type Request = DescribeGroupsRequest;
    type Response = DescribeGroupsResponse;

    async fn serve(s: &Services, r: DescribeGroupsRequest, at: &At) -> Option<DescribeGroupsResponse> {
        let asked = r.include_authorized_operations;
        let operations = |group: &str| authorized_operations(asked, &s.core, &at.principal, authorizer::group(group));
        let groups = r
            .groups
            .iter()
            .map(|group| {
                let described = DescribedGroup::default().with_group_id(group.clone());
                if let Err(code) = coordinated(s, &at.principal, Operation::Describe, group) {
                    return described.with_error_code(code);
                }
                let d = s.groups.describe(group);
                let members = s.groups.member_bytes(group).into_iter().map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(text(m.member))
                        .with_client_id(text(m.client_id))
                        .with_client_host(text(""))
                        .with_member_metadata(Bytes::from(m.metadata))
                        .with_member_assignment(Bytes::from(m.assignment))
                });
                let members: Vec<_> = members.collect();
                // A group with neither members nor offsets does not exist: Kafka calls it Dead.
                let state = if members.is_empty() && d.offsets.is_empty() { "Dead".to_string() } else { d.state };
                described
                    .with_group_state(text(state))
                    .with_protocol_type(text(s.groups.protocol_type(group)))
                    .with_protocol_data(text(d.protocol))
                    .with_members(members)
                    .with_authorized_operations(operations(group))
            })
            .collect();
        Some(DescribeGroupsResponse::default().with_groups(groups).with_throttle_time_ms(at.throttle_ms()))
    }
}
