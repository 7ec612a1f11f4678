//! Replication's engine ends: a follower that applies the leader's shipped
//! log ranges holds the leader's log byte for byte, recovers it, can be cut
//! back to a position and fetch again, and refuses ranges that do not fit.

mod common;

use common::*;
use ringmq_shards::{QueueId, ReadWait, Shard, ShardConfig, StorageError};
use std::path::Path;
use std::time::Duration;

const QUEUES: [u32; 3] = [1, 2, 3];

/// Appends `per_writer` batches from one writer per queue at once, so rounds
/// carry several batches and fill segments (padding at their ends and, when
/// writes overlap, at round ends).
async fn load(leader: &Shard, per_writer: u64, from: u64) {
    let writers = QUEUES.iter().map(|&q| {
        let leader = leader.clone();
        glommio::spawn_local(async move {
            for i in from..from + per_writer {
                let len = 200 + (i as usize * 997) % 30_000;
                leader.append(QueueId(q), &batch_of(&value(q, i, len))).await.unwrap();
            }
        })
    });
    for w in writers.collect::<Vec<_>>() {
        w.await;
    }
}

/// Ships the rest, checks that both shards hold the same queues, closes
/// both and returns the log's end (for `assert_same_log`).
async fn catch_up_and_close(leader: Shard, follower: Shard) -> u64 {
    catch_up(&leader, &follower).await;
    same_queues(&leader, &follower).await;
    let end = leader.log_positions().1;
    leader.close().await.unwrap();
    follower.close().await.unwrap();
    end
}

fn segment_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

/// The log bytes of both directories up to `end`, segment by segment.
fn assert_same_log(a: &Path, b: &Path, end: u64, segment_bytes: u64) {
    let (a, b) = (segment_files(a), segment_files(b));
    for ((name_a, bytes_a), (name_b, bytes_b)) in a.iter().zip(&b) {
        // Past the end lies a spare, which a restart may have recycled (a later life).
        let base_of = |name: &str| ringmq_shards::parse_segment_name(name).expect("a segment's name").0;
        let base = base_of(name_a);
        assert_eq!(base, base_of(name_b), "the same segments");
        if base >= end {
            continue;
        }
        assert_eq!(name_a, name_b, "segments below the end are in the same life");
        let upto = (end - base).min(segment_bytes) as usize;
        assert!(bytes_a[..upto] == bytes_b[..upto], "segment {name_a} differs below the end {end}");
    }
}

async fn same_queues(leader: &Shard, follower: &Shard) {
    for q in QUEUES.map(QueueId) {
        assert_eq!(follower.offsets(q).unwrap(), leader.offsets(q).unwrap(), "queue {q:?} offsets");
        assert_eq!(read_all(follower, q, 0).await, read_all(leader, q, 0).await, "queue {q:?} records");
    }
}

