//! AlterConfigs (the older, whole-set form): a topic's configs become
//! exactly those named, the rest back to their defaults; each resource
//! changed whole or refused (INVALID_CONFIG names the bad one).

use super::{Api, At};
use crate::server::core::topic_configs::ConfigChange;
use crate::server::kafka::configs;
use crate::server::kafka::Services;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ApiKey};

pub struct AlterConfigs;

impl Api for AlterConfigs {
    const KEY: ApiKey = ApiKey::AlterConfigs;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_AlterConfigs";
    const NOTE: &'static str = "a topic's configs replaced whole (Alter on the topic), stored durably and applied \
                                on every shard; broker configs are start-up settings";
    type Request = AlterConfigsRequest;
    type Response = AlterConfigsResponse;

    async fn serve(s: &Services, r: AlterConfigsRequest, at: &At) -> Option<AlterConfigsResponse> {
        let mut responses = Vec::new();
        for resource in &r.resources {
            let named =
                resource.configs.iter().filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())));
            let changes = vec![ConfigChange::Replace(named.collect())];
            let target = (resource.resource_type, resource.resource_name.as_str());
            let outcome = configs::alter(&s.core, &at.principal, target, changes, r.validate_only).await;
            let (code, message) = configs::answer(outcome);
            let response = AlterConfigsResourceResponse::default().with_error_code(code).with_error_message(message);
            responses.push(
                response.with_resource_type(resource.resource_type).with_resource_name(resource.resource_name.clone()),
            );
        }
        Some(AlterConfigsResponse::default().with_responses(responses).with_throttle_time_ms(at.throttle_ms()))
    }
}
