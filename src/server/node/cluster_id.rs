//! A single node's cluster id, made at its first start and kept in
//! `DATA_DIR/cluster-id`: Kafka clients see the same cluster across restarts
//! (librdkafka and the Java client warn when a cluster's id changes).

use super::error::io;
use super::NodeError;
use crate::server::core::cluster_id::{is_cluster_id, new_cluster_id};
use std::path::Path;

const FILE: &str = "cluster-id";

/// The id the data directory holds, or a new one recorded in it.
pub fn read_or_create(data_dir: &Path) -> Result<String, NodeError> {
    let path = data_dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) if is_cluster_id(text.trim()) => Ok(text.trim().to_string()),
        Ok(text) => Err(NodeError::Unreadable {
            path,
            why: format!("{:?} is not a cluster id (22 characters of base64url); remove the file for a new one", text),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let id = new_cluster_id();
            ringmq_shards::replace_durably(data_dir, FILE, id.as_bytes()).map_err(io("recording", &path))?;
            tracing::info!(cluster_id = %id, "made this node's cluster id");
            Ok(id)
        }
        Err(e) => Err(io("reading", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_made_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let made = read_or_create(dir.path()).unwrap();
        assert!(is_cluster_id(&made), "{made}");
        assert_eq!(read_or_create(dir.path()).unwrap(), made);
    }

    #[test]
    fn a_file_holding_something_else_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), "not an id").unwrap();
        let refused = read_or_create(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("is not a cluster id") && refused.contains("remove the file"), "{refused}");
        assert_eq!(std::fs::read_to_string(dir.path().join(FILE)).unwrap(), "not an id");
    }
}
