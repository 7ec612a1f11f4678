//! Encryption at rest: every batch a producer stores is sealed with
//! AES-256-GCM under the newest data key of the shard's keyring
//! (`keyring.rs`), the key's id in the sealed batch (`sealed.rs`), so keys
//! can be added (rotated) while batches sealed under older ones stay
//! readable. Reads open batches before they return them; the log, index,
//! lookup and checkpoint files never hold a payload in clear (the index and
//! lookup files hold positions, sizes and hashes only).

pub mod keyring;
pub mod sealed;

use crate::error::{Result, StorageError};
use std::borrow::Cow;

/// A stored batch in clear: opened if sealed (which needs a keyring), else as it is.
pub(crate) fn in_clear<'a>(
    keyring: Option<&keyring::Keyring>,
    stored: &'a [u8],
    position: u64,
) -> Result<Cow<'a, [u8]>> {
    if !sealed::is_sealed(stored) {
        return Ok(Cow::Borrowed(stored));
    }
    let sealed_error = |detail: String| StorageError::Sealed { position, detail };
    let keyring = keyring.ok_or_else(|| sealed_error("this shard was given no data keys".into()))?;
    sealed::open(keyring, stored).map(Cow::Owned).map_err(|e| sealed_error(e.to_string()))
}
