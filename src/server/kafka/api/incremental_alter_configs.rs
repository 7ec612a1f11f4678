//! IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND and
//! SUBTRACT (list configs: `cleanup.policy`) on a topic's configs, each
//! resource's operations made together or refused together.

use super::{Api, At};
use crate::server::core::topic_configs::ConfigChange;
use crate::server::kafka::configs;
use crate::server::kafka::Services;
use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::ResponseError;

pub struct IncrementalAlterConfigs;

impl Api for IncrementalAlterConfigs {
    const KEY: ApiKey = ApiKey::IncrementalAlterConfigs;
    const VERSIONS: (i16, i16) = (0, 1);
    const NAME: &'static str = "kafka_IncrementalAlterConfigs";
    const NOTE: &'static str = "SET, DELETE, APPEND and SUBTRACT on a topic's configs (Alter on the topic), made \
                                together, stored durably and applied on every shard";
    type Request = IncrementalAlterConfigsRequest;
    type Response = IncrementalAlterConfigsResponse;

    async fn serve(
        s: &Services,
        r: IncrementalAlterConfigsRequest,
        at: &At,
    ) -> Option<IncrementalAlterConfigsResponse> {
        let mut responses = Vec::new();
        for resource in &r.resources {
            let outcome = match resource.configs.iter().map(change).collect::<Result<Vec<_>, _>>() {
                Ok(changes) => {
                    let target = (resource.resource_type, resource.resource_name.as_str());
                    configs::alter(&s.core, &at.principal, target, changes, r.validate_only).await
                }
                Err(refused) => Err(refused),
            };
            let (code, message) = configs::answer(outcome);
            let response = AlterConfigsResourceResponse::default().with_error_code(code).with_error_message(message);
            responses.push(
                response.with_resource_type(resource.resource_type).with_resource_name(resource.resource_name.clone()),
            );
        }
        let response = IncrementalAlterConfigsResponse::default().with_responses(responses);
        Some(response.with_throttle_time_ms(at.throttle_ms()))
    }
}

/// One operation as a change of the broker's.
fn change(c: &AlterableConfig) -> Result<ConfigChange, (i16, String)> {
    let name = c.name.to_string();
    let value = || {
        c.value.as_ref().map(|v| v.to_string()).ok_or_else(|| {
            (ResponseError::InvalidRequest.code(), format!("operation {} on {name} needs a value", c.config_operation))
        })
    };
    match c.config_operation {
        0 => Ok(ConfigChange::Set(name.clone(), value()?)),
        1 => Ok(ConfigChange::Unset(name)),
        2 => Ok(ConfigChange::Append(name.clone(), value()?)),
        3 => Ok(ConfigChange::Subtract(name.clone(), value()?)),
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("unknown config operation {other} (SET 0, DELETE 1, APPEND 2, SUBTRACT 3)"),
        )),
    }
}
