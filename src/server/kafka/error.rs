//! Why a Kafka connection stops: what the listener logs when it closes one
//! (the client sees the connection close, as Kafka's do).

use kafka_protocol::messages::ApiKey;

/// A Kafka connection's fatal error.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    #[error("a Kafka request header takes 8 bytes; the frame has {0}")]
    ShortHeader(usize),
    #[error("a {0:?} v{1} request does not decode: {2}")]
    Malformed(ApiKey, i16, String),
    #[error("a Kafka frame of {len} bytes exceeds --frame-bytes-max {max}")]
    FrameTooLarge { len: usize, max: usize },
    #[error("client {0:?} sent a request before authenticating (SASL_SSL or SASL_PLAINTEXT, or a client certificate)")]
    NotAuthenticated(String),
    #[error("a Kafka response did not encode: {0}")]
    Encode(String),
    #[error("the connection: {0}")]
    Io(#[from] std::io::Error),
}
