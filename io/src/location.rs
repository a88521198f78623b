//! Opening object stores from URLs and retrying transient failures.
//!
//! URLs: a local path (`data/ds`), `file:///abs/path`, `memory:///name`,
//! `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`. Store
//! options (endpoint, region, credentials, `allow_http`, ...) are passed in
//! explicitly: [`StoreOptions::from_vars`] maps the cloud SDKs' `AWS_*`,
//! `GOOGLE_*`, `AZURE_*` variables (read once, at the caller's edge) and
//! [`StoreOptions::with_s3`] an S3 endpoint, region and addressing style.
//!
//! Every request retries under one [`RetryPolicy`]; reads resume where a
//! broken body stopped (see [`crate::read`]).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::{
    ObjectMeta, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutOptions, PutPayload,
};
use url::Url;

use crate::error::{IoError, Result};
use crate::read::{self, retry, RetryPolicy, Want};

/// Key/value options for the object-store builders, e.g.
/// `("aws_endpoint", "http://127.0.0.1:9000")`, and the retry policy of
/// every request.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    pub options: Vec<(String, String)>,
    pub retry: RetryPolicy,
}

impl StoreOptions {
    /// Options taken from environment variables the cloud SDKs use
    /// (`AWS_*`, `GOOGLE_*`, `AZURE_*`), given as an iterator so that the
    /// caller decides where they come from.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let options = vars
            .into_iter()
            .filter(|(k, _)| {
                k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_")
            })
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        Self {
            options,
            retry: RetryPolicy::default(),
        }
    }

    /// Adds (or overrides) one option.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.options.retain(|(k, _)| k != key);
        self.options.push((key.to_owned(), value.into()));
    }

    /// Applies `s3` when `url` is an S3 URL (`s3://`, `s3a://`); other
    /// URLs are left as they are. A plain-HTTP endpoint (an S3-compatible
    /// server on loopback) is allowed as such.
    pub fn with_s3(mut self, url: &str, s3: &S3Settings) -> Self {
        if !(url.starts_with("s3://") || url.starts_with("s3a://")) {
            return self;
        }
        if let Some(endpoint) = &s3.endpoint {
            self.set("aws_endpoint", endpoint.clone());
            if endpoint.starts_with("http://") {
                self.set("aws_allow_http", "true");
            }
        }
        if let Some(region) = &s3.region {
            self.set("aws_region", region.clone());
        }
        self.set(
            "aws_virtual_hosted_style_request",
            (!s3.path_style).to_string(),
        );
        self
    }
}

/// Where an S3-compatible store is and how buckets are addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// e.g. `http://127.0.0.1:9000`; `None`: the SDK's default (AWS).
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Address buckets as `ENDPOINT/BUCKET` rather than `BUCKET.ENDPOINT`.
    pub path_style: bool,
}

impl Default for S3Settings {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            path_style: true,
        }
    }
}

/// A location in an object store: the store plus a prefix inside it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// The URL as the user wrote it, for messages.
    pub url: String,
    /// How requests to the store retry.
    pub retry: RetryPolicy,
    /// The same store when it takes multipart uploads' parts by number (S3,
    /// GCS, Azure, memory): an [`Upload`](crate::Upload) then retries each
    /// part alone. `None` (the local filesystem): parts go through the
    /// store's own upload, without per-part retries.
    pub multipart: Option<Arc<dyn MultipartStore>>,
    /// The directory of a local (`file://`) location: its objects are
    /// checked to be regular files before they are opened.
    local: Option<std::path::PathBuf>,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Location").field("url", &self.url).finish()
    }
}

/// `url` with a relative local path made absolute against `cwd`: a path
/// without a scheme (`data/ds`, `./ds`, `../ds`) becomes the absolute path,
/// a `file:` URL whose path is relative (`file:ds`, `file://./ds`,
/// `file://ds`) becomes `file:///abs/...`. Anything else (an absolute path,
/// `file:///abs`, `s3://`, `memory://`, ...) is returned as it is.
///
/// A rank calls it before a URL leaves the process (to a coordinator, which
/// would resolve a relative path in its own working directory).
pub fn absolute_url(url: &str, cwd: &std::path::Path) -> String {
    let local = |path: &str| {
        let path = std::path::Path::new(path);
        let joined = cwd.join(path);
        // Lexically: `.` and `..` resolved, nothing read from the disk.
        std::path::absolute(&joined).unwrap_or(joined)
    };
    if let Some(rest) = url
        .strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
    {
        if rest.starts_with('/') || rest.is_empty() {
            return url.to_owned();
        }
        return format!("file://{}", local(rest).display());
    }
    match Url::parse(url) {
        Ok(parsed) if parsed.scheme().len() > 1 => url.to_owned(),
        _ if url.is_empty() || std::path::Path::new(url).is_absolute() => url.to_owned(),
        _ => local(url).display().to_string(),
    }
}

