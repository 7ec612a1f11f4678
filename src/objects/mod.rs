//! Object storage: the S3 client tiered storage keeps sealed data in (any
//! S3-compatible server: AWS S3, SeaweedFS, MinIO, Ceph). Requests are
//! signed by rusty-s3 (SigV4, as presigned URLs, path or virtual-host
//! style) and sent by hyper over HTTP/1.1, TLS through rustls (ring) with
//! the system's roots. Calls that fail for a reason that passes (the
//! connection, a timeout, a 5xx, SlowDown) are retried with back-off up to
//! `ObjectStoreConfig::attempts`; the rest are answered at once with what
//! the server said.

mod client;
mod config;
mod error;

pub use client::{Listed, ObjectStore, Part, Upload};
pub use config::{Credentials, ObjectStoreConfig, UrlStyle};
pub use error::ObjectError;