#[test]
fn a_follower_holds_the_leaders_log_byte_for_byte_and_recovers_it() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    let segment_bytes = config(&pa).segment_bytes;
    let end = run(move || async move {
        let leader = open_with(config(&pa), &QUEUES).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let writing = glommio::spawn_local({
            let (leader, done) = (leader.clone(), done.clone());
            async move {
                load(&leader, 150, 0).await;
                done.set(true);
            }
        });
        let mut shipped = 0;
        while !done.get() {
            shipped += catch_up(&leader, &follower).await;
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        writing.await;
        shipped += catch_up(&leader, &follower).await;
        assert!(shipped > 10, "shipped in many ranges while the leader wrote: {shipped}");
        assert!(leader.segment_bases().len() >= 4, "the load filled segments: {:?}", leader.segment_bases());
        assert_eq!(follower.segment_bases(), leader.segment_bases());
        same_queues(&leader, &follower).await;
        let refused = follower.append(QueueId(1), &batch_of(b"direct")).await.unwrap_err();
        assert!(matches!(refused, StorageError::WrongRole(_)), "{refused}");
        let end = leader.log_positions().1;
        assert_eq!(follower.log_positions().2, end);
        leader.close().await.unwrap();
        follower.close().await.unwrap();
        end
    });
    assert_same_log(a.path(), b.path(), end, segment_bytes);
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    run(move || async move {
        let leader = open_with(config(&pa), &[]).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        assert_eq!(follower.log_positions().2, end, "the follower recovers the same end");
        same_queues(&leader, &follower).await;
        // Promoted, it takes appends where the leader's log ended.
        follower.lead();
        assert!(!follower.is_mirror());
        let next = leader.offsets(QueueId(2)).unwrap().1;
        let appended = follower.append(QueueId(2), &batch_of(b"after promotion")).await.unwrap();
        assert_eq!(appended.base_offset, next);
        assert_eq!(appended.position.0, end);
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

/// A leader ships a round while its own write of it is at the disk (held
/// there by the probe): the follower holds it durably first, the leader's
/// append is answered only after its own write, and both logs end the same.
#[test]
fn a_leader_ships_a_round_while_its_own_write_is_at_the_disk() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    let segment_bytes = config(&pa).segment_bytes;
    let end = run(move || async move {
        let leader = open_with(config(&pa), &QUEUES).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        leader.probes().hold_writes(true);
        let answered = std::rc::Rc::new(std::cell::Cell::new(false));
        let append = glommio::spawn_local({
            let (leader, answered) = (leader.clone(), answered.clone());
            async move {
                let appended = leader.append(QueueId(1), &batch_of(b"shipped first")).await.unwrap();
                answered.set(true);
                appended
            }
        });
        let range = leader.read_range(0, 1 << 20, ReadWait::Upto(Duration::from_secs(10))).await.unwrap();
        assert!(!range.bytes.is_empty(), "the taken round ships before it is written");
        assert_eq!(range.next, range.shipped_end);
        assert_eq!(leader.log_positions().1, 0, "the leader's own write is still held");
        assert_eq!(follower.mirror(range.from, &range.bytes).await.unwrap(), range.next);
        assert!(!answered.get(), "the leader answers only once its own write is durable");
        leader.probes().hold_writes(false);
        let appended = append.await;
        assert_eq!((appended.base_offset, appended.position.0), (0, 0));
        assert_eq!(leader.log_positions().2, range.next, "durable on the leader too");
        load(&leader, 3, 1).await;
        catch_up_and_close(leader, follower).await
    });
    assert_same_log(a.path(), b.path(), end, segment_bytes);
}

#[test]
fn a_follower_cut_back_to_a_position_fetches_again_from_there() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    let cut = run(move || async move {
        let leader = open_with(config(&pa), &QUEUES).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        load(&leader, 60, 0).await;
        catch_up(&leader, &follower).await;
        follower.checkpoint().await.unwrap();
        // Where queue 2's batch of offset 30 sits: the follower keeps what is before it.
        let cut = leader.entry(QueueId(2), 30).await.unwrap().position.0;
        leader.close().await.unwrap();
        follower.close().await.unwrap();
        cut
    });
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    let segment_bytes = config(&pa).segment_bytes;
    let end = run(move || async move {
        // No pools: the segments past the ends (the leader's spare, the
        // follower's log past the cut) are deleted, not recycled into later
        // lives, so both logs stay in first lives and compare byte for byte.
        let no_pool = |dir: &Path| ringmq_shards::ShardConfig { segment_pool_max: 0, ..config(dir) };
        let leader = open_with(no_pool(&pa), &[]).await;
        let follower = Shard::open_mirror(no_pool(&pb), Some(ringmq_shards::LogPos(cut))).await.unwrap();
        assert_eq!(follower.log_positions().2, cut, "the log ends at the cut");
        assert_eq!(follower.offsets(QueueId(2)).unwrap().1, 30, "queue 2 rolled back to the batch at the cut");
        for q in QUEUES.map(QueueId) {
            let (_, next) = follower.offsets(q).unwrap();
            if next > 0 {
                assert!(
                    follower.entry(q, next - 1).await.unwrap().position.0 < cut,
                    "{q:?} keeps only what is before the cut"
                );
            }
        }
        load(&leader, 20, 60).await;
        catch_up_and_close(leader, follower).await
    });
    assert_same_log(a.path(), b.path(), end, segment_bytes);
}

#[test]
fn ranges_that_do_not_fit_are_refused_and_nothing_is_stored() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    run(move || async move {
        let leader = open_with(config(&pa), &QUEUES).await;
        let follower = Shard::open_mirror(config(&pb), None).await.unwrap();
        load(&leader, 5, 0).await;
        let range = leader.read_range(0, 1 << 20, ReadWait::No).await.unwrap();
        assert!(range.next > 0 && range.next == leader.log_positions().1);

        // Not at the follower's end.
        let err = follower.mirror(40, &range.bytes).await.unwrap_err();
        assert!(matches!(err, StorageError::Diverged { position: 40, .. }), "{err}");
        // Damaged in transit: refused whole, even the good batches before it.
        let mut damaged = range.bytes.clone();
        let last = damaged.len() - 10;
        damaged[last] ^= 0xff;
        let err = follower.mirror(0, &damaged).await.unwrap_err();
        assert!(matches!(err, StorageError::Diverged { .. }), "{err}");
        assert_eq!(follower.log_positions(), (0, 0, 0), "nothing stored from refused ranges");
        assert!(follower.queues().is_empty());

        // A leader does not take a leader's batches.
        let err = leader.mirror(range.next, &range.bytes).await.unwrap_err();
        assert!(matches!(err, StorageError::WrongRole(_)), "{err}");
        // Reads of the log from a position that is not a batch start, or past the end.
        let err = leader.read_range(8, 1 << 20, ReadWait::No).await.unwrap_err();
        assert!(matches!(err, StorageError::Corruption { .. }), "{err}");
        let err = leader.read_range(range.next + 4096, 1 << 20, ReadWait::No).await.unwrap_err();
        assert!(matches!(err, StorageError::PositionOutOfRange { .. }), "{err}");
        // At the end, a read waits and comes back empty.
        let empty = leader.read_range(range.next, 1 << 20, ReadWait::Upto(Duration::from_millis(5))).await.unwrap();
        assert!(empty.bytes.is_empty() && empty.next == range.next);

        follower.mirror(0, &range.bytes).await.unwrap();
        same_queues(&leader, &follower).await;
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

/// A follower with a config of its own (not the test default) still mirrors:
/// only the segment size must match the leader's.
#[test]
fn a_follower_with_another_round_size_mirrors_the_same_log() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    let segment_bytes = config(&pa).segment_bytes;
    let end = run(move || async move {
        let leader = open_with(config(&pa), &QUEUES).await;
        let small_rounds = ShardConfig { round_bytes_max: 64 << 10, batch_bytes_max: 48 << 10, ..config(&pb) };
        let follower = Shard::open_mirror(small_rounds, None).await.unwrap();
        load(&leader, 40, 0).await;
        catch_up_and_close(leader, follower).await
    });
    assert_same_log(a.path(), b.path(), end, segment_bytes);
}

#[test]
fn the_commit_gate_holds_reads_back_until_enough_replicas_have_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let leader = open_with(config(&p), &QUEUES).await;
        leader.append(QueueId(1), &batch_of(b"before the gate")).await.unwrap();
        leader.commit_to(Some(leader.log_positions().2));
        let gated = leader.append(QueueId(1), &batch_of(b"held back")).await.unwrap();
        assert_eq!(gated.base_offset, 1, "appends are acknowledged by the engine as before");
        assert_eq!(leader.offsets(QueueId(1)).unwrap(), (0, 1), "the gated batch is not readable");
        // A long poll at the end wakes when the gate moves past the batch.
        let poll = glommio::spawn_local({
            let leader = leader.clone();
            async move { leader.read(QueueId(1), 1, 1 << 20, ReadWait::Upto(Duration::from_secs(30))).await.unwrap() }
        });
        glommio::timer::sleep(Duration::from_millis(20)).await;
        leader.commit_to(Some(leader.log_positions().2));
        let got = poll.await;
        assert_eq!(records(&got.bytes), vec![(1, b"held back".to_vec())]);
        // Lifted, reads see everything written.
        leader.append(QueueId(2), &batch_of(b"no gate")).await.unwrap();
        assert_eq!(leader.offsets(QueueId(2)).unwrap(), (0, 0));
        leader.commit_to(None);
        assert_eq!(leader.offsets(QueueId(2)).unwrap(), (0, 1));
        leader.close().await.unwrap();
    });
}

