//! The worker's error type: one enum for everything a rank's pipeline can
//! fail with. Messages name the URL, shard, offset or sample they are about.

use tributary_common::{FormatError, ManifestError};
use tributary_io::IoError;

/// Errors of `tributary-worker`.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Object-store and manifest errors (see [`tributary_io::IoError`]).
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error("sample `{key}` (id {id}): {reason}")]
    Sample {
        key: String,
        id: u64,
        reason: String,
    },
    /// A sample that cannot become an image (see [`crate::pipeline::decode::bad_samples`]).
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
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The metrics endpoint cannot listen (`metrics_listen`, `metrics_port`).
    #[error("cannot serve metrics on {address}: {error}")]
    Listen {
        address: String,
        error: std::io::Error,
    },
    #[error("the pipeline stopped: {0}")]
    Stopped(String),
    #[error("coordinator: {message} ({code:?})")]
    Coordinator { code: tonic::Code, message: String },
}

impl WorkerError {
    /// The manifest at `url` is invalid.
    pub fn manifest(url: impl Into<String>, error: ManifestError) -> Self {
        Self::Io(IoError::Manifest {
            url: url.into(),
            error,
        })
    }
}

/// Result alias of this crate.
pub type Result<T, E = WorkerError> = std::result::Result<T, E>;
