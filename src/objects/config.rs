//! Where the bucket is and who the broker is to it: endpoint, bucket,
//! region, addressing style, key prefix and credentials, read from the
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`) or from a file in the AWS shared credentials format.

use super::error::ObjectError;
use std::path::Path;
use std::time::Duration;

/// How a bucket is named in a request's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlStyle {
    /// `https://endpoint/bucket/key`: what S3-compatible servers expect.
    Path,
    /// `https://bucket.endpoint/key`: what AWS S3 prefers.
    VirtualHost,
}

impl std::str::FromStr for UrlStyle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "path" => Ok(UrlStyle::Path),
            "virtual-host" => Ok(UrlStyle::VirtualHost),
            other => Err(format!("{other:?} is not a URL style: path or virtual-host")),
        }
    }
}

/// An access key and its secret (and a session token for temporary ones).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub key: String,
    pub secret: String,
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("key", &self.key).finish_non_exhaustive()
    }
}

impl Credentials {
    /// From `file` (profile `profile` of an AWS shared credentials file)
    /// if given, else from the environment.
    pub fn load(file: Option<&Path>, profile: &str) -> Result<Credentials, ObjectError> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ObjectError::NoCredentials(format!("reading {}: {e}", path.display())))?;
                Credentials::parse(&text, profile)
                    .map_err(|why| ObjectError::NoCredentials(format!("{}: {why}", path.display())))
            }
            None => Credentials::from_env(),
        }
    }

    fn from_env() -> Result<Credentials, ObjectError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(key), Some(secret)) => Ok(Credentials { key, secret, token: var("AWS_SESSION_TOKEN") }),
            _ => Err(ObjectError::NoCredentials(
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a credentials file with --s3-credentials-file"
                    .into(),
            )),
        }
    }

    /// Profile `profile` of an AWS shared credentials file: `[name]`
    /// sections of `aws_access_key_id`, `aws_secret_access_key` and
    /// `aws_session_token`, `#` and `;` comments.
    pub fn parse(text: &str, profile: &str) -> Result<Credentials, String> {
        let (mut section, mut key, mut secret, mut token) = (String::new(), None, None, None);
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.trim().trim_start_matches("profile ").to_string();
                continue;
            }
            let Some((name, value)) = line.split_once('=') else { continue };
            if section != profile {
                continue;
            }
            let value = Some(value.trim().to_string());
            match name.trim() {
                "aws_access_key_id" => key = value,
                "aws_secret_access_key" => secret = value,
                "aws_session_token" => token = value,
                _ => {}
            }
        }
        match (key, secret) {
            (Some(key), Some(secret)) => Ok(Credentials { key, secret, token }),
            _ => Err(format!("profile [{profile}] lacks aws_access_key_id or aws_secret_access_key")),
        }
    }
}

/// A bucket and how to reach it.
#[derive(Debug, Clone)]
pub struct ObjectStoreConfig {
    /// `http://host:port` or `https://host`.
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
    pub url_style: UrlStyle,
    /// Put before every key (`cluster-a/`), so that several clusters share a bucket.
    pub prefix: String,
    pub credentials: Credentials,
    /// Tries of a call that fails for a reason that passes, the first included.
    pub attempts: u32,
    /// Longest one request may take, its body included.
    pub request_timeout: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credentials_file_gives_its_profile_and_says_what_is_missing() {
        let text = "# keys\n[default]\naws_access_key_id = AK\naws_secret_access_key=SK\n\n[profile other]\naws_access_key_id = B\n";
        let c = Credentials::parse(text, "default").unwrap();
        assert_eq!((c.key.as_str(), c.secret.as_str(), c.token.as_deref()), ("AK", "SK", None));
        let missing = Credentials::parse(text, "other").unwrap_err();
        assert!(missing.contains("[other] lacks"), "{missing}");
        assert!(format!("{c:?}").contains("AK") && !format!("{c:?}").contains("SK"), "the secret is not printed");
    }
}
