//! Tiered storage's bucket on a real S3-compatible server (SeaweedFS):
//! `ringmq tiered check` writes, reads in part, lists and deletes a probe
//! object with credentials from the environment or from a credentials
//! file; a wrong secret, a missing bucket and an endpoint nobody serves
//! each fail with what a user must fix.

mod common;

use common::seaweed::{Seaweed, ACCESS_KEY, BUCKET, SECRET_KEY};
use std::time::Duration;

/// `ringmq tiered check` of `bucket` at `endpoint`: whether it passed, and what it said.
fn check(weed: &Seaweed, endpoint: &str, bucket: &str, extra: &[&str]) -> (bool, String) {
    let out = weed
        .ringmq()
        .args(["tiered", "check", "--s3-endpoint", endpoint, "--s3-bucket", bucket])
        .args(extra)
        .output()
        .expect("run ringmq");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn a_bucket_is_checked_and_each_misconfiguration_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(dir.path());

    let (ok, said) = check(&weed, &weed.endpoint, BUCKET, &["--s3-prefix", "cluster-a"]);
    assert!(ok, "{said}");
    for step in ["bucket", "put", "ranged get", "list", "delete", "head"] {
        assert!(said.lines().any(|l| l.starts_with(step) && l.contains(" ok ")), "{step} ok: {said}");
    }
    assert!(said.contains(&format!("bucket={BUCKET} endpoint={} usable=yes", weed.endpoint)), "{said}");

    // From a credentials file's profile, with nothing in the environment.
    let file = dir.path().join("credentials");
    std::fs::write(&file, format!("[default]\naws_access_key_id = nobody\n[tiered]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["tiered", "check", "--s3-endpoint", &weed.endpoint, "--s3-bucket", BUCKET])
        .args(["--s3-credentials-file", file.to_str().unwrap(), "--s3-profile", "tiered"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["tiered", "check", "--s3-endpoint", &weed.endpoint, "--s3-bucket", BUCKET])
        .args(["--s3-credentials-file", file.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("profile [default] lacks"), "{said}");

    let (ok, said) = check(&weed, &weed.endpoint, "no-such-bucket", &[]);
    assert!(!ok && said.contains("bucket \"no-such-bucket\" does not exist"), "{said}");

    let mut wrong = weed.ringmq();
    wrong.env("AWS_SECRET_ACCESS_KEY", "not-the-secret");
    let out = wrong.args(["tiered", "check", "--s3-endpoint", &weed.endpoint, "--s3-bucket", BUCKET]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("refused") && said.contains("403"), "{said}");

    let nobody = format!("http://127.0.0.1:{}", common::ports::free_ports("127.0.0.1", 1));
    let (ok, said) = check(&weed, &nobody, BUCKET, &["--s3-attempts", "2"]);
    assert!(!ok && said.contains("unavailable") && said.contains("after 2 attempts"), "{said}");
}

/// The topic configs of tiered storage are checked where they are set: a
/// local retention past the total, tiering without the broker's bucket,
/// or a compacted topic tiered, is refused with why; with a bucket a topic
/// is tiered. A bucket half given stops `serve` with what is missing.
#[test]
fn tiered_topic_configs_are_checked_against_each_other_and_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let configs = |entries: &[(&str, &str)]| -> Vec<(String, String)> {
        entries.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    };

    let plain = common::Broker::start(&dir.path().join("plain"), &[]);
    let client = plain.client();
    let refused = client.create_topic_with_configs("t", 1, 0, &configs(&[("remote.storage.enable", "true")]));
    let said = refused.unwrap_err().to_string();
    assert!(said.contains("needs the broker's bucket") && said.contains("--s3-endpoint"), "{said}");
    let too_long = configs(&[("retention.ms", "60000"), ("local.retention.ms", "120000")]);
    let said = client.create_topic_with_configs("t", 1, 0, &too_long).unwrap_err().to_string();
    assert!(said.contains("local.retention.ms=120000 keeps more on local disk"), "{said}");
    client
        .create_topic_with_configs("t", 1, 0, &configs(&[("retention.ms", "60000"), ("local.retention.ms", "1000")]))
        .unwrap();

    let with_bucket = weed.broker_flags(dir.path());
    let with_bucket: Vec<&str> = with_bucket.iter().map(String::as_str).collect();
    let tiered = common::Broker::start(&dir.path().join("tiered"), &with_bucket);
    let client = tiered.client();
    client.create_topic_with_configs("t", 1, 0, &configs(&[("remote.storage.enable", "true")])).unwrap();
    let compacted = configs(&[("remote.storage.enable", "true"), ("cleanup.policy", "compact")]);
    let said = client.create_topic_with_configs("c", 1, 0, &compacted).unwrap_err().to_string();
    assert!(said.contains("compact"), "{said}");

    let half = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--data-dir", dir.path().join("half").to_str().unwrap(), "--s3-bucket", BUCKET])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&half.stderr);
    assert!(!half.status.success() && said.contains("needs --s3-endpoint too"), "{said}");
}

/// The broker's S3 client against SeaweedFS: a multipart upload is
/// invisible until completed, then read back across its parts' edges; an
/// aborted one leaves nothing; a missing object is named.
#[test]
fn an_object_uploaded_in_parts_reads_back_across_their_edges() {
    use ringmq::objects::ObjectError;
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(dir.path());
    let store = weed.store("parts");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let sizes = [6 << 20, 6 << 20, 1 << 20];
        let parts: Vec<Vec<u8>> =
            sizes.iter().enumerate().map(|(p, n)| (0..*n).map(|i| ((i * 31 + p * 7) % 251) as u8).collect()).collect();
        let whole = parts.concat();
        let mut upload = store.upload("segment").await.unwrap();
        for part in &parts {
            upload.part(part.clone().into()).await.unwrap();
        }
        assert_eq!(store.head("segment").await.unwrap(), None, "nothing to read before the upload completes");
        upload.complete().await.unwrap();
        assert_eq!(store.head("segment").await.unwrap(), Some(whole.len() as u64));
        let edge = (6 << 20) - 100..(6 << 20) + 100;
        let read = store.get("segment", Some(edge.start as u64..edge.end as u64)).await.unwrap();
        assert_eq!(&read[..], &whole[edge], "a range across two parts");
        assert_eq!(store.get("segment", None).await.unwrap().len(), whole.len());

        let mut dropped = store.upload("dropped").await.unwrap();
        dropped.part(parts[0].clone().into()).await.unwrap();
        dropped.abort().await.unwrap();
        assert_eq!(store.head("dropped").await.unwrap(), None);
        let listed: Vec<String> = store.list("").await.unwrap().into_iter().map(|l| l.key).collect();
        assert_eq!(listed, vec!["segment".to_string()], "the prefix's objects, without the prefix");
        let missing = store.get("no-such", None).await.unwrap_err();
        assert!(matches!(missing, ObjectError::NotFound { .. }), "{missing}");
    });
}

/// The broker watches its bucket: `ringmq_tiered_bucket_usable` is 1 while
/// SeaweedFS serves it, 0 (and a failed check counted) once it is stopped.
#[test]
fn the_broker_reports_whether_its_bucket_is_usable() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let admin = format!("127.0.0.1:{}", common::ports::free_ports("127.0.0.1", 1));
    let bucket = weed.broker_flags(dir.path());
    let mut flags: Vec<&str> = bucket.iter().map(String::as_str).collect();
    flags.extend(["--s3-check-ms", "200", "--s3-attempts", "1", "--admin-listen", &admin]);
    let _broker = common::Broker::start(&dir.path().join("broker"), &flags);
    let metric = |name: &str| common::metric(&admin, &format!("{name}{{"));
    let wait_for = |what: &str, done: &dyn Fn() -> bool| common::wait_until(what, Duration::from_secs(30), done);
    wait_for("the bucket usable", &|| metric("ringmq_tiered_bucket_usable") == Some(1.0));
    drop(weed);
    wait_for("the bucket unusable", &|| metric("ringmq_tiered_bucket_usable") == Some(0.0));
    assert!(metric("ringmq_tiered_bucket_checks_failed_total").is_some_and(|n| n >= 1.0));
}
