//! The newest leader epoch whose data this node's log may hold, kept in
//! `DATA_DIR/cluster-epoch`: a node that rejoins its group as a follower
//! cuts its log back to where the first later epoch began. Written after
//! the node starts in a role, so it can only lag (a lagging value cuts more,
//! and the leader sends the rest again; it never cuts too little).

use std::io::Write;
use std::path::Path;

const FILE: &str = "cluster-epoch";

/// The recorded epoch, or 0 if the node never served in one.
pub fn load(data_dir: &Path) -> Result<u64, String> {
    let path = data_dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    }
}

/// Records `epoch` durably (written new, synced, renamed over).
pub fn store(data_dir: &Path, epoch: u64) -> Result<(), String> {
    let tmp = data_dir.join(format!("{FILE}.tmp"));
    let failed = |e: std::io::Error| format!("storing {}: {e}", data_dir.join(FILE).display());
    let mut f = std::fs::File::create(&tmp).map_err(failed)?;
    f.write_all(format!("{epoch}\n").as_bytes()).map_err(failed)?;
    f.sync_all().map_err(failed)?;
    std::fs::rename(&tmp, data_dir.join(FILE)).map_err(failed)?;
    std::fs::File::open(data_dir).and_then(|d| d.sync_all()).map_err(failed)
}
