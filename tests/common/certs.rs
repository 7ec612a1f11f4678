//! Test certificates made with the `openssl` command: a CA, and
//! certificates it signs (P-256 keys, as a deployment would make them).

use std::path::{Path, PathBuf};

/// A certificate authority in a directory of its own.
pub struct Ca {
    dir: PathBuf,
    pub pem: PathBuf,
    key: PathBuf,
}

/// A certificate and its key.
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn openssl(args: &[&str], dir: &Path) {
    let out = super::tools::command("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Ca {
    /// A new self-signed CA named `name` under `dir`.
    pub fn new(dir: &Path, name: &str) -> Ca {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let subject = format!("/CN={name}");
        openssl(
            &["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
                .into_iter()
                .chain(["-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", &subject])
                .collect::<Vec<_>>(),
            &dir,
        );
        Ca { pem: dir.join("ca.pem"), key: dir.join("ca.key"), dir }
    }

    /// A certificate for common name `cn`, valid for `days` from now (negative:
    /// it expired that many days ago), naming 127.0.0.1, 127.0.0.21-23 and localhost.
    pub fn issue(&self, file: &str, cn: &str, days: i32) -> Issued {
        let (key, csr, cert, ext) =
            (format!("{file}.key"), format!("{file}.csr"), format!("{file}.pem"), format!("{file}.ext"));
        let sans = "subjectAltName=IP:127.0.0.1,IP:127.0.0.21,IP:127.0.0.22,IP:127.0.0.23,DNS:localhost\n";
        std::fs::write(self.dir.join(&ext), sans).unwrap();
        let subject = format!("/CN={cn}");
        openssl(
            &["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", &key]
                .into_iter()
                .chain(["-out", &csr, "-subj", &subject])
                .collect::<Vec<_>>(),
            &self.dir,
        );
        let days = days.to_string();
        openssl(
            &["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"]
                .into_iter()
                .chain(["-days", &days, "-extfile", &ext, "-out", &cert])
                .collect::<Vec<_>>(),
            &self.dir,
        );
        Issued { cert: self.dir.join(cert), key: self.dir.join(key) }
    }
}

impl Issued {
    /// `--tls-cert C --tls-key K` for `ringmq serve`.
    pub fn serve_args(&self) -> Vec<String> {
        vec!["--tls-cert".into(), path(&self.cert), "--tls-key".into(), path(&self.key)]
    }
}

/// A path as a command-line argument.
pub fn path(p: &Path) -> String {
    p.to_str().expect("a UTF-8 path").to_string()
}