/// A leader's checkpoint covers the durable batches its commit gate still
/// holds back: recovery scans only past the checkpoint, so an index that
/// left them out would lose their offsets and hand them out again.
#[test]
fn a_checkpoint_keeps_the_durable_batches_behind_the_commit_gate() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let leader = open_with(config(&p), &QUEUES).await;
        leader.commit_to(Some(leader.log_positions().2));
        leader.append(QueueId(1), &batch_of(b"durable, not committed")).await.unwrap();
        assert_eq!(leader.offsets(QueueId(1)).unwrap(), (0, 0), "held back");
        leader.close().await.unwrap();
    });
    let p = dir.path().to_path_buf();
    run(move || async move {
        let shard = open_with(config(&p), &QUEUES).await;
        assert_eq!(shard.offsets(QueueId(1)).unwrap(), (0, 1), "the batch keeps its offset");
        let next = shard.append(QueueId(1), &batch_of(b"next")).await.unwrap();
        assert_eq!(next.base_offset, 1, "its offset is not handed out again");
        let values: Vec<_> = read_all(&shard, QueueId(1), 0).await.into_iter().map(|(_, v)| v).collect();
        assert_eq!(values, [b"durable, not committed".to_vec(), b"next".to_vec()]);
        shard.close().await.unwrap();
    });
}

