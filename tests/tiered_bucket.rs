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
