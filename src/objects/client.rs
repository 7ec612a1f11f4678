//! The S3 calls tiered storage makes: put, ranged get, head, list, delete,
//! and a bucket check, each retried while its failure may pass.

use super::config::{ObjectStoreConfig, UrlStyle};
use super::error::ObjectError;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use rusty_s3::actions::{CreateMultipartUpload, ListObjectsV2};
use rusty_s3::S3Action;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::Receiver;

/// How long a signed request stays valid: past any retry of it.
const SIGNED_FOR: Duration = Duration::from_secs(15 * 60);
/// The first pause before a retry; doubled each time up to `RETRY_PAUSE_MAX`.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(5);

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// An object a listing found: its key (without the store's prefix) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
}

/// A bucket, reached over HTTP(S); cheap to clone.
#[derive(Clone)]
pub struct ObjectStore {
    bucket: Arc<rusty_s3::Bucket>,
    credentials: Arc<rusty_s3::Credentials>,
    config: Arc<ObjectStoreConfig>,
    http: Client<Https, Full<Bytes>>,
}

/// What one attempt of a call got back.
struct Answer {
    status: StatusCode,
    /// Its Content-Length (a HEAD's object size).
    length: Option<u64>,
    /// Its ETag (an uploaded part's).
    etag: Option<String>,
    body: Bytes,
}

