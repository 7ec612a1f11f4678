//! Why an object store call failed, with what a user can do about it.

/// A failed object store call.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("the object store settings are wrong: {0}")]
    Config(String),
    #[error("no credentials for the object store: {0}")]
    NoCredentials(String),
    #[error("{what}: no such object in the bucket")]
    NotFound { what: String },
    #[error("bucket {bucket:?} does not exist at {endpoint} (create it, or check --s3-bucket and --s3-endpoint)")]
    NoBucket { bucket: String, endpoint: String },
    #[error(
        "the object store refused {what}: {status} {code}: {message} (check the credentials and the bucket's policy)"
    )]
    Denied { what: String, status: u16, code: String, message: String },
    #[error("the object store answered {what} with {status} {code}: {message}")]
    Refused { what: String, status: u16, code: String, message: String },
    #[error("{key}: its upload was given up before its last part (nothing was stored)")]
    GivenUp { key: String },
    #[error("the object store is unavailable for {what} after {attempts} attempts: {last}")]
    Unavailable { what: String, attempts: u32, last: String },
}

impl ObjectError {
    /// True for a failure that may pass if the call is made again later.
    pub fn is_retriable(&self) -> bool {
        matches!(self, ObjectError::Unavailable { .. })
    }
}
