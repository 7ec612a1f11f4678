//! Who a connection is: SASL authentication (SCRAM-SHA-256/512, PLAIN over
//! TLS) or a verified client certificate, per connection (`session.rs`),
//! and the users it is checked against (`users.rs`: changed on shard 0,
//! stored in `DATA_DIR/users`, shared by every shard); what it may do
//! (`authorizer.rs`, over the ACLs `acls.rs` manages); how fast it may go
//! (`quotas.rs`: token buckets per user and client id). Both protocol edges
//! use it.

pub mod acls;
pub mod authorizer;
pub mod quota_admin;
pub mod quotas;
pub mod session;
pub mod users;

use crate::protocol::ErrorCode;
use crate::server::core::{Core, Failure};

/// Runs `store` (a durable write of one of the data directory's files) on
/// the blocking pool; `what` names the file in the failure.
async fn store_in_data_dir(
    core: &Core,
    what: &str,
    store: impl FnOnce(&std::path::Path) -> std::io::Result<()> + Send + 'static,
) -> Result<(), Failure> {
    assert_eq!(core.id(), 0, "{what} are changed on shard 0");
    let dir = core.config().data_dir.clone();
    glommio::executor()
        .spawn_blocking(move || store(&dir))
        .await
        .map_err(|e| Failure(ErrorCode::StorageFailed, format!("storing the {what}: {e}")))
}
