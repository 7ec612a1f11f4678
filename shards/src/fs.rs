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

/// Replaces `dir/name` with `bytes` atomically and durably: written to a new
/// file, synced, renamed over, the directory synced. For small control-plane
/// files (layout, metadata, users); a blocking call.
pub fn replace_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Runs a file-system call that may hold the thread (unlinking a 1 GiB
/// segment held a shard's thread for over a second) on glommio's blocking
/// thread pool, so the shard keeps serving; `op` and `path` name it in the error.
pub async fn blocking<T: Send + 'static>(
    op: &'static str,
    path: &Path,
    call: impl FnOnce(&Path) -> std::io::Result<T> + Send + 'static,
) -> Result<T> {
    let owned = path.to_path_buf();
    glommio::executor().spawn_blocking(move || call(&owned)).await.map_err(|e| StorageError::io(op, path, e))
}

/// True for the errors of a full disk (or an exhausted quota), also when
/// glommio passed on only the error's kind.
pub fn is_no_space(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    let no_space = [rustix::io::Errno::NOSPC, rustix::io::Errno::DQUOT].map(|e| Some(e.raw_os_error()));
    no_space.contains(&error.raw_os_error())
        || matches!(error.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded)
}

/// Bytes free for unprivileged files on the file system holding `dir`
/// (a blocking call: on a shard, use `free_bytes`).
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// `free_space`, off the shard's thread.
pub async fn free_bytes(dir: &Path) -> Result<u64> {
    blocking("measuring free space of", dir, free_space).await
}

/// Creates a directory (and parents) and syncs its parent.
pub async fn create_dir(dir: &Path) -> Result<()> {
    blocking("creating directory", dir, |d| std::fs::create_dir_all(d)).await?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent).await?;
    }
    Ok(())
}

/// Creates (or empties) `path` for reading and writing with O_DIRECT.
pub(crate) async fn create_truncated(path: &Path) -> Result<DmaFile> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .dma_open(path)
        .await
        .map_err(|e| StorageError::io("creating", path, e))
}

