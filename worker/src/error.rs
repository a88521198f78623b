//! The worker's error type: one enum for everything a rank's pipeline, the
//! packer, the indexer and the inspector can fail with. Messages name the
//! URL, shard, offset or sample they are about.

use tributary_common::{FormatError, ManifestError};

use crate::store::ReadError;

/// Errors of `tributary-worker`.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("invalid dataset URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("{url}: not found{hint}")]
    NotFound { url: String, hint: &'static str },
    #[error("{url}: {error}")]
    Store {
        url: String,
        error: object_store::Error,
    },
    #[error("{url}: gave up after {attempts} attempts: {error}")]
    GaveUp {
        url: String,
        attempts: u32,
        error: object_store::Error,
    },
    #[error(
        "{url}: gave up after {attempts} attempts ({}): {error}",
        progress(*received, *expected)
    )]
    ReadFailed {
        url: String,
        attempts: u32,
        received: u64,
        expected: Option<u64>,
        error: Box<ReadError>,
    },
    #[error("{url}: the object is {size} bytes, more than the limit of {limit}")]
    TooLarge { url: String, size: u64, limit: u64 },
    #[error("manifest {url}: {error}")]
    Manifest { url: String, error: ManifestError },
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("sample `{key}` (id {id}): {reason}")]
    Sample {
        key: String,
        id: u64,
        reason: String,
    },
    /// A sample that cannot become an image (see [`crate::bad_samples`]).
    #[error("shard {shard}, chunk at byte {offset}: sample `{key}` (id {id}): {reason}")]
    BadSample {
        shard: String,
        offset: u64,
        key: String,
        id: u64,
        reason: String,
    },
    #[error("{bad} of {seen} samples were bad, more than max_bad_fraction {max_fraction} allows; the last: {last}")]
    TooManyBadSamples {
        bad: u64,
        seen: u64,
        max_fraction: f64,
        last: String,
    },
    #[error(
        "{url} already exists: a dataset is there (replace it with --force, PackOptions::force)"
    )]
    AlreadyExists { url: String },
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the pipeline stopped: {0}")]
    Stopped(String),
    #[error("coordinator: {message} ({code})")]
    Coordinator { code: String, message: String },
}

impl WorkerError {
    /// Maps an object-store error on `url` to a worker error, keeping
    /// "not found" distinct so callers and users can tell it apart.
    pub fn store(url: impl Into<String>, error: object_store::Error) -> Self {
        let url = url.into();
        match error {
            object_store::Error::NotFound { .. } => Self::NotFound { url, hint: "" },
            error => Self::Store { url, error },
        }
    }
}

fn progress(received: u64, expected: Option<u64>) -> String {
    match expected {
        Some(expected) => format!("{received} of {expected} bytes received"),
        None => format!("{received} bytes received"),
    }
}

/// Result alias of this crate.
pub type Result<T, E = WorkerError> = std::result::Result<T, E>;
