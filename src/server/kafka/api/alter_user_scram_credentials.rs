//! AlterUserScramCredentials: SCRAM credentials set from the salted
//! password the client derived (the broker never sees a password) or
//! deleted, per user and mechanism (Alter on the cluster); a user keeps its
//! other mechanisms, and one left with none is deleted. Stored before the
//! answer, as the native protocol's user changes.

use super::describe_user_scram_credentials::mechanism_code;
use super::{Api, At};
use crate::protocol::scram::{Credential, Mechanism};
use crate::protocol::security::AlterUser;
use crate::security::acl::Operation;
use crate::security::change::AccountsChange;
use crate::server::auth::authorizer;
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey};
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;

pub struct AlterUserScramCredentials;

/// One asked change of a user: a mechanism's code, and the credential to set
/// (or why it is not one), or None to delete it.
type Asked = (i8, Option<Result<Credential, String>>);

impl Api for AlterUserScramCredentials {
    const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
    const VERSIONS: (i16, i16) = (0, 0);
    const NAME: &'static str = "kafka_AlterUserScramCredentials";
    const NOTE: &'static str = "ringmq users' SCRAM credentials set from salted passwords or deleted (Alter on \
                                the cluster), stored durably";
    type Request = AlterUserScramCredentialsRequest;
    type Response = AlterUserScramCredentialsResponse;

    async fn serve(
        s: &Services,
        r: AlterUserScramCredentialsRequest,
        at: &At,
    ) -> Option<AlterUserScramCredentialsResponse> {
        let allowed = at.principal.check(&s.core, Operation::Alter, authorizer::cluster());
        // Each user's changes, in order: a credential to set, or a mechanism to delete.
        let mut changes: BTreeMap<String, Vec<Asked>> = BTreeMap::new();
        for d in &r.deletions {
            changes.entry(d.name.to_string()).or_default().push((d.mechanism, None));
        }
        for u in &r.upsertions {
            let credential = mechanism(u.mechanism).and_then(|m| {
                let iterations = u32::try_from(u.iterations).map_err(|_| format!("iterations {}", u.iterations))?;
                Credential::from_salted(m, &u.salted_password, u.salt.to_vec(), iterations).map_err(|e| e.to_string())
            });
            changes.entry(u.name.to_string()).or_default().push((u.mechanism, Some(credential)));
        }
        let mut results = Vec::new();
        for (user, asked) in changes {
            let outcome = match &allowed {
                Err(f) => Err((ResponseError::ClusterAuthorizationFailed.code(), f.1.clone())),
                Ok(()) => alter(s, &user, asked).await,
            };
            let result = AlterUserScramCredentialsResult::default().with_user(text(user));
            results.push(match outcome {
                Ok(()) => result,
                Err((code, m)) => result.with_error_code(code).with_error_message(Some(text(m))),
            });
        }
        Some(AlterUserScramCredentialsResponse::default().with_results(results).with_throttle_time_ms(at.throttle_ms()))
    }
}

fn mechanism(code: i8) -> Result<Mechanism, String> {
    Mechanism::ALL
        .into_iter()
        .find(|m| mechanism_code(*m) == code)
        .ok_or_else(|| format!("mechanism {code} is not one ringmq offers (SCRAM-SHA-256 1, SCRAM-SHA-512 2)"))
}

/// One user's changes made on its current credentials, together.
async fn alter(
    s: &Services,
    user: &str,
    asked: Vec<(i8, Option<Result<Credential, String>>)>,
) -> Result<(), (i16, String)> {
    let invalid = |m: String| (ResponseError::UnacceptableCredential.code(), m);
    let users = s.core.accounts().users.get();
    let mut credentials: BTreeMap<Mechanism, Credential> =
        Mechanism::ALL.into_iter().filter_map(|m| Some((m, users.credential(user, m)?.clone()))).collect();
    for (code, change) in asked {
        let m = mechanism(code).map_err(|m| (ResponseError::UnsupportedSaslMechanism.code(), m))?;
        match change {
            Some(credential) => {
                credentials.insert(m, credential.map_err(invalid)?);
            }
            None => {
                credentials.remove(&m).ok_or_else(|| {
                    (ResponseError::ResourceNotFound.code(), format!("user {user:?} has no {} credential", m.name()))
                })?;
            }
        }
    }
    let change = match credentials.is_empty() {
        true => AlterUser::Delete { user: user.to_string() },
        false => AlterUser::Upsert { user: user.to_string(), credentials: credentials.into_iter().collect() },
    };
    s.core.change_accounts(AccountsChange::User(change)).await.map(drop).map_err(|f| (codes::of(f.0), f.1))
}
