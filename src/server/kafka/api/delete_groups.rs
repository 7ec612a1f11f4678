//! DeleteGroups: a group without members loses its committed offsets
//! (durably) and is forgotten; one with members is refused
//! (NON_EMPTY_GROUP), one unknown here is GROUP_ID_NOT_FOUND. On the
//! group's coordinator, per group authorized (Delete).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::groups::Deletion;
use crate::server::kafka::groups::coordinated;
use crate::server::kafka::{codes, Services};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{ApiKey, DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::ResponseError;

pub struct DeleteGroups;

impl Api for DeleteGroups {
    const KEY: ApiKey = ApiKey::DeleteGroups;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_DeleteGroups";
    const NOTE: &'static str = "an empty group's offsets deleted durably and the group forgotten; \
                                one with members refused";
    type Request = DeleteGroupsRequest;
    type Response = DeleteGroupsResponse;

    async fn serve(s: &Services, r: DeleteGroupsRequest, at: &At) -> Option<DeleteGroupsResponse> {
        let mut results = Vec::new();
        for group in &r.groups_names {
            let code = match coordinated(s, &at.principal, Operation::Delete, group) {
                Err(code) => code,
                Ok(()) => match s.groups.delete(group).await {
                    Ok(deletion) => deletion_code(deletion),
                    Err(f) => codes::of(f.0),
                },
            };
            results.push(DeletableGroupResult::default().with_group_id(group.clone()).with_error_code(code));
        }
        Some(DeleteGroupsResponse::default().with_results(results).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// Kafka's code for a deletion's outcome (a group's, or its offsets').
pub fn deletion_code(deletion: Deletion) -> i16 {
    match deletion {
        Deletion::Deleted => codes::NONE,
        Deletion::NotEmpty => ResponseError::NonEmptyGroup.code(),
        Deletion::NotFound => ResponseError::GroupIdNotFound.code(),
        Deletion::Subscribed => ResponseError::GroupSubscribedToTopic.code(),
    }
}
