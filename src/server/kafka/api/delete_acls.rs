//! DeleteAcls: the rules each filter selects removed (Alter on the
//! cluster), stored before the answer, and listed back as Kafka answers.

use super::{Api, At};
use crate::security::acl::{Acl, AclFilter, Operation};
use crate::security::change::AccountsChange;
use crate::server::auth::{self, authorizer};
use crate::server::core::{Core, Failure};
use crate::server::kafka::acls::{kafka_codes, KafkaFilter};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::{ApiKey, DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::ResponseError;

pub struct DeleteAcls;

impl Api for DeleteAcls {
    const KEY: ApiKey = ApiKey::DeleteAcls;
    const VERSIONS: (i16, i16) = (1, 3);
    const NAME: &'static str = "kafka_DeleteAcls";
    const NOTE: &'static str =
        "the ringmq ACL rules each filter selects removed (Alter on the cluster), stored durably";
    type Request = DeleteAclsRequest;
    type Response = DeleteAclsResponse;

    async fn serve(s: &Services, r: DeleteAclsRequest, at: &At) -> Option<DeleteAclsResponse> {
        let allowed = at.principal.check(&s.core, Operation::Alter, authorizer::cluster());
        let mut results = Vec::new();
        for f in &r.filters {
            let filter = KafkaFilter {
                resource_type: f.resource_type_filter,
                name: f.resource_name_filter.as_deref(),
                pattern: f.pattern_type_filter,
                principal: f.principal_filter.as_deref(),
                host: f.host_filter.as_deref(),
                operation: f.operation,
                permission: f.permission_type,
            };
            let result = DeleteAclsFilterResult::default();
            results.push(match &allowed {
                Err(f) => {
                    let code = ResponseError::ClusterAuthorizationFailed.code();
                    result.with_error_code(code).with_error_message(Some(text(f.1.clone())))
                }
                Ok(()) => match filter.select(&auth::admin::acls(&s.core, &AclFilter::default())) {
                    Err(m) => {
                        result.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(Some(text(m)))
                    }
                    Ok(rules) => match remove(&s.core, &rules).await {
                        Ok(()) => result.with_matching_acls(rules.iter().map(matching).collect()),
                        Err(f) => result.with_error_code(codes::of(f.0)).with_error_message(Some(text(f.1))),
                    },
                },
            });
        }
        Some(DeleteAclsResponse::default().with_filter_results(results).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// Removes exactly these rules.
async fn remove(core: &Core, rules: &[Acl]) -> Result<(), Failure> {
    for rule in rules {
        let exact = AclFilter {
            principal: Some(rule.principal.clone()),
            resource: Some(rule.resource),
            pattern: Some(rule.pattern),
            name: Some(rule.name.clone()),
            operation: Some(rule.operation),
            permission: Some(rule.permission),
        };
        core.change_accounts(AccountsChange::RemoveAcls(exact)).await?;
    }
    Ok(())
}

fn matching(rule: &Acl) -> DeleteAclsMatchingAcl {
    let (kind, name, pattern, operation, permission) = kafka_codes(rule);
    DeleteAclsMatchingAcl::default()
        .with_resource_type(kind)
        .with_resource_name(text(name))
        .with_pattern_type(pattern)
        .with_principal(text(rule.principal.clone()))
        .with_host(text("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}
