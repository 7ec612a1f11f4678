//! Tiered storage's bucket on a real S3-compatible server (SeaweedFS):
//! `ringmq tiered check` writes, reads in part, lists and deletes a probe
//! object with credentials from the environment or from a credentials
//! file; a wrong secret, a missing bucket and an endpoint nobody serves
//! each fail with what a user must fix.

mod common;

use common::seaweed::{Seaweed, ACCESS_KEY, BUCKET, SECRET_KEY};

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
/// local retention past the total, or tiering without the broker's bucket,
/// is refused with why; so is tiering with a bucket, until the broker
/// uploads. A bucket half given stops `serve` with what is missing.
#[test]
fn tiered_topic_configs_are_checked_against_each_other_and_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let weed = Seaweed::start(&dir.path().join("weed"));
    let file = dir.path().join("credentials");
    std::fs::write(
        &file,
        format!("[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"),
    )
    .unwrap();
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

    let file_flag = file.to_str().unwrap();
    let with_bucket = ["--s3-endpoint", &weed.endpoint, "--s3-bucket", BUCKET, "--s3-credentials-file", file_flag];
    let tiered = common::Broker::start(&dir.path().join("tiered"), &with_bucket);
    let said = tiered
        .client()
        .create_topic_with_configs("t", 1, 0, &configs(&[("remote.storage.enable", "true")]))
        .unwrap_err()
        .to_string();
    assert!(said.contains("does not upload to its bucket yet"), "{said}");

    let half = std::process::Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .args(["serve", "--data-dir", dir.path().join("half").to_str().unwrap(), "--s3-bucket", BUCKET])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&half.stderr);
    assert!(!half.status.success() && said.contains("needs --s3-endpoint too"), "{said}");
}
