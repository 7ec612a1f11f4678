//! Encryption at rest in the engine: with data keys, every appended batch
//! is sealed on disk (no payload byte in clear in any file), reads open it to
//! the producer's batch, recovery rebuilds the index from sealed batches, a
//! rotated keyring seals new batches with the new key and opens the old,
//! a shard without the keys refuses to rebuild from sealed batches, and a
//! follower mirrors sealed batches byte for byte.

mod common;

use common::*;
use ringmq_shards::crypt::keyring::Keyring;
use ringmq_shards::{QueueId, ReadWait, Shard, ShardConfig, StorageError};
use std::path::Path;
use std::sync::Arc;

const KEY_1: &str = "1 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const KEY_2: &str = "2 f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff000102030405060708090a0b0c0d0e0f";

fn sealed_config(dir: &Path, keys: &str) -> ShardConfig {
    ShardConfig { keyring: Some(Arc::new(Keyring::parse(keys).unwrap())), ..config(dir) }
}

/// Every byte of every file under `dir`.
fn all_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(all_bytes(&path));
        } else {
            out.extend(std::fs::read(&path).unwrap());
        }
    }
    out
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn append_secrets(shard: &Shard, from: u64, to: u64) {
    for i in from..to {
        let v = format!("SECRET-{i:05}-").into_bytes();
        shard.append(QueueId(1), &batch_of(&v.repeat(20))).await.unwrap();
    }
}

#[test]
fn sealed_batches_hold_no_payload_on_disk_and_read_and_recover_in_clear_and_keys_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(sealed_config(&d, KEY_1), &[1]).await;
        append_secrets(&shard, 0, 300).await;
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), 300);
        assert!(got[7].1.starts_with(b"SECRET-00007-"), "reads return the producer's records");
        // A crash: no checkpoint, recovery rebuilds the index from the sealed batches.
        drop(shard);
    });
    assert!(!holds(&all_bytes(dir.path()), b"SECRET-"), "no file holds a payload in clear");
    let d = dir.path().to_path_buf();
    run(move || async move {
        let rotated = format!("{KEY_1}\n{KEY_2}");
        let shard = open_with(sealed_config(&d, &rotated), &[1]).await;
        assert_eq!(read_all(&shard, QueueId(1), 0).await.len(), 300, "recovered from sealed batches");
        append_secrets(&shard, 300, 400).await;
        shard.close().await.unwrap();
    });
    assert!(!holds(&all_bytes(dir.path()), b"SECRET-"));
    let d = dir.path().to_path_buf();
    run(move || async move {
        // Only the new key (the clean close checkpointed, so nothing is rebuilt):
        // the batches sealed after the rotation open, those of key 1 are refused, not misread.
        let shard = Shard::open(sealed_config(&d, KEY_2)).await.unwrap();
        let new = shard.read(QueueId(1), 300, 1 << 20, ReadWait::No).await.unwrap();
        assert!(records(&new.bytes).iter().any(|(o, v)| *o == 300 && v.starts_with(b"SECRET-00300-")));
        let err = shard.read(QueueId(1), 0, 1 << 20, ReadWait::No).await.err();
        assert!(matches!(err, Some(StorageError::Sealed { .. })), "{err:?}");
        shard.close().await.unwrap();
        let shard = open_with(sealed_config(&d, &format!("{KEY_1}\n{KEY_2}")), &[1]).await;
        let got = read_all(&shard, QueueId(1), 0).await;
        assert_eq!(got.len(), 400, "both keys' batches open");
        assert!(got[350].1.starts_with(b"SECRET-00350-"));
        shard.close().await.unwrap();
    });
}

#[test]
fn a_follower_mirrors_sealed_batches_byte_for_byte_and_serves_them_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (dir.path().join("a"), dir.path().join("b"));
    run(move || async move {
        let leader = open_with(sealed_config(&pa, KEY_1), &[1]).await;
        append_secrets(&leader, 0, 50).await;
        let follower = Shard::open_mirror(sealed_config(&pb, KEY_1), None).await.unwrap();
        let range = leader.read_range(0, 1 << 20, ReadWait::No).await.unwrap();
        assert!(!holds(&range.bytes, b"SECRET-"), "replication ships sealed batches");
        assert_eq!(follower.mirror(0, &range.bytes).await.unwrap(), range.next);
        follower.lead();
        let got = read_all(&follower, QueueId(1), 0).await;
        assert_eq!(got.len(), 50);
        assert!(got[49].1.starts_with(b"SECRET-00049-"));
        let keyless = Shard::open_mirror(config(&dir_for(&pb)), None).await.unwrap();
        let err = keyless.mirror(0, &range.bytes).await.unwrap_err();
        assert!(matches!(err, StorageError::Sealed { .. }), "a follower without the keys refuses: {err}");
    });
}

fn dir_for(p: &Path) -> std::path::PathBuf {
    p.with_file_name("keyless")
}