/// A checkpoint while more than a page of index entries waits behind the
/// commit gate writes them to the index files; they stay in memory until
/// the gate passes them, or the gate's move could not make them readable
/// (a broker group's new leader, a moved queue's copy: the queue's end
/// stuck below what was committed, for good).
#[test]
fn entries_a_checkpoint_writes_behind_the_commit_gate_become_readable_when_it_moves() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        let leader = open_with(config(&p), &QUEUES).await;
        leader.commit_to(Some(leader.log_positions().2));
        // More than a page of entries (256 of 16 bytes), each batch its own.
        let batches = 2 * 256 + 7;
        for i in 0..batches {
            leader.append(QueueId(1), &batch_of(format!("held {i}").as_bytes())).await.unwrap();
        }
        assert_eq!(leader.offsets(QueueId(1)).unwrap(), (0, 0), "held back");
        leader.checkpoint().await.unwrap();
        leader.commit_to(Some(leader.log_positions().2));
        assert_eq!(leader.offsets(QueueId(1)).unwrap(), (0, batches), "every batch readable once committed");
        let read = read_all(&leader, QueueId(1), 0).await;
        assert_eq!(read.len() as u64, batches);
        assert_eq!(read.last().unwrap().1, format!("held {}", batches - 1).into_bytes());
        leader.close().await.unwrap();
    });
}

/// (base, generation) of the segment files in `dir`.
fn generations(dir: &Path) -> Vec<(u64, ringmq_shards::batch::Generation)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| ringmq_shards::parse_segment_name(&e.unwrap().file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

#[test]
fn leader_and_follower_recycle_segments_on_their_own_and_hold_the_same_records() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    // Different bounds: the same base is a different life of a file on each side.
    let leader_cfg = |p: &Path| ShardConfig { retention_bytes: Some(2 << 20), segment_pool_max: 2, ..config(p) };
    let follower_cfg = |p: &Path| ShardConfig { retention_bytes: Some(3 << 20), segment_pool_max: 1, ..config(p) };
    let end = run(move || async move {
        let leader = open_with(leader_cfg(&pa), &QUEUES).await;
        let follower = Shard::open_mirror(follower_cfg(&pb), None).await.unwrap();
        for phase in 0..8 {
            load(&leader, 40, phase * 40).await;
            catch_up(&leader, &follower).await;
            // As the broker does: the leader keeps what its follower has not taken.
            leader.keep_from(ringmq_shards::LogPos(follower.log_positions().2));
            leader.apply_retention().await.unwrap();
            follower.apply_retention().await.unwrap();
        }
        for (who, shard) in [("leader", &leader), ("follower", &follower)] {
            assert!(shard.stats().segments_recycled >= 2, "the {who} recycled segments: {:?}", shard.stats());
        }
        same_records_from_starts(&leader, &follower).await;
        leader.log_positions().1
        // Both dropped without a close: a crash.
    });
    let (ga, gb) = (generations(a.path()), generations(b.path()));
    assert!(ga.iter().chain(&gb).any(|(_, g)| g.0 > 0), "recycled files: {ga:?} {gb:?}");
    assert_ne!(ga, gb, "the two sides' files are different lives");
    let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
    run(move || async move {
        let leader = open_with(leader_cfg(&pa), &[]).await;
        let follower = Shard::open_mirror(follower_cfg(&pb), None).await.unwrap();
        assert_eq!(follower.log_positions().2, end, "the follower recovers the same end");
        same_records_from_starts(&leader, &follower).await;
        follower.lead();
        let next = leader.offsets(QueueId(2)).unwrap().1;
        let appended = follower.append(QueueId(2), &batch_of(b"after promotion")).await.unwrap();
        assert_eq!((appended.base_offset, appended.position.0), (next, end));
        leader.close().await.unwrap();
        follower.close().await.unwrap();
    });
}

/// Both hold the same records from the later of their queue starts on.
async fn same_records_from_starts(leader: &Shard, follower: &Shard) {
    for q in QUEUES.map(QueueId) {
        let ((ls, le), (fs, fe)) = (leader.offsets(q).unwrap(), follower.offsets(q).unwrap());
        assert_eq!(le, fe, "queue {q:?} ends");
        let from = ls.max(fs);
        assert!(from < le, "queue {q:?} keeps records on both sides: [{ls}, {le}) and [{fs}, {fe})");
        assert_eq!(read_all(follower, q, from).await, read_all(leader, q, from).await, "queue {q:?} records");
    }
}
