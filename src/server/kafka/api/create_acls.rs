//! CreateAcls: rules added (Alter on the cluster), each checked on its own
//! (a bad one refused with why, the good ones added together and stored
//! before the answer); the same rules the native protocol manages.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer;
use crate::server::kafka::acls::KafkaAcl;
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::ResponseError;

pub struct CreateAcls;

impl Api for CreateAcls {
    const KEY: ApiKey = ApiKey::CreateAcls;
    const VERSIONS: (i16, i16) = (1, 3);
    const NAME: &'static str = "kafka_CreateAcls";
    const NOTE: &'static str = "ringmq ACL rules added (Alter on the cluster), stored durably; a rule for one \
                                host or an operation ringmq lacks refused";
    type Request = CreateAclsRequest;
    type Response = CreateAclsResponse;

    async fn serve(s: &Services, r: CreateAclsRequest, at: &At) -> Option<CreateAclsResponse> {
        let response = CreateAclsResponse::default().with_throttle_time_ms(at.throttle_ms());
        let refused =
            |code: i16, m: String| AclCreationResult::default().with_error_code(code).with_error_message(Some(text(m)));
        if let Err(f) = at.principal.check(&s.core, Operation::Alter, authorizer::cluster()) {
            let code = ResponseError::ClusterAuthorizationFailed.code();
            return Some(response.with_results(r.creations.iter().map(|_| refused(code, f.1.clone())).collect()));
        }
        let rules: Vec<Result<_, String>> = r
            .creations
            .iter()
            .map(|c| {
                KafkaAcl {
                    resource_type: c.resource_type,
                    name: &c.resource_name,
                    pattern: c.resource_pattern_type,
                    principal: &c.principal,
                    host: &c.host,
                    operation: c.operation,
                    permission: c.permission_type,
                }
                .to_rule()
            })
            .collect();
        let valid: Vec<_> = rules.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
        let added = match valid.is_empty() {
            true => Ok(0),
            false => s.core.change_accounts(AccountsChange::AddAcls(valid)).await,
        };
        let results = rules
            .into_iter()
            .map(|rule| match (rule, &added) {
                (Err(m), _) => refused(ResponseError::InvalidRequest.code(), m),
                (Ok(_), Err(f)) => refused(codes::of(f.0), f.1.clone()),
                (Ok(_), Ok(_)) => AclCreationResult::default(),
            })
            .collect();
        Some(response.with_results(results))
    }
}
