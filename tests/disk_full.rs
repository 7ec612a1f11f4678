//! A full disk: on a small loop-mounted ext4, producers get `StorageFull`
//! once no new segment fits, reads and queues with room go on, nothing
//! acknowledged is lost, and appends resume by themselves once space is
//! freed, with no restart. Needs root (mkfs.ext4, mount -o loop); where the
//! machine refuses loop mounts the test says so and the storage engine's
//! own no-space handling is exercised instead by `shards/tests`.

mod common;

use common::{consume, Broker};
use ringmq::client::{ClientError, Consumer, Message, Producer, ProducerConfig, SendResult, StartFrom};
use ringmq::protocol::ErrorCode;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A loop-mounted ext4 image, unmounted when dropped.
struct LoopFs {
    image: PathBuf,
    mount: PathBuf,
}

impl LoopFs {
    fn new(dir: &Path, mib: u64) -> Result<LoopFs, String> {
        let (image, mount) = (dir.join("fs.img"), dir.join("mnt"));
        std::fs::File::create(&image).and_then(|f| f.set_len(mib << 20)).map_err(|e| e.to_string())?;
        std::fs::create_dir(&mount).map_err(|e| e.to_string())?;
        let run = |cmd: &mut Command| match cmd.output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
            Err(e) => Err(e.to_string()),
        };
        run(common::tools::command("mkfs.ext4").args(["-q", "-F"]).arg(&image))?;
        run(common::tools::command("mount").args(["-o", "loop"]).arg(&image).arg(&mount))?;
        Ok(LoopFs { image, mount })
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

fn free_bytes(dir: &Path) -> u64 {
    ringmq::shards::free_space(dir).expect("statvfs")
}

fn is_full(e: &ClientError) -> bool {
    matches!(e, ClientError::Broker { code: ErrorCode::StorageFull, .. })
}

#[test]
fn a_full_disk_refuses_appends_keeps_reads_and_resumes_when_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let fs = match LoopFs::new(dir.path(), 160) {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIPPED: this machine refuses a loop-mounted ext4 ({why})");
            return;
        }
    };
    let data = fs.mount.join("data");
    let mut broker = Broker::start(&data, &[]);
    let client = broker.client();
    client.create_topic("t", 1, 0).unwrap();
    client.create_topic("other", 2, 0).unwrap();
    let full_shard = client.topic("t").unwrap().queue_shards[0];
    let other_queue = client.topic("other").unwrap().queue_shards.iter().position(|s| *s != full_shard).unwrap();
    // Leave room for less than one more 16 MiB segment.
    let junk = fs.mount.join("junk");
    let free = free_bytes(&fs.mount);
    std::fs::File::create(&junk).and_then(|f| f.set_len(0)).unwrap();
    let status = common::tools::command("fallocate").args(["-l", &(free - (8 << 20)).to_string()]).arg(&junk).status();
    assert!(status.unwrap().success(), "fallocate the junk file");

    let producer = Producer::new(client.clone(), ProducerConfig::default());
    let value = |i: usize| format!("{i:06}-{}", "x".repeat(256 << 10));
    let mut acked: Vec<(String, SendResult)> = Vec::new();
    let refusal = loop {
        assert!(acked.len() < 1000, "the disk never filled");
        let v = value(acked.len());
        match producer.send("t", &Message::new(v.clone())) {
            Ok(r) => acked.push((v, r)),
            Err(e) => break e,
        }
    };
    assert!(is_full(&refusal), "a typed StorageFull: {refusal}");
    assert!(refusal.to_string().contains("no space left"), "says what happened: {refusal}");
    assert!(acked.len() > 10, "appends went on while the active and spare segments had room");
    let (_, end) = client.list_offsets("t", 0).unwrap();
    assert_eq!(end, acked.len() as u64, "the refused append stored nothing");

    // Reads go on, and so do queues whose shard still has room.
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("t", StartFrom::Earliest).unwrap();
    common::assert_acked_present(&consume(&mut consumer, acked.len(), Duration::from_secs(30)), &acked);
    let to_other = ProducerConfig {
        selector: ringmq::client::QueueSelector::Custom(std::sync::Arc::new(move |_, _| other_queue as u32)),
        ..ProducerConfig::default()
    };
    let other = Producer::new(client.clone(), to_other);
    other.send("other", &Message::new("still served")).expect("another shard's queue has room");
    drop(other);

    // An operator frees space: appends resume by themselves.
    std::fs::remove_file(&junk).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = value(acked.len());
        match producer.send("t", &Message::new(v.clone())) {
            Ok(r) => {
                acked.push((v, r));
                break;
            }
            Err(e) if is_full(&e) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!("appends did not resume after space was freed: {e}"),
        }
    }
    for _ in 0..20 {
        let v = value(acked.len());
        acked.push((v.clone(), producer.send("t", &Message::new(v)).expect("appends go on")));
    }
    drop(producer);
    let mut consumer = Consumer::new(client.clone(), None);
    consumer.assign_all("t", StartFrom::Earliest).unwrap();
    common::assert_acked_present(&consume(&mut consumer, acked.len(), Duration::from_secs(30)), &acked);
    broker.stop();
}
