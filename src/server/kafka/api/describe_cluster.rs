//! DescribeCluster (KIP-700): the cluster's id, its brokers (every shard of
//! a broker group that has a leader, as Metadata lists them) and the
//! controller Metadata names, for Kafka's AdminClient `describeCluster`.
//! Only the broker endpoint is served: a request for controllers (v1+ say
//! which they want) is refused with MISMATCHED_ENDPOINT_TYPE, as Kafka's
//! brokers refuse it. The principal's authorized operations on the cluster
//! are given when asked.

use super::{Api, At};
use crate::server::auth::authorizer;
use crate::server::kafka::acls::authorized_operations;
use crate::server::kafka::brokers::{brokers, controller};
use crate::server::kafka::{text, Services};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::ResponseError;

/// Kafka's endpoint types: brokers, and (KRaft's) controllers.
const BROKERS: i8 = 1;
const CONTROLLERS: i8 = 2;

pub struct DescribeCluster;

impl Api for DescribeCluster {
    const KEY: ApiKey = ApiKey::DescribeCluster;
    const VERSIONS: (i16, i16) = (0, 2);
    const NAME: &'static str = "kafka_DescribeCluster";
    const NOTE: &'static str = "the cluster id, the brokers and controller Metadata gives, and the cluster's \
                                authorized operations when asked; the broker endpoint only";
    type Request = DescribeClusterRequest;
    type Response = DescribeClusterResponse;

    async fn serve(s: &Services, r: DescribeClusterRequest, at: &At) -> Option<DescribeClusterResponse> {
        let response = DescribeClusterResponse::default().with_throttle_time_ms(at.throttle_ms());
        if let Some((code, message)) = refused_endpoint(r.endpoint_type) {
            return Some(response.with_error_code(code).with_error_message(Some(text(message))));
        }
        let known: Vec<_> = brokers(&s.core).into_iter().flatten().collect();
        let described = known.iter().map(|b| {
            DescribeClusterBroker::default().with_broker_id(b.node_id).with_host(b.host.clone()).with_port(b.port)
        });
        let asked = r.include_cluster_authorized_operations;
        let operations = authorized_operations(asked, &s.core, &at.principal, authorizer::cluster());
        let cluster_id = s.core.cluster_id().unwrap_or_default();
        Some(
            response
                .with_endpoint_type(BROKERS)
                .with_cluster_id(text(cluster_id))
                .with_controller_id(controller(&known))
                .with_brokers(described.collect())
                .with_cluster_authorized_operations(operations),
        )
    }
}

/// The error code and message for an endpoint type other than brokers.
fn refused_endpoint(endpoint_type: i8) -> Option<(i16, String)> {
    let (code, message) = match endpoint_type {
        BROKERS => return None,
        CONTROLLERS => (
            ResponseError::MismatchedEndpointType,
            "this is a broker endpoint; ringmq has no controller endpoints (etcd keeps the cluster)".to_string(),
        ),
        other => (
            ResponseError::UnsupportedEndpointType,
            format!("unsupported endpoint type {other}: 1 (brokers) is served"),
        ),
    };
    Some((code.code(), message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_broker_endpoint_is_served() {
        assert_eq!(refused_endpoint(BROKERS), None);
        let code = |endpoint| refused_endpoint(endpoint).map(|(code, _)| code);
        assert_eq!(code(CONTROLLERS), Some(ResponseError::MismatchedEndpointType.code()));
        assert_eq!(code(7), Some(ResponseError::UnsupportedEndpointType.code()));
        assert!(refused_endpoint(7).unwrap().1.contains("endpoint type 7"));
    }
}
