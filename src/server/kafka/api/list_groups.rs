//! ListGroups: the groups this shard coordinates (Kafka's admin clients ask
//! every broker), with members or with committed offsets only, filtered by
//! state (v4+) and type (v5); only those the principal may describe.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ApiKey, GroupId, ListGroupsRequest, ListGroupsResponse};

pub struct ListGroups;

impl Api for ListGroups {
    const KEY: ApiKey = ApiKey::ListGroups;
    const VERSIONS: (i16, i16) = (0, 5);
    const NAME: &'static str = "kafka_ListGroups";
    const NOTE: &'static str = "the groups this shard coordinates (members or offsets), by state and type; \
                                those the principal may describe";
    type Request = ListGroupsRequest;
    type Response = ListGroupsResponse;

    async fn serve(s: &Services, r: ListGroupsRequest, at: &At) -> Option<ListGroupsResponse> {
        let describable = |group: &str| at.principal.allows(&s.core, Operation::Describe, authorizer::group(group));
        let wanted = |field: &str, filter: &[kafka_protocol::protocol::StrBytes]| {
            filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(field))
        };
        let groups = s
            .groups
            .list()
            .into_iter()
            .filter(|g| describable(&g.group) && wanted(&g.state, &r.states_filter))
            .map(|g| {
                let protocol_type = s.groups.protocol_type(&g.group);
                // Kafka's group types: "consumer" for KIP-848's protocol, else "classic".
                let group_type = if s.groups.is_consumer_protocol(&g.group) { "consumer" } else { "classic" };
                ListedGroup::default()
                    .with_group_id(GroupId(text(g.group)))
                    .with_group_state(text(g.state))
                    .with_group_type(text(group_type))
                    .with_protocol_type(text(protocol_type))
            })
            .filter(|g| wanted(&g.group_type, &r.types_filter))
            .collect();
        Some(ListGroupsResponse::default().with_groups(groups).with_throttle_time_ms(at.throttle_ms()))
    }
}
