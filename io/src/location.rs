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
        let Some(path) = self.local_path(name) else {
            return Ok(());
        };
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

    /// The file of object `name` of a local location.
    fn local_path(&self, name: &str) -> Option<std::path::PathBuf> {
        let root = self.local.as_ref()?;
        Some(name.split('/').fold(root.clone(), |p, part| p.join(part)))
    }

    async fn read(&self, name: &str, want: Want) -> Result<Bytes> {
        self.check_regular(name)?;
        if let Some(path) = self.local_path(name) {
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
mod tests;