/// What `parse` makes of the names of the files in `dir` it accepts,
/// ascending; removes `.tmp` leftovers of creations a crash interrupted.
pub async fn list_numbered<T: Ord>(dir: &Path, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>> {
    let (leftovers, names): (Vec<String>, Vec<String>) =
        list_dir(dir).await?.into_iter().partition(|n| n.ends_with(".tmp"));
    remove_files("removing leftover", leftovers.iter().map(|n| dir.join(n)).collect()).await?;
    let mut numbers: Vec<T> = names.iter().filter_map(|n| parse(n)).collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// The names of the entries of `dir`.
pub async fn list_dir(dir: &Path) -> Result<Vec<String>> {
    blocking("listing", dir, |dir| {
        std::fs::read_dir(dir)?.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect()
    })
    .await
}

/// Bytes a big file is cut by at a time before it is unlinked.
const TRUNCATE_STEP_BYTES: u64 = 32 << 20;

/// Removes big files (deleted segments) off the shard's thread, cut down
/// `TRUNCATE_STEP_BYTES` at a time first: ext4 frees a file's extents in
/// one journal transaction, and while it freed a whole 1 GiB segment the
/// shard's own writes waited on the journal for over a second.
pub async fn remove_big_files(what: &'static str, paths: Vec<std::path::PathBuf>) -> Result<()> {
    let Some(first) = paths.first().cloned() else { return Ok(()) };
    blocking(what, &first, move |_| {
        for path in &paths {
            let file = std::fs::OpenOptions::new().write(true).open(path)?;
            let mut len = file.metadata()?.len();
            while len > 0 {
                len = len.saturating_sub(TRUNCATE_STEP_BYTES);
                file.set_len(len)?;
            }
            std::fs::remove_file(path)?;
        }
        Ok(())
    })
    .await
}

/// Removes files (deleted segments, index files, lookup chunks) off the shard's thread.
pub async fn remove_files(what: &'static str, paths: Vec<std::path::PathBuf>) -> Result<()> {
    let Some(first) = paths.first().cloned() else { return Ok(()) };
    blocking(what, &first, move |_| paths.iter().try_for_each(std::fs::remove_file)).await
}

/// Largest write of background work (zero-fill, index pages, lookup chunks):
/// the device serves requests in order, so a group-commit write queued behind
/// a background one waits for all of it. At ~300 MB/s a 128 KiB write takes
/// ~0.4 ms; a checkpoint's 20 MB lookup chunk in one write stalled appends for
/// ~60 ms.
pub const BACKGROUND_WRITE_BYTES: usize = 128 << 10;

/// Creates `path` at `bytes` long: under a temporary name, fallocate'd,
/// zero-filled (overwriting written blocks syncs faster than writing into
/// unwritten extents), synced, renamed into place and its directory synced,
/// so a crash never leaves a half-made file under the real name.
pub async fn create_zero_filled(path: &Path, bytes: u64, depth: FillDepth<'_>) -> Result<DmaFile> {
    let dir = path.parent().expect("files live in a directory");
    let tmp = path.with_extension(format!("{}.tmp", path.extension().and_then(|e| e.to_str()).unwrap_or("")));
    let file = create_truncated(&tmp).await?;
    let made = async {
        file.pre_allocate(bytes, false).await.map_err(|e| StorageError::io("preallocating", &tmp, e))?;
        zero_fill(&file, &tmp, 0, bytes, depth).await?;
        file.fdatasync().await.map_err(|e| StorageError::io("syncing", &tmp, e))?;
        file.rename(path).await.map_err(|e| StorageError::io("renaming", &tmp, e))
    };
    if let Err(error) = made.await {
        // A half-made file would hold the space a full disk needs back.
        let _ = blocking("removing", &tmp, |tmp| std::fs::remove_file(tmp)).await;
        return Err(error);
    }
    sync_dir(dir).await?;
    Ok(file)
}

/// Gives a file cut at `size` back its length `bytes`: preallocated, the
/// partial page at the cut zero past it, the pages after it zero-filled, synced.
pub async fn extend_zero_filled(file: &DmaFile, path: &Path, size: u64, bytes: u64) -> Result<()> {
    file.pre_allocate(bytes, false).await.map_err(|e| StorageError::io("preallocating", path, e))?;
    let from = size.next_multiple_of(crate::position::PAGE_BYTES);
    zero_fill(file, path, from, bytes, &|_| ZERO_FILL_DEPTH_MAX).await?;
    file.fdatasync().await.map_err(|e| StorageError::io("syncing", path, e))
}

/// Zero-fill writes in flight when the fill must hurry. One at a time could
/// not keep the spare 1 GiB segment ahead of 150 MB/s of appends (they waited
/// ~60 ms for it at rollover); four at a time all along stalled appends for
/// tens of ms while the fill ran.
pub const ZERO_FILL_DEPTH_MAX: usize = 4;

/// Zero-fill writes to keep in flight, given the bytes filled so far.
pub type FillDepth<'a> = &'a dyn Fn(u64) -> usize;

/// Overwrites bytes [from, bytes) of `file` with zeros in background-sized writes, as
/// many in flight as `depth` says (at most `ZERO_FILL_DEPTH_MAX`), so a
/// group-commit write queues behind at most those few.
pub(crate) async fn zero_fill(file: &DmaFile, path: &Path, from: u64, bytes: u64, depth: FillDepth<'_>) -> Result<()> {
    let slice = BACKGROUND_WRITE_BYTES as u64;
    let mut zeros = file.alloc_dma_buffer(BACKGROUND_WRITE_BYTES);
    zeros.as_bytes_mut().fill(0);
    let zeros = std::rc::Rc::new(zeros);
    let mut pos = from;
    while pos < bytes {
        let in_flight = depth(pos - from).clamp(1, ZERO_FILL_DEPTH_MAX) as u64;
        let writes = (0..in_flight).map(|i| pos + i * slice).filter(|&at| at < bytes).map(|at| {
            let len = (bytes - at).min(slice) as usize;
            let zeros = zeros.clone();
            async move {
                let written = if len == BACKGROUND_WRITE_BYTES {
                    file.write_rc_at(zeros, at).await
                } else {
                    let mut tail = file.alloc_dma_buffer(len);
                    tail.as_bytes_mut().fill(0);
                    file.write_at(tail, at).await
                };
                match written.map_err(|e| StorageError::io("zero-filling", path, e))? {
                    n if n == len => Ok(()),
                    n => Err(StorageError::io(
                        "zero-filling",
                        path,
                        std::io::Error::other(format!("short write: {n} of {len} bytes")),
                    )),
                }
            }
        });
        for result in futures_util::future::join_all(writes).await {
            result?;
        }
        pos += in_flight * slice;
    }
    Ok(())
}

/// Writes `bytes` (padded with zeros to whole pages) to `dir/name` atomically:
/// a new file is written and synced, renamed over the old one, and the
/// directory synced.
pub async fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let mut rest = bytes;
    write_atomic_from(dir, name, |out| {
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        n
    })
    .await
}

/// Like `write_atomic`, with the content made piece by piece: `fill` puts
/// the next bytes into the buffer it is given and says how many (0 at the
/// end; fewer than the buffer holds only for the last piece). Pieces go out
/// in writes of at most `BACKGROUND_WRITE_BYTES`, one after another.
pub async fn write_atomic_from(dir: &Path, name: &str, mut fill: impl FnMut(&mut [u8]) -> usize) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let file = create_truncated(&tmp).await?;
    let mut at = 0;
    loop {
        let mut buf = file.alloc_dma_buffer(BACKGROUND_WRITE_BYTES);
        let n = fill(buf.as_bytes_mut());
        if n == 0 {
            break;
        }
        buf.as_bytes_mut()[n..].fill(0);
        let len = crate::position::page_up(n as u64) as usize;
        if len < BACKGROUND_WRITE_BYTES {
            let mut last = file.alloc_dma_buffer(len);
            last.as_bytes_mut().copy_from_slice(&buf.as_bytes()[..len]);
            buf = last;
        }
        file.write_at(buf, at).await.map_err(|e| StorageError::io("writing", &tmp, e))?;
        at += len as u64;
        if n < BACKGROUND_WRITE_BYTES {
            break;
        }
    }
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
    blocking("writing", &path, move |path| {
        if std::fs::metadata(path).map(|m| m.len() as usize).unwrap_or(0) < wanted {
            let mut content = b"ringmq shard directory marker\n".to_vec();
            content.resize(wanted, b'\n');
            std::fs::write(path, content)?;
        }
        Ok(())
    })
    .await?;
    let file = DmaFile::open(&path).await.map_err(|e| StorageError::io("opening", &path, e))?;
    file.close().await.map_err(|e| StorageError::io("closing", &path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_writes_every_size_whole_and_padded_to_pages() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let piece = BACKGROUND_WRITE_BYTES;
        let sizes = [0, 100, 4096, piece, piece + 5, 3 * piece - 1];
        glommio::LocalExecutor::default().run(async move {
            for (i, size) in sizes.into_iter().enumerate() {
                let bytes: Vec<u8> = (0..size).map(|b| (b % 251) as u8 + 1).collect();
                write_atomic(&d, &format!("f{i}"), &bytes).await.unwrap();
                let got = std::fs::read(d.join(format!("f{i}"))).unwrap();
                assert_eq!(got.len() as u64, crate::position::page_up(size as u64), "size {size}");
                assert_eq!(&got[..size], &bytes[..], "size {size}");
                assert!(got[size..].iter().all(|&b| b == 0), "size {size}: zero padding");
            }
        });
    }
}
