//! Quota management, served on shard 0 (the edges forward it there): an
//! entry's limits set (all absent: the entry removed), the list. Each change
//! is stored durably in `DATA_DIR/quotas` before the shared snapshot changes.

use crate::security::quota::Entry;
use crate::server::core::{Core, Failure};

/// Sets an entry; stored before it is answered.
pub async fn alter(core: &Core, entry: Entry) -> Result<(), Failure> {
    let next = core.accounts().quotas.get().with(entry.entity, entry.limits).map_err(Failure::invalid)?;
    let stored = next.clone();
    super::store_in_data_dir(core, "quotas", move |dir| stored.store(dir)).await?;
    core.accounts().quotas.replace(next);
    Ok(())
}

/// Every entry.
pub fn list(core: &Core) -> Vec<Entry> {
    core.quotas().entries().to_vec()
}
