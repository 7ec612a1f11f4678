//! DescribeAcls: the rules a filter selects (Describe on the cluster),
//! grouped by resource as Kafka answers; the same rules the native
//! protocol and `ringmq acl` manage.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::{self, authorizer};
use crate::server::kafka::acls::{kafka_codes, KafkaFilter};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{ApiKey, DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

pub struct DescribeAcls;

impl Api for DescribeAcls {
    const KEY: ApiKey = ApiKey::DescribeAcls;
    const VERSIONS: (i16, i16) = (1, 3);
    const NAME: &'static str = "kafka_DescribeAcls";
    const NOTE: &'static str = "ringmq's ACL rules a filter selects (Describe on the cluster), every host";
    type Request = DescribeAclsRequest;
    type Response = DescribeAclsResponse;

    async fn serve(s: &Services, r: DescribeAclsRequest, at: &At) -> Option<DescribeAclsResponse> {
        let response = DescribeAclsResponse::default().with_throttle_time_ms(at.throttle_ms());
        if let Err(f) = at.principal.check(&s.core, Operation::Describe, authorizer::cluster()) {
            let code = ResponseError::ClusterAuthorizationFailed.code();
            return Some(response.with_error_code(code).with_error_message(Some(text(f.1))));
        }
        let filter = KafkaFilter {
            resource_type: r.resource_type_filter,
            name: r.resource_name_filter.as_deref(),
            pattern: r.pattern_type_filter,
            principal: r.principal_filter.as_deref(),
            host: r.host_filter.as_deref(),
            operation: r.operation,
            permission: r.permission_type,
        };
        let all = auth::admin::acls(&s.core, &Default::default());
        let rules = match filter.select(&all) {
            Ok(rules) => rules,
            Err(m) => {
                let code = ResponseError::InvalidRequest.code();
                return Some(response.with_error_code(code).with_error_message(Some(text(m))));
            }
        };
        let mut resources: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
        for rule in &rules {
            let (kind, name, pattern, operation, permission) = kafka_codes(rule);
            resources.entry((kind, name, pattern)).or_default().push(
                AclDescription::default()
                    .with_principal(text(rule.principal.clone()))
                    .with_host(text("*"))
                    .with_operation(operation)
                    .with_permission_type(permission),
            );
        }
        let resources = resources
            .into_iter()
            .map(|((kind, name, pattern), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(kind)
                    .with_resource_name(text(name))
                    .with_pattern_type(pattern)
                    .with_acls(acls)
            })
            .collect();
        Some(response.with_resources(resources))
    }
}
