//! AlterClientQuotas: each entity's quota keys set or removed together on
//! its current ringmq entry (Alter on the cluster), stored before the
//! answer; `validate_only` checks without storing. Kafka's terms as in
//! `kafka/client_quotas.rs`.

use super::{Api, At};
use crate::security::acl::Operation;
use crate::security::change::AccountsChange;
use crate::security::quota::{Entry, Limits};
use crate::server::auth::{self, authorizer};
use crate::server::kafka::client_quotas::{entity, with_value, Components};
use crate::server::kafka::{codes, text, Services};
use kafka_protocol::messages::alter_client_quotas_request::EntryData as Asked;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey};
use kafka_protocol::ResponseError;

pub struct AlterClientQuotas;

impl Api for AlterClientQuotas {
    const KEY: ApiKey = ApiKey::AlterClientQuotas;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_AlterClientQuotas";
    const NOTE: &'static str = "ringmq's quotas set or removed per entity (Alter on the cluster), stored durably";
    type Request = AlterClientQuotasRequest;
    type Response = AlterClientQuotasResponse;

    async fn serve(s: &Services, r: AlterClientQuotasRequest, at: &At) -> Option<AlterClientQuotasResponse> {
        let allowed = at.principal.check(&s.core, Operation::Alter, authorizer::cluster());
        let mut entries = Vec::new();
        for asked in &r.entries {
            let outcome = match &allowed {
                Err(f) => Err((ResponseError::ClusterAuthorizationFailed.code(), f.1.clone())),
                Ok(()) => alter(s, asked, r.validate_only).await,
            };
            let entity = asked
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            let entry = EntryData::default().with_entity(entity);
            entries.push(match outcome {
                Ok(()) => entry,
                Err((code, m)) => entry.with_error_code(code).with_error_message(Some(text(m))),
            });
        }
        Some(AlterClientQuotasResponse::default().with_entries(entries).with_throttle_time_ms(at.throttle_ms()))
    }
}

/// One entity's operations on its current entry.
async fn alter(s: &Services, asked: &Asked, validate_only: bool) -> Result<(), (i16, String)> {
    let invalid = |m: String| (ResponseError::InvalidRequest.code(), m);
    let named: Components = asked
        .entity
        .iter()
        .map(|e| (e.entity_type.to_string(), e.entity_name.as_ref().map(|n| n.to_string())))
        .collect();
    let entity = entity(&named).map_err(invalid)?;
    let current =
        auth::admin::quotas(&s.core).into_iter().find(|e| e.entity == entity).map_or(Limits::default(), |e| e.limits);
    let mut limits = current;
    for op in &asked.ops {
        limits = with_value(limits, &op.key, (!op.remove).then_some(op.value)).map_err(invalid)?;
    }
    if validate_only {
        return Ok(());
    }
    let change = AccountsChange::Quota(Entry { entity, limits });
    s.core.change_accounts(change).await.map(drop).map_err(|f| (codes::of(f.0), f.1))
}
