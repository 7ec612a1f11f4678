//! Small file-system helpers shared by the log, the index and checkpoints.

use crate::error::{Result, StorageError};
use glommio::io::{Directory, DmaFile, OpenOptions};
use std::path::Path;

/// Opens an existing file read-write with O_DIRECT.
pub async fn open_rw(path: &Path) -> Result<DmaFile> {
    OpenOptions::new().read(true).write(true).dma_open(path).await.map_err(|e| StorageError::io("opening", path, e))
}

/// fsyncs a directory so that renames and new files in it are durable.
pub async fn sync_dir(dir: &Path) -> Result<()> {
    let d = Directory::open(dir).await.map_err(|e| StorageError::io("opening directory", dir, e))?;
    d.sync().await.map_err(|e| StorageError::io("syncing directory", dir, e))?;
    d.close().await.map_err(|e| StorageError::io("closing directory", dir, e))
}

/// Creates a directory (and parents) and syncs its parent.
pub async fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| StorageError::io("creating directory", dir, e))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent).await?;
    }
    Ok(())
}

/// Writes `bytes` (padded with zeros to whole pages) to `dir/name` atomically:
/// a new file is written and synced, renamed over the old one, and the
/// directory synced.
pub async fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .dma_open(&tmp)
        .await
        .map_err(|e| StorageError::io("creating", &tmp, e))?;
    let len = crate::position::page_up(bytes.len() as u64) as usize;
    let mut buf = file.alloc_dma_buffer(len);
    buf.as_bytes_mut()[..bytes.len()].copy_from_slice(bytes);
    buf.as_bytes_mut()[bytes.len()..].fill(0);
    file.write_at(buf, 0).await.map_err(|e| StorageError::io("writing", &tmp, e))?;
    file.fdatasync().await.map_err(|e| StorageError::io("syncing", &tmp, e))?;
    file.rename(&path).await.map_err(|e| StorageError::io("renaming", &tmp, e))?;
    file.close().await.map_err(|e| StorageError::io("closing", &path, e))?;
    sync_dir(dir).await
}

/// Reads a whole small file with O_DIRECT; None if it does not exist.
pub async fn read_small(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match DmaFile::open(path).await {
        Ok(f) => f,
        Err(e) => {
            let e: std::io::Error = e.into();
            if e.kind() == std::io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(StorageError::io("opening", path, e));
        }
    };
    let size = file.file_size().await.map_err(|e| StorageError::io("sizing", path, e))?;
    let data = file.read_at(0, size as usize).await.map_err(|e| StorageError::io("reading", path, e))?;
    let out = data.to_vec();
    file.close().await.map_err(|e| StorageError::io("closing", path, e))?;
    Ok(Some(out))
}

/// Name of the marker file opened before any other Direct I/O file.
const MARKER_FILE: &str = "ringmq.marker";

/// Works around glommio 0.9's io_poll probe: it reads offset 0 of the first
/// Direct I/O file opened on a device, and an empty file makes the probe
/// "succeed", after which every O_DIRECT read on that device fails with
/// EOPNOTSUPP. Opening a non-empty marker first lets the probe see the truth.
pub async fn probe_device(dir: &Path) -> Result<()> {
    let path = dir.join(MARKER_FILE);
    let wanted = crate::position::PAGE_BYTES as usize;
    if std::fs::metadata(&path).map(|m| m.len() as usize).unwrap_or(0) < wanted {
        let mut content = b"ringmq shard directory marker\n".to_vec();
        content.resize(wanted, b'\n');
        std::fs::write(&path, content).map_err(|e| StorageError::io("writing", &path, e))?;
    }
    let file = DmaFile::open(&path).await.map_err(|e| StorageError::io("opening", &path, e))?;
    file.close().await.map_err(|e| StorageError::io("closing", &path, e))
}
