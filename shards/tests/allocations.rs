//! Steady-state appends allocate per group-commit round, never per record:
//! counted with a counting global allocator (this binary holds one test, so
//! nothing else allocates meanwhile).

mod common;

use common::*;
use ringmq_shards::{QueueId, ShardConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_appends_allocate_per_round_not_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    run(move || async move {
        // Index files big enough that no checkpoint or index-file creation
        // falls in the measured drive (~36k entries a queue in all). No
        // completion yields: their pauses are timers, a few allocations each
        // per 20 us a write is in flight, however many records it carries.
        let cfg = ShardConfig {
            completion_yield: std::time::Duration::ZERO,
            segment_bytes: 64 << 20,
            index_file_entries: 1 << 17,
            index_mem_entries_max: 1 << 20,
            ..config(&p)
        };
        let shard = open_with(cfg, &[1, 2]).await;
        let writers = 64u32;
        // 16 records per batch: a per-record allocation would show 16 times over.
        let value = [7u8; 64];
        let batch = batch_with(&[&value[..]; 16]);
        let drive = |appends: u32| {
            let tasks: Vec<_> = (0..writers)
                .map(|w| {
                    let (shard, batch) = (shard.clone(), batch.clone());
                    glommio::spawn_local(async move {
                        for _ in 0..appends {
                            shard.append(QueueId(1 + w % 2), &batch).await.unwrap();
                        }
                    })
                })
                .collect();
            async move {
                for t in tasks {
                    t.await;
                }
            }
        };
        drive(20).await; // warm up: cache chunks and arenas reach their size
                         // The spare segment's zero-fill is background work, not the append path.
        while shard.stats().segments_created == 0 {
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        let rounds_before = shard.stats().rounds;
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        drive(50).await;
        let allocations = ALLOCATIONS.load(Ordering::Relaxed) - before;
        let appends = u64::from(writers) * 50;
        let records = appends * 16;
        let rounds = shard.stats().rounds - rounds_before;
        assert!(rounds * 4 < appends, "appends shared rounds: {rounds} rounds for {appends} appends");
        // Per round: a completion, its waker list, the buffer handle, the I/O
        // futures and glommio's I/O sources. The drive itself spawns 64 tasks
        // and clones 64 batches.
        let budget = 40 * rounds + 4 * u64::from(writers);
        assert!(allocations <= budget, "{allocations} allocations for {rounds} rounds (budget {budget})");
        assert!(allocations * 10 < records, "{allocations} allocations for {records} records");
        shard.close().await.unwrap();
    });
}
