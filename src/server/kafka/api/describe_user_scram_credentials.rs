//! DescribeUserScramCredentials: the users (all, or those named) and the
//! SCRAM mechanisms and iterations each has credentials for (Describe on
//! the cluster); the same users the native protocol and `ringmq user` manage.

use super::{Api, At};
use crate::protocol::scram::Mechanism;
use crate::security::acl::Operation;
use crate::server::auth::authorizer;
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{ApiKey, DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse};
use kafka_protocol::ResponseError;

pub struct DescribeUserScramCredentials;

/// Kafka's codes of the SCRAM mechanisms.
pub fn mechanism_code(m: Mechanism) -> i8 {
    match m {
        Mechanism::ScramSha256 => 1,
        Mechanism::ScramSha512 => 2,
    }
}

impl Api for DescribeUserScramCredentials {
    const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_DescribeUserScramCredentials";
    const NOTE: &'static str = "ringmq's users with their SCRAM mechanisms and iterations (Describe on the cluster)";
    type Request = DescribeUserScramCredentialsRequest;
    type Response = DescribeUserScramCredentialsResponse;

    async fn serve(
        s: &Services,
        r: DescribeUserScramCredentialsRequest,
        at: &At,
    ) -> Option<DescribeUserScramCredentialsResponse> {
        let response = DescribeUserScramCredentialsResponse::default().with_throttle_time_ms(at.throttle_ms());
        if let Err(f) = at.principal.check(&s.core, Operation::Describe, authorizer::cluster()) {
            let code = ResponseError::ClusterAuthorizationFailed.code();
            return Some(response.with_error_code(code).with_error_message(Some(text(f.1))));
        }
        let users = s.core.accounts().users.get();
        let names: Vec<String> = match &r.users {
            Some(asked) => asked.iter().map(|u| u.name.to_string()).collect(),
            None => users.names().map(str::to_string).collect(),
        };
        let results = names
            .into_iter()
            .map(|name| {
                let result = DescribeUserScramCredentialsResult::default().with_user(text(name.clone()));
                if !users.contains(&name) {
                    let code = ResponseError::ResourceNotFound.code();
                    return result.with_error_code(code).with_error_message(Some(text(format!("no user {name:?}"))));
                }
                let infos = Mechanism::ALL
                    .into_iter()
                    .filter_map(|m| users.credential(&name, m).map(|c| (m, c.iterations)))
                    .map(|(m, iterations)| {
                        CredentialInfo::default().with_mechanism(mechanism_code(m)).with_iterations(iterations as i32)
                    })
                    .collect();
                result.with_credential_infos(infos)
            })
            .collect();
        Some(response.with_results(results))
    }
}
