//! The executor a shard runs on never parks while it has work to run. glommio
//! 0.9.0 did when its preempt timer was due before a scheduling pass ran its
//! first task: the shard slept until its next timer, which for a shard with
//! an hour between checkpoints was an hour (CI saw a storage test take
//! 3600 s). The vendored copy runs a task on every pass (vendor/README.md).

mod common;

use common::*;
use ringmq_shards::QueueId;
use std::time::Duration;

/// Far longer than the test takes when the executor never parks with work to
/// run; it only turns a hang into a failure that says what hung.
const HANG_GUARD: Duration = Duration::from_secs(120);

const MESSAGES: u64 = 400;

#[test]
fn a_shard_whose_preempt_timer_is_always_due_still_appends_checkpoints_and_reads() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // A 1 us quota is due before any pass reaches its first task.
        let builder =
            glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).preempt_timer(Duration::from_micros(1));
        let read = run_on(builder, move || async move {
            // Checkpoints an hour apart: the only timer pending while idle.
            let shard = open_with(config(&p), &[1]).await;
            for n in 0..MESSAGES {
                shard.append(QueueId(1), &batch_of(&value(1, n, 1000))).await.unwrap();
                if n % 100 == 99 {
                    shard.checkpoint().await.unwrap();
                }
            }
            let read = read_all(&shard, QueueId(1), 0).await;
            shard.close().await.unwrap();
            read
        });
        let _ = done.send(read);
    });
    let read = finished.recv_timeout(HANG_GUARD).expect("the shard's executor parked with work to run");
    let expected: Vec<(u64, Vec<u8>)> = (0..MESSAGES).map(|n| (n, value(1, n, 1000))).collect();
    assert_eq!(read, expected, "every append reads back in order");
}
