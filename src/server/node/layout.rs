//! What fixes where a data directory's data lives, recorded at its first
//! start in `DATA_DIR/layout`: the shard count (a queue's data is in the
//! directory of the shard that owns it) and the segment size (a log position
//! names a segment file by it). A later start with other values would find
//! half its queues missing or read segments at the wrong places, so it is
//! refused with what to pass instead.

use super::error::io;
use super::NodeError;
use std::path::Path;

const FILE: &str = "layout";

/// The settings a data directory was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub shards: usize,
    pub segment_bytes: u64,
}

impl Layout {
    fn encode(&self) -> String {
        format!("shards = {}\nsegment_bytes = {}\n", self.shards, self.segment_bytes)
    }

    /// The layout a file holds; None if it holds anything else.
    fn decode(text: &str) -> Option<Layout> {
        let (mut shards, mut segment_bytes) = (None, None);
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (key, value) = line.split_once('=')?;
            let value = value.trim();
            match key.trim() {
                "shards" => shards = value.parse().ok(),
                "segment_bytes" => segment_bytes = value.parse().ok(),
                _ => return None,
            }
        }
        Some(Layout { shards: shards?, segment_bytes: segment_bytes? })
    }
}

/// Records `wanted` in a new data directory, or checks it against what an
/// existing one was created with. A directory from before this file existed
/// has its shard count read from its `shard-N` directories.
pub fn check_or_record(data_dir: &Path, wanted: Layout) -> Result<(), NodeError> {
    let path = data_dir.join(FILE);
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let why = "expected the lines `shards = N` and `segment_bytes = N`".to_string();
            Some(Layout::decode(&text).ok_or_else(|| NodeError::Unreadable { path: path.clone(), why })?)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("reading", &path)(e)),
    };
    match recorded {
        Some(recorded) => refuse_other(data_dir, recorded, wanted),
        None => {
            let existing = shard_dirs(data_dir)?;
            if existing > 0 && existing != wanted.shards {
                let had = Layout { shards: existing, ..wanted };
                return refuse_other(data_dir, had, wanted);
            }
            store(data_dir, wanted).map_err(io("recording", &path))
        }
    }
}

fn refuse_other(data_dir: &Path, recorded: Layout, wanted: Layout) -> Result<(), NodeError> {
    let dir = data_dir.to_path_buf();
    if recorded.shards != wanted.shards {
        return Err(NodeError::ShardCount { dir, had: recorded.shards, given: wanted.shards });
    }
    if recorded.segment_bytes != wanted.segment_bytes {
        return Err(NodeError::SegmentSize { dir, had: recorded.segment_bytes, given: wanted.segment_bytes });
    }
    Ok(())
}

fn shard_dirs(data_dir: &Path) -> Result<usize, NodeError> {
    let entries = std::fs::read_dir(data_dir).map_err(io("listing", data_dir))?;
    let is_shard = |name: &str| name.strip_prefix("shard-").is_some_and(|n| n.parse::<usize>().is_ok());
    Ok(entries.flatten().filter(|e| e.file_name().to_str().is_some_and(is_shard)).count())
}

/// Start-up, before any shard runs: a small buffered write, synced and renamed into place.
fn store(data_dir: &Path, layout: Layout) -> std::io::Result<()> {
    ringmq_shards::replace_durably(data_dir, FILE, layout.encode().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_keeps_the_layout_it_was_created_with() {
        let dir = tempfile::tempdir().unwrap();
        let two = Layout { shards: 2, segment_bytes: 16 << 20 };
        check_or_record(dir.path(), two).unwrap();
        check_or_record(dir.path(), two).expect("the same layout starts again");
        let one = check_or_record(dir.path(), Layout { shards: 1, ..two }).unwrap_err().to_string();
        assert!(one.contains("holds 2 shards but 1 cores") && one.contains("--cores"), "{one}");
        let seg = check_or_record(dir.path(), Layout { segment_bytes: 32 << 20, ..two }).unwrap_err().to_string();
        assert!(seg.contains("--segment-mib 16"), "{seg}");
    }

    #[test]
    fn a_data_dir_from_before_the_layout_file_is_judged_by_its_shard_dirs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("shard-0")).unwrap();
        std::fs::create_dir(dir.path().join("shard-1")).unwrap();
        let layout = Layout { shards: 1, segment_bytes: 1 << 30 };
        assert!(check_or_record(dir.path(), layout).unwrap_err().to_string().contains("holds 2 shards"));
        check_or_record(dir.path(), Layout { shards: 2, ..layout }).unwrap();
        assert_eq!(
            Layout::decode(&std::fs::read_to_string(dir.path().join(FILE)).unwrap()).expect("a layout").shards,
            2
        );
    }

    proptest::proptest! {
        #[test]
        fn no_layout_text_makes_decode_panic(text in "\\PC{0,64}") {
            let _ = Layout::decode(&text);
        }
    }
}