impl Location {
    /// Opens `url`. A URL without a scheme is a local directory; with
    /// `create`, a missing local directory is created.
    pub fn open(url: &str, options: &StoreOptions, create: bool) -> Result<Self> {
        let bad = |reason: String| IoError::BadUrl {
            url: url.to_owned(),
            reason,
        };
        let parsed = match Url::parse(url) {
            Ok(parsed) if parsed.scheme().len() > 1 => parsed,
            // No scheme (or a Windows drive letter): a local path.
            _ => {
                let path = std::path::Path::new(url);
                if create {
                    std::fs::create_dir_all(path).map_err(|error| IoError::Local {
                        path: url.to_owned(),
                        error,
                    })?;
                }
                let absolute = std::path::absolute(path).map_err(|e| bad(e.to_string()))?;
                Url::from_directory_path(&absolute)
                    .map_err(|()| bad("not an absolute path".into()))?
            }
        };
        if parsed.scheme() == "file" && create {
            let path = parsed
                .to_file_path()
                .map_err(|()| bad("not a local path".into()))?;
            std::fs::create_dir_all(&path).map_err(|error| IoError::Local {
                path: path.display().to_string(),
                error,
            })?;
        }
        let (store, multipart, prefix) =
            build(&parsed, &options.options).map_err(|e| bad(e.to_string()))?;
        let local = (parsed.scheme() == "file")
            .then(|| parsed.to_file_path().ok())
            .flatten();
        Ok(Self {
            store,
            prefix,
            url: url.trim_end_matches('/').to_owned(),
            retry: options.retry.clone(),
            multipart,
            local,
        })
    }

    /// Wraps an existing store (tests, in-memory datasets).
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, url: impl Into<String>) -> Self {
        Self {
            store,
            prefix: Path::from(prefix),
            url: url.into(),
            retry: RetryPolicy::default(),
            multipart: None,
            local: None,
        }
    }

    /// Wraps an existing store that takes multipart parts by number, so
    /// that uploads retry each part alone.
    pub fn from_multipart_store<S: ObjectStore + MultipartStore>(
        store: Arc<S>,
        prefix: &str,
        url: impl Into<String>,
    ) -> Self {
        Self {
            multipart: Some(store.clone()),
            ..Self::from_store(store, prefix, url)
        }
    }

    /// The same location under another retry policy.
    pub fn with_retry(self, retry: RetryPolicy) -> Self {
        Self { retry, ..self }
    }

    /// The path of object `name` under the prefix.
    pub fn path(&self, name: &str) -> Path {
        name.split('/')
            .fold(self.prefix.clone(), |p, part| p.join(part))
    }

    /// The user-facing URL of object `name`.
    pub fn url_of(&self, name: &str) -> String {
        format!("{}/{}", self.url, name)
    }

    /// Reads a whole object, resuming after transient failures. Memory
    /// grows with the bytes that arrive, whatever size the store claims.
    pub async fn get(&self, name: &str) -> Result<Bytes> {
        self.get_at_most(name, u64::MAX).await
    }

    /// Reads a whole object of at most `limit` bytes: a larger one is an
    /// error before its body is read.
    pub async fn get_at_most(&self, name: &str, limit: u64) -> Result<Bytes> {
        self.read(name, Want::Whole { limit }).await
    }

    /// Reads bytes `range` of object `name`, resuming after transient
    /// failures from the first byte not yet received.
    pub async fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        self.read(name, Want::Range(range)).await
    }

    /// Streams bytes `range` of object `name` into `sink` (the shard
    /// cache's file), resuming as [`Location::get_range`] does.
    pub(crate) async fn get_range_into<S: read::Sink>(
        &self,
        name: &str,
        range: Range<u64>,
        sink: S,
    ) -> Result<S> {
        self.check_regular(name)?;
        let (path, url) = (self.path(name), self.url_of(name));
        read::read_into(
            &*self.store,
            &path,
            &url,
            Want::Range(range),
            &self.retry,
            sink,
        )
        .await
    }

    /// Refuses a local object that is not a regular file (a FIFO, a
    /// device, a directory) before it is opened: opening a FIFO blocks a
    /// thread until a writer comes, and a read of it never ends. A missing
    /// object is left to the store to report.
    fn check_regular(&self, name: &str) -> Result<()> {
        let Some(root) = &self.local else {
            return Ok(());
        };
        let path = name.split('/').fold(root.clone(), |p, part| p.join(part));
        match std::fs::metadata(&path) {
            Ok(meta) if !meta.is_file() => Err(IoError::Local {
                path: path.display().to_string(),
                error: std::io::Error::other(
                    "not a regular file (a FIFO, a device or a directory): only regular files are read",
                ),
            }),
            _ => Ok(()),
        }
    }

    async fn read(&self, name: &str, want: Want) -> Result<Bytes> {
        self.check_regular(name)?;
        if let Some(root) = &self.local {
            let path = name.split('/').fold(root.clone(), |p, part| p.join(part));
            let local = want.clone();
            let read = tokio::task::spawn_blocking(move || read::read_local(&path, &local)).await;
            if let Ok(Some(bytes)) = read {
                return Ok(bytes);
            }
            // Whatever went wrong, the store's read says it as it would.
        }
        let (path, url) = (self.path(name), self.url_of(name));
        read::read(&*self.store, &path, &url, want, &self.retry).await
    }

    /// Writes object `name`, retrying transient failures.
    pub async fn put(&self, name: &str, data: Bytes) -> Result<()> {
        self.put_payload(name, PutPayload::from(data)).await
    }

    /// Writes object `name` from its pieces, retrying transient failures.
    pub async fn put_payload(&self, name: &str, data: PutPayload) -> Result<()> {
        let path = self.path(name);
        retry(&self.url_of(name), &self.retry, || {
            let payload = data.clone();
            let path = &path;
            async move {
                self.store
                    .put_opts(path, payload, PutOptions::default())
                    .await
            }
        })
        .await
        .map(drop)
    }

    /// Deletes object `name` (absent already is fine), retrying transient
    /// failures.
    pub async fn delete(&self, name: &str) -> Result<()> {
        let path = self.path(name);
        let deleted = retry(&self.url_of(name), &self.retry, || self.store.delete(&path)).await;
        match deleted {
            Err(error) if error.is_not_found() => Ok(()),
            other => other,
        }
    }

    /// Names (relative to the prefix) of all objects under the prefix.
    pub async fn list(&self) -> Result<Vec<(String, u64)>> {
        Ok(self
            .list_meta()
            .await?
            .into_iter()
            .map(|(name, size, _)| (name, size))
            .collect())
    }

    /// Names (relative to the prefix), sizes and ETags (where the store
    /// gives them) of all objects under the prefix, by name.
    pub async fn list_meta(&self) -> Result<Vec<(String, u64, Option<String>)>> {
        use futures::TryStreamExt;
        let metas: Vec<ObjectMeta> = retry(&self.url, &self.retry, || {
            self.store.list(Some(&self.prefix)).try_collect()
        })
        .await?;
        let prefix_parts = self.prefix.parts().count();
        let mut names: Vec<(String, u64, Option<String>)> = metas
            .into_iter()
            .map(|m| {
                let name = m
                    .location
                    .parts()
                    .skip(prefix_parts)
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                (name, m.size, m.e_tag)
            })
            .collect();
        names.sort();
        Ok(names)
    }
}

