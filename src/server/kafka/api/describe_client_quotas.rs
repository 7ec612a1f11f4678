//! DescribeClientQuotas: ringmq's quota entries a filter selects, in
//! Kafka's terms (`kafka/client_quotas.rs`; Describe on the cluster).

use super::{Api, At};
use crate::security::acl::Operation;
use crate::server::auth::{self, authorizer};
use crate::server::kafka::client_quotas::{components, selected, values, Match};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::ResponseError;

pub struct DescribeClientQuotas;

impl Api for DescribeClientQuotas {
    const KEY: ApiKey = ApiKey::DescribeClientQuotas;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_DescribeClientQuotas";
    const NOTE: &'static str = "ringmq's quotas (user, client-id; producer_byte_rate, consumer_byte_rate, \
                                ringmq_requests_per_sec) a filter selects (Describe on the cluster)";
    type Request = DescribeClientQuotasRequest;
    type Response = DescribeClientQuotasResponse;

    async fn serve(s: &Services, r: DescribeClientQuotasRequest, at: &At) -> Option<DescribeClientQuotasResponse> {
        let response = DescribeClientQuotasResponse::default().with_throttle_time_ms(at.throttle_ms());
        let refused =
            |code: i16, m: String| Some(response.clone().with_error_code(code).with_error_message(Some(text(m))));
        if let Err(f) = at.principal.check(&s.core, Operation::Describe, authorizer::cluster()) {
            return refused(ResponseError::ClusterAuthorizationFailed.code(), f.1);
        }
        let mut filter = Vec::new();
        for c in &r.components {
            let how = match (c.match_type, &c._match) {
                (0, Some(name)) => Match::Exact(name.to_string()),
                (1, _) => Match::Default,
                (2, _) => Match::Any,
                (other, _) => {
                    let m = format!("match type {other} (exact 0 with a name, default 1, any 2)");
                    return refused(ResponseError::InvalidRequest.code(), m);
                }
            };
            filter.push((c.entity_type.to_string(), how));
        }
        let entries = auth::admin::quotas(&s.core)
            .into_iter()
            .map(|e| (components(&e.entity), e.limits))
            .filter(|(entity, _)| selected(entity, &filter, r.strict))
            .map(|(entity, limits)| {
                let entity = entity
                    .into_iter()
                    .map(|(kind, name)| {
                        EntityData::default().with_entity_type(text(kind)).with_entity_name(name.map(text))
                    })
                    .collect();
                let values = values(&limits)
                    .into_iter()
                    .map(|(key, value)| ValueData::default().with_key(text(key)).with_value(value))
                    .collect();
                EntryData::default().with_entity(entity).with_values(values)
            })
            .collect();
        Some(response.with_entries(Some(entries)))
    }
}
