//! Which data keys a data directory's batches were sealed with:
//! `DATA_DIR/encryption` lists every key id a broker has sealed with, each
//! with a check value (a sealing of a fixed text, which tells the key
//! without revealing it). A start is refused when a listed key is missing
//! or differs, or when the directory holds sealed batches and no keys are
//! given; a new key (a rotation) is listed before any batch is sealed with it.

use ringmq_shards::crypt::keyring::Keyring;
use std::collections::BTreeMap;
use std::path::Path;

use super::error::io;
use super::NodeError;

/// The file under the data directory.
pub const FILE: &str = "encryption";

/// Checks the keys against the directory's list and records new ones.
pub fn check_and_record(data_dir: &Path, keyring: Option<&Keyring>) -> Result<(), NodeError> {
    let path = data_dir.join(FILE);
    let listed: BTreeMap<u32, String> = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| NodeError::Unreadable { path: path.clone(), why: e.to_string() })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(io("reading", &path)(e)),
    };
    let Some(keyring) = keyring else {
        if listed.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = listed.keys().map(u32::to_string).collect();
        return Err(NodeError::DataKeysNotGiven { dir: data_dir.to_path_buf(), ids: ids.join(", ") });
    };
    for (id, check) in &listed {
        match keyring.check_value(*id) {
            None => return Err(NodeError::DataKeyMissing { dir: data_dir.to_path_buf(), id: *id }),
            Some(value) if value != *check => {
                return Err(NodeError::DataKeyChanged { dir: data_dir.to_path_buf(), id: *id })
            }
            Some(_) => {}
        }
    }
    let all: BTreeMap<u32, String> =
        keyring.ids().into_iter().map(|id| (id, keyring.check_value(id).expect("a key of the ring"))).collect();
    if all != listed {
        let json = serde_json::to_vec_pretty(&all).expect("check values serialize");
        ringmq_shards::replace_durably(data_dir, FILE, &json).map_err(io("storing", &path))?;
    }
    Ok(())
}