/// A store, the same store when it takes parts by number, and the path.
type Built = (Arc<dyn ObjectStore>, Option<Arc<dyn MultipartStore>>, Path);

/// Builds the store for `url`. The HTTP backends get their own retries
/// turned off: [`RetryPolicy`] is the one budget, applied by [`Location`].
fn build(url: &Url, options: &[(String, String)]) -> object_store::Result<Built> {
    use object_store::{aws, azure, gcp, RetryConfig};

    fn configure<K: std::str::FromStr>(options: &[(String, String)]) -> Vec<(K, String)> {
        // Keys a backend does not know (AWS_PROFILE, other clouds' keys)
        // are skipped, as `object_store::parse_url_opts` skips them.
        options
            .iter()
            .filter_map(|(k, v)| Some((k.to_ascii_lowercase().parse().ok()?, v.clone())))
            .collect()
    }
    let no_retries = RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    };
    // The three HTTP builders share these calls but no trait.
    macro_rules! http_store {
        ($builder:expr) => {{
            let store = Arc::new(
                configure(options)
                    .into_iter()
                    .fold($builder.with_url(url.as_str()), |b, (k, v)| {
                        b.with_config(k, v)
                    })
                    .with_retry(no_retries)
                    .build()?,
            );
            let parts: Arc<dyn MultipartStore> = store.clone();
            (store as Arc<dyn ObjectStore>, Some(parts))
        }};
    }
    let (scheme, path) = ObjectStoreScheme::parse(url)?;
    let (store, parts) = match scheme {
        ObjectStoreScheme::AmazonS3 => http_store!(aws::AmazonS3Builder::new()),
        ObjectStoreScheme::GoogleCloudStorage => {
            http_store!(gcp::GoogleCloudStorageBuilder::new())
        }
        ObjectStoreScheme::MicrosoftAzure => http_store!(azure::MicrosoftAzureBuilder::new()),
        ObjectStoreScheme::Memory => {
            let store = Arc::new(object_store::memory::InMemory::new());
            let parts: Arc<dyn MultipartStore> = store.clone();
            return Ok((store, Some(parts), Path::parse(path)?));
        }
        _ => {
            let (store, path) = object_store::parse_url_opts(url, options.iter().cloned())?;
            return Ok((Arc::from(store), None, path));
        }
    };
    Ok((store, parts, Path::parse(path)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_local_path_is_made_absolute_and_other_urls_kept() {
        let cwd = std::path::Path::new("/work/run");
        let cases = [
            ("data/ds", "/work/run/data/ds"),
            ("./ds/", "/work/run/ds/"),
            ("file:ds", "file:///work/run/ds"),
            ("file://./ds", "file:///work/run/ds"),
            ("file://ds", "file:///work/run/ds"),
            ("/abs/ds", "/abs/ds"),
            ("file:///abs/ds", "file:///abs/ds"),
            ("s3://bucket/ds", "s3://bucket/ds"),
            ("memory:///ds", "memory:///ds"),
        ];
        for (url, expected) in cases {
            assert_eq!(absolute_url(url, cwd), expected, "{url}");
        }
        // `..` resolved lexically.
        let up = absolute_url("../ds", cwd);
        assert!(up == "/work/ds" || up == "/work/run/../ds", "{up}");
    }

    fn get<'a>(options: &'a StoreOptions, key: &str) -> Option<&'a str> {
        options
            .options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn s3_settings_apply_to_s3_urls_only_and_a_plain_http_endpoint_is_allowed() {
        let s3 = S3Settings {
            endpoint: Some("http://127.0.0.1:9000".into()),
            region: Some("eu-west-1".into()),
            path_style: true,
        };
        let vars = [
            ("AWS_ACCESS_KEY_ID".to_owned(), "k".to_owned()),
            ("HOME".into(), "/root".into()),
        ];
        let options = StoreOptions::from_vars(vars).with_s3("s3://bucket/ds", &s3);
        assert_eq!(get(&options, "aws_access_key_id"), Some("k"));
        assert_eq!(get(&options, "home"), None);
        assert_eq!(get(&options, "aws_endpoint"), Some("http://127.0.0.1:9000"));
        assert_eq!(get(&options, "aws_allow_http"), Some("true"));
        assert_eq!(get(&options, "aws_region"), Some("eu-west-1"));
        assert_eq!(
            get(&options, "aws_virtual_hosted_style_request"),
            Some("false")
        );

        let local = StoreOptions::default().with_s3("gs://bucket/ds", &s3);
        assert!(local.options.is_empty(), "{local:?}");
    }

    /// A server answering every request with 403 and no body, as the EC2
    /// instance-metadata endpoint does off EC2 (or to IMDSv1 requests).
    fn forbidden_server() -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request);
                let _ = stream.write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn s3_without_credentials_says_no_aws_credentials_found_not_the_metadata_403() {
        // No keys: the S3 store asks the instance-metadata endpoint (here a
        // local one answering 403, as 169.254.169.254 does off EC2).
        let metadata = forbidden_server();
        let options = StoreOptions {
            options: vec![
                ("aws_metadata_endpoint".into(), metadata),
                ("aws_endpoint".into(), "http://127.0.0.1:9".into()),
                ("aws_allow_http".into(), "true".into()),
                ("aws_region".into(), "us-east-1".into()),
            ],
            retry: RetryPolicy {
                // Retried, it would wait an hour before its second attempt.
                first_backoff: std::time::Duration::from_secs(3600),
                ..RetryPolicy::default()
            },
        };
        let location = Location::open("s3://bucket/ds", &options, false).expect("open");
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            location.get("manifest.json"),
        )
        .await
        .expect("answered at once, not retried")
        .expect_err("no credentials");
        let message = error.to_string();
        assert!(matches!(error, IoError::NoCredentials { .. }), "{message}");
        assert!(
            message.contains("s3://bucket/ds/manifest.json: no AWS credentials found"),
            "{message}"
        );
        assert!(
            message.contains("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            "{message}"
        );
    }

    #[test]
    fn an_object_path_joins_the_prefix_part_by_part() {
        let location = Location::open("memory:///ds/train", &StoreOptions::default(), false)
            .expect("memory URL");
        assert_eq!(location.path("a/b.tar").as_ref(), "ds/train/a/b.tar");
        assert_eq!(location.url_of("a/b.tar"), "memory:///ds/train/a/b.tar");
    }

    #[tokio::test]
    async fn a_fifo_is_refused_before_it_is_opened() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("manifest.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let location = Location::open(
            dir.path().to_str().expect("utf-8"),
            &StoreOptions::default(),
            false,
        )
        .expect("open");
        // Without the check this read would wait for a writer forever.
        let error = location
            .get_at_most("manifest.json", 1 << 20)
            .await
            .expect_err("a FIFO")
            .to_string();
        assert!(error.contains("not a regular file"), "{error}");
        assert!(error.contains("manifest.json"), "{error}");
    }
}