impl ObjectStore {
    /// A store for `config` (no request is made: see `check`).
    pub fn new(config: ObjectStoreConfig) -> Result<ObjectStore, ObjectError> {
        let endpoint = config
            .endpoint
            .parse()
            .map_err(|e| ObjectError::Config(format!("--s3-endpoint {:?}: {e}", config.endpoint)))?;
        let style = match config.url_style {
            UrlStyle::Path => rusty_s3::UrlStyle::Path,
            UrlStyle::VirtualHost => rusty_s3::UrlStyle::VirtualHost,
        };
        let bucket = rusty_s3::Bucket::new(endpoint, style, config.bucket.clone(), config.region.clone())
            .map_err(|e| ObjectError::Config(format!("bucket {:?} at {:?}: {e}", config.bucket, config.endpoint)))?;
        let c = &config.credentials;
        let credentials = match &c.token {
            Some(token) => rusty_s3::Credentials::new_with_token(c.key.clone(), c.secret.clone(), token.clone()),
            None => rusty_s3::Credentials::new(c.key.clone(), c.secret.clone()),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider)
            .map_err(|e| ObjectError::Config(format!("loading the system's TLS roots: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        let http = Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
        Ok(ObjectStore { bucket: Arc::new(bucket), credentials: Arc::new(credentials), config: Arc::new(config), http })
    }

    /// The key under the store's prefix.
    fn full_key(&self, key: &str) -> String {
        match self.config.prefix.trim_end_matches('/') {
            "" => key.to_string(),
            prefix => format!("{prefix}/{key}"),
        }
    }

    /// Stores `body` as `key` (replacing any object of that key whole).
    pub async fn put(&self, key: &str, body: Bytes) -> Result<(), ObjectError> {
        let full = self.full_key(key);
        let what = format!("PUT {full}");
        self.call(
            &what,
            Method::PUT,
            || self.bucket.put_object(Some(&self.credentials), &full).sign(SIGNED_FOR),
            None,
            body,
        )
        .await
        .map(|_| ())
    }

    /// Starts storing `key` in parts (each at least 5 MiB but the last):
    /// nothing is readable under `key` until `Upload::complete`.
    pub async fn upload(&self, key: &str) -> Result<Upload, ObjectError> {
        let full = self.full_key(key);
        let what = format!("POST {full} (a multipart upload)");
        let sign = || self.bucket.create_multipart_upload(Some(&self.credentials), &full).sign(SIGNED_FOR);
        let answer = self.call(&what, Method::POST, sign, None, Bytes::new()).await?;
        let text = String::from_utf8_lossy(&answer.body);
        let created = CreateMultipartUpload::parse_response(&text)
            .map_err(|e| ObjectError::Config(format!("{what}: the answer does not parse: {e}")))?;
        Ok(Upload { store: self.clone(), key: full, id: created.upload_id().to_string(), etags: Vec::new() })
    }

    /// Stores `key` from the parts that arrive on `parts`, in order, a
    /// `Part::Last` at the end; if the sender goes before that, the upload
    /// is aborted and nothing is stored. The object's length.
    pub async fn put_parts(&self, key: &str, mut parts: Receiver<Part>) -> Result<u64, ObjectError> {
        let mut upload = self.upload(key).await?;
        let mut bytes = 0;
        let last = loop {
            let Some(part) = parts.recv().await else { break false };
            let (body, last) = match part {
                Part::More(chunks) => (joined(chunks), false),
                Part::Last(chunks) => (joined(chunks), true),
            };
            bytes += body.len() as u64;
            if let Err(error) = upload.part(body).await {
                let _ = upload.abort().await;
                return Err(error);
            }
            if last {
                break true;
            }
        };
        if !last {
            upload.abort().await?;
            return Err(ObjectError::GivenUp { key: key.to_string() });
        }
        upload.complete().await?;
        Ok(bytes)
    }

    /// The bytes of `key`, or of `range` of them.
    pub async fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Bytes, ObjectError> {
        let full = self.full_key(key);
        let what = match &range {
            Some(r) => format!("GET {full} bytes {}..{}", r.start, r.end),
            None => format!("GET {full}"),
        };
        let header = range.filter(|r| r.end > r.start).map(|r| format!("bytes={}-{}", r.start, r.end - 1));
        let sign = || self.bucket.get_object(Some(&self.credentials), &full).sign(SIGNED_FOR);
        let answer = self.call(&what, Method::GET, sign, header.as_deref(), Bytes::new()).await?;
        Ok(answer.body)
    }

    /// The size of `key`, or None if there is no such object.
    pub async fn head(&self, key: &str) -> Result<Option<u64>, ObjectError> {
        let full = self.full_key(key);
        let what = format!("HEAD {full}");
        let sign = || self.bucket.head_object(Some(&self.credentials), &full).sign(SIGNED_FOR);
        match self.call(&what, Method::HEAD, sign, None, Bytes::new()).await {
            Ok(answer) => Ok(Some(answer.length.unwrap_or(0))),
            Err(ObjectError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Removes `key` (no error if there is no such object).
    pub async fn delete(&self, key: &str) -> Result<(), ObjectError> {
        let full = self.full_key(key);
        let what = format!("DELETE {full}");
        let sign = || self.bucket.delete_object(Some(&self.credentials), &full).sign(SIGNED_FOR);
        match self.call(&what, Method::DELETE, sign, None, Bytes::new()).await {
            Ok(_) | Err(ObjectError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Every object whose key starts with `prefix`, in key order.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Listed>, ObjectError> {
        self.list_after(prefix, None).await
    }

    /// Every object whose key starts with `prefix` and sorts after `after`
    /// (a key, without the store's prefix), in key order.
    pub async fn list_after(&self, prefix: &str, after: Option<&str>) -> Result<Vec<Listed>, ObjectError> {
        let full = self.full_key(prefix);
        let after = after.map(|key| self.full_key(key));
        let strip = self.full_key("");
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let what = format!("LIST {full}");
            let sign = || {
                let mut list = ListObjectsV2::new(&self.bucket, Some(&self.credentials));
                list.with_prefix(full.as_str());
                if let Some(after) = &after {
                    list.with_start_after(after.as_str());
                }
                if let Some(token) = &token {
                    list.with_continuation_token(token.as_str());
                }
                list.sign(SIGNED_FOR)
            };
            let answer = self.call(&what, Method::GET, sign, None, Bytes::new()).await?;
            let text = String::from_utf8_lossy(&answer.body);
            let page = ListObjectsV2::parse_response(&text)
                .map_err(|e| ObjectError::Config(format!("{what}: the listing does not parse: {e}")))?;
            for c in page.contents {
                let key = c.key.strip_prefix(strip.as_str()).unwrap_or(&c.key).to_string();
                found.push(Listed { key, size: c.size.unwrap_or(0) });
            }
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => return Ok(found),
            }
        }
    }

    /// Checks that the bucket exists and the credentials reach it.
    pub async fn check(&self) -> Result<(), ObjectError> {
        let what = format!("HEAD bucket {}", self.config.bucket);
        let sign = || self.bucket.head_bucket(Some(&self.credentials)).sign(SIGNED_FOR);
        match self.call(&what, Method::HEAD, sign, None, Bytes::new()).await {
            Err(ObjectError::NotFound { .. }) => Err(self.no_bucket()),
            other => other.map(|_| ()),
        }
    }

    /// One call, retried while its failure may pass.
    async fn call(
        &self,
        what: &str,
        method: Method,
        sign: impl Fn() -> url::Url,
        range: Option<&str>,
        body: Bytes,
    ) -> Result<Answer, ObjectError> {
        let attempts = self.config.attempts.max(1);
        let mut last = String::new();
        for n in 0..attempts {
            if n > 0 {
                tokio::time::sleep(RETRY_PAUSE.saturating_mul(1 << (n - 1).min(6)).min(RETRY_PAUSE_MAX)).await;
            }
            let request = self.request(method.clone(), &sign(), range, body.clone())?;
            let why = match tokio::time::timeout(self.config.request_timeout, self.send(request)).await {
                Ok(Ok(answer)) if answer.status.is_success() => return Ok(answer),
                Ok(Ok(answer)) => self.failure(what, &answer)?,
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("no answer within {:?}", self.config.request_timeout),
            };
            tracing::debug!(what, attempt = n + 1, why, "an object store call failed; retrying");
            last = why;
        }
        Err(ObjectError::Unavailable { what: what.to_string(), attempts, last })
    }

    /// Sends one request and reads its answer whole.
    async fn send(
        &self,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<Answer, Box<dyn std::error::Error + Send + Sync>> {
        let response = self.http.request(request).await?;
        let status = response.status();
        let headers = response.headers();
        let length = headers.get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
        let etag = headers.get(hyper::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer { status, length, etag, body })
    }

    fn request(
        &self,
        method: Method,
        url: &url::Url,
        range: Option<&str>,
        body: Bytes,
    ) -> Result<hyper::Request<Full<Bytes>>, ObjectError> {
        let mut request = hyper::Request::builder().method(method).uri(url.as_str());
        if let Some(range) = range {
            request = request.header(hyper::header::RANGE, range);
        }
        request.body(Full::new(body)).map_err(|e| ObjectError::Config(format!("building a request: {e}")))
    }

    /// What a failed answer means: Ok(why) for a failure that may pass,
    /// else the error to report.
    fn failure(&self, what: &str, answer: &Answer) -> Result<String, ObjectError> {
        let status = answer.status;
        let text = String::from_utf8_lossy(&answer.body);
        let code = xml_field(&text, "Code").unwrap_or_else(|| status.canonical_reason().unwrap_or("").replace(' ', ""));
        let message = xml_field(&text, "Message").unwrap_or_else(|| "no detail in the answer".into());
        let (what, status) = (what.to_string(), status.as_u16());
        match status {
            500..=599 | 408 | 429 => Ok(format!("{status} {code}: {message}")),
            404 if code == "NoSuchBucket" => Err(self.no_bucket()),
            404 => Err(ObjectError::NotFound { what }),
            401 | 403 => Err(ObjectError::Denied { what, status, code, message }),
            _ => Err(ObjectError::Refused { what, status, code, message }),
        }
    }

    fn no_bucket(&self) -> ObjectError {
        ObjectError::NoBucket { bucket: self.config.bucket.clone(), endpoint: self.config.endpoint.clone() }
    }
}

/// A part of an object `ObjectStore::put_parts` stores, in chunks (joined
/// on the S3 thread, so the sender never copies a whole part at once).
pub enum Part {
    More(Vec<Bytes>),
    Last(Vec<Bytes>),
}

/// Chunks joined into one body (the one chunk as it is).
fn joined(mut chunks: Vec<Bytes>) -> Bytes {
    if chunks.len() == 1 {
        return chunks.pop().expect("one chunk");
    }
    let mut body = Vec::with_capacity(chunks.iter().map(Bytes::len).sum());
    for chunk in chunks {
        body.extend_from_slice(&chunk);
    }
    body.into()
}

/// A multipart upload of one object: its parts in order, then complete (or abort).
pub struct Upload {
    store: ObjectStore,
    key: String,
    id: String,
    etags: Vec<String>,
}

impl Upload {
    /// Stores the next part.
    pub async fn part(&mut self, bytes: Bytes) -> Result<(), ObjectError> {
        let number = u16::try_from(self.etags.len() + 1)
            .map_err(|_| ObjectError::Config(format!("{}: more than {} parts", self.key, u16::MAX)))?;
        let what = format!("PUT {} part {number}", self.key);
        let (store, key, id) = (&self.store, &self.key, &self.id);
        let sign = || store.bucket.upload_part(Some(&store.credentials), key, number, id).sign(SIGNED_FOR);
        let answer = store.call(&what, Method::PUT, sign, None, bytes).await?;
        let etag = answer.etag.ok_or_else(|| ObjectError::Config(format!("{what}: the answer has no ETag")))?;
        self.etags.push(etag);
        Ok(())
    }

    /// Makes the parts the object `key`, readable whole from now on.
    pub async fn complete(self) -> Result<(), ObjectError> {
        let what = format!("POST {} (completing {} parts)", self.key, self.etags.len());
        let (store, key, id) = (&self.store, &self.key, &self.id);
        let etags = || self.etags.iter().map(String::as_str);
        let action = store.bucket.complete_multipart_upload(Some(&store.credentials), key, id, etags());
        let sign =
            || store.bucket.complete_multipart_upload(Some(&store.credentials), key, id, etags()).sign(SIGNED_FOR);
        let body = Bytes::from(action.body());
        store.call(&what, Method::POST, sign, None, body).await.map(|_| ())
    }

    /// Drops the parts stored so far.
    pub async fn abort(self) -> Result<(), ObjectError> {
        let what = format!("DELETE {} (aborting its upload)", self.key);
        let (store, key, id) = (&self.store, &self.key, &self.id);
        let sign = || store.bucket.abort_multipart_upload(Some(&store.credentials), key, id).sign(SIGNED_FOR);
        match store.call(&what, Method::DELETE, sign, None, Bytes::new()).await {
            Ok(_) | Err(ObjectError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// The text of the first `<name>` element of an S3 error body.
fn xml_field(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let from = text.find(&open)? + open.len();
    let to = text[from..].find(&format!("</{name}>"))? + from;
    Some(text[from..to].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_gives_its_code_and_message() {
        let body = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(xml_field(body, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(xml_field(body, "Message").as_deref(), Some("The specified bucket does not exist"));
        assert_eq!(xml_field(body, "Key"), None);
    }
}
