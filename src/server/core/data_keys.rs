//! Which data keys a data directory's batches were sealed with:
//! `DATA_DIR/encryption` lists every key id a broker has sealed with, each
//! with a check value (a sealing of a fixed text, which tells the key
//! without revealing it). A start is refused when a listed key is missing
//! or differs, or when the directory holds sealed batches and no keys are
//! given; a new key (a rotation) is listed before any batch is sealed with it.

use ringmq_shards::crypt::keyring::Keyring;
use std::collections::BTreeMap;
use std::path::Path;

/// The file under the data directory.
pub const FILE: &str = "encryption";

/// Checks the keys against the directory's list and records new ones.
pub fn check_and_record(data_dir: &Path, keyring: Option<&Keyring>) -> Result<(), String> {
    let path = data_dir.join(FILE);
    let listed: BTreeMap<u32, String> = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(format!("reading {}: {e}", path.display())),
    };
    let Some(keyring) = keyring else {
        if listed.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = listed.keys().map(u32::to_string).collect();
        return Err(format!(
            "{} holds batches sealed with data keys {}: start with --encryption-keys FILE (or RINGMQ_ENCRYPTION_KEYS) naming them",
            data_dir.display(),
            ids.join(", ")
        ));
    };
    for (id, check) in &listed {
        match keyring.check_value(*id) {
            None => return Err(format!("{} holds batches sealed with data key {id}, which the keys given lack; keep every key a rotation added", data_dir.display())),
            Some(value) if value != *check => {
                return Err(format!("data key {id} of the keys given is not the key {} was sealed with", data_dir.display()))
            }
            Some(_) => {}
        }
    }
    let all: BTreeMap<u32, String> =
        keyring.ids().into_iter().map(|id| (id, keyring.check_value(id).expect("a key of the ring"))).collect();
    if all != listed {
        let json = serde_json::to_vec_pretty(&all).expect("check values serialize");
        ringmq_shards::replace_durably(data_dir, FILE, &json)
            .map_err(|e| format!("storing {}: {e}", path.display()))?;
    }
    Ok(())
}
