//! Opening object stores from URLs and retrying transient failures.
//!
//! URLs: a local path (`data/ds`), `file:///abs/path`, `memory:///name`,
//! `s3://bucket/prefix`, `gs://bucket/prefix`, `az://container/prefix`. Store
//! options (endpoint, region, credentials, `allow_http`, ...) are passed in
//! explicitly; the CLI collects them from flags and `AWS_*`, `GOOGLE_*`,
//! `AZURE_*` variables at its edge.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutOptions, PutPayload};
use url::Url;

use crate::error::{Result, WorkerError};

/// Key/value options for the object-store builders, e.g.
/// `("aws_endpoint", "http://127.0.0.1:9000")`.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    pub options: Vec<(String, String)>,
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
        Self { options }
    }

    /// Adds (or overrides) one option.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        self.options.retain(|(k, _)| k != key);
        self.options.push((key.to_owned(), value.into()));
    }
}

/// A location in an object store: the store plus a prefix inside it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// The URL as the user wrote it, for messages.
    pub url: String,
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Location").field("url", &self.url).finish()
    }
}

impl Location {
    /// Opens `url`. A URL without a scheme is a local directory; with
    /// `create`, a missing local directory is created.
    pub fn open(url: &str, options: &StoreOptions, create: bool) -> Result<Self> {
        let bad = |reason: String| WorkerError::BadUrl {
            url: url.to_owned(),
            reason,
        };
        let parsed = match Url::parse(url) {
            Ok(parsed) if parsed.scheme().len() > 1 => parsed,
            // No scheme (or a Windows drive letter): a local path.
            _ => {
                let path = std::path::Path::new(url);
                if create {
                    std::fs::create_dir_all(path).map_err(|error| WorkerError::Io {
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
            std::fs::create_dir_all(&path).map_err(|error| WorkerError::Io {
                path: path.display().to_string(),
                error,
            })?;
        }
        let (store, prefix) =
            object_store::parse_url_opts(&parsed, options.options.iter().cloned())
                .map_err(|e| bad(e.to_string()))?;
        Ok(Self {
            store: Arc::from(store),
            prefix,
            url: url.trim_end_matches('/').to_owned(),
        })
    }

    /// Wraps an existing store (tests, in-memory datasets).
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: &str, url: impl Into<String>) -> Self {
        Self {
            store,
            prefix: Path::from(prefix),
            url: url.into(),
        }
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

    /// Reads a whole object, retrying transient failures.
    pub async fn get(&self, name: &str) -> Result<Bytes> {
        let path = self.path(name);
        retry(&self.url_of(name), || async {
            self.store
                .get_opts(&path, GetOptions::default())
                .await?
                .bytes()
                .await
        })
        .await
    }

    /// Reads bytes `range` of object `name`, retrying transient failures.
    pub async fn get_range(&self, name: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.path(name);
        retry(&self.url_of(name), || {
            let options = GetOptions {
                range: Some(range.clone().into()),
                ..GetOptions::default()
            };
            let path = &path;
            async move { self.store.get_opts(path, options).await?.bytes().await }
        })
        .await
    }

    /// Writes object `name`, retrying transient failures.
    pub async fn put(&self, name: &str, data: Bytes) -> Result<()> {
        let path = self.path(name);
        retry(&self.url_of(name), || {
            let payload = PutPayload::from(data.clone());
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
        let deleted = retry(&self.url_of(name), || self.store.delete(&path)).await;
        match deleted {
            Err(WorkerError::NotFound { .. }) => Ok(()),
            other => other,
        }
    }

    /// Names (relative to the prefix) of all objects under the prefix.
    pub async fn list(&self) -> Result<Vec<(String, u64)>> {
        use futures::TryStreamExt;
        let metas: Vec<ObjectMeta> = self
            .store
            .list(Some(&self.prefix))
            .try_collect()
            .await
            .map_err(|e| WorkerError::store(&self.url, e))?;
        let prefix_parts = self.prefix.parts().count();
        let mut names: Vec<(String, u64)> = metas
            .into_iter()
            .map(|m| {
                let name = m
                    .location
                    .parts()
                    .skip(prefix_parts)
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                (name, m.size)
            })
            .collect();
        names.sort();
        Ok(names)
    }
}

/// Attempts per operation before giving up on a transient error.
pub const ATTEMPTS: u32 = 4;

fn transient(error: &object_store::Error) -> bool {
    !matches!(
        error,
        object_store::Error::NotFound { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::AlreadyExists { .. }
            | object_store::Error::Precondition { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

/// Runs `op` up to [`ATTEMPTS`] times with exponential backoff (50 ms, 100
/// ms, 200 ms) while it fails with a transient error. (Cloud backends also
/// retry inside `object_store`; this covers errors that surface anyway, such
/// as a connection reset mid-body.)
pub async fn retry<T, F, Fut>(url: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    let mut delay = Duration::from_millis(50);
    for attempt in 1.. {
        match op().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt < ATTEMPTS && transient(&error) => {
                tracing::warn!(%url, attempt, %error, "transient object-store error, retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            Err(error) => return Err(WorkerError::store(url, error)),
        }
    }
    unreachable!("the retry loop returns")
}
