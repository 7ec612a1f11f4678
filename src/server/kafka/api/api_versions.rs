//! ApiVersions: every API of the table with its versions (Produce's from
//! v0, see `produce.rs`). A client may ask
//! at a version newer than ours: as Kafka, it is answered at v0 with
//! UNSUPPORTED_VERSION and the versions served, and it asks again.

use super::{Api, At, TABLE};
use crate::server::kafka::{KafkaError, Services};
use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

pub struct ApiVersions;

/// The versions whose response we encode (v4, which the 4.x Java client
/// asks first, is v3's schema: it only lets a feature's minimum be 0).
const ANSWERED: (i16, i16) = (0, 4);

impl Api for ApiVersions {
    const KEY: ApiKey = ApiKey::ApiVersions;
    const VERSIONS: (i16, i16) = ANSWERED;
    const NAME: &'static str = "kafka_ApiVersions";
    const NOTE: &'static str = "the APIs of this table; a newer version is answered at v0 with UNSUPPORTED_VERSION";
    const METERED: bool = false;
    type Request = ApiVersionsRequest;
    type Response = ApiVersionsResponse;

    fn accepts(_: i16) -> bool {
        true
    }

    /// Its body may be of a version we do not know: only the header matters.
    fn decode(_: &mut Bytes, _: i16) -> Result<ApiVersionsRequest, KafkaError> {
        Ok(ApiVersionsRequest::default())
    }

    /// Always a v0 response header; the body at v0 when the version is not ours.
    fn response_versions(version: i16) -> (i16, i16) {
        (0, if (ANSWERED.0..=ANSWERED.1).contains(&version) { version } else { 0 })
    }

    async fn serve(_: &Services, _: ApiVersionsRequest, at: &At) -> Option<ApiVersionsResponse> {
        let keys = TABLE
            .iter()
            .map(|api| {
                let (min, max) = api.advertised();
                ApiVersion::default().with_api_key(api.key() as i16).with_min_version(min).with_max_version(max)
            })
            .collect();
        let response = ApiVersionsResponse::default().with_api_keys(keys);
        if (ANSWERED.0..=ANSWERED.1).contains(&at.version) {
            return Some(response);
        }
        Some(response.with_error_code(ResponseError::UnsupportedVersion.code()))
    }
}
