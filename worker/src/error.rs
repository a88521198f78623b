//! The worker's error type: one enum for everything a rank's pipeline can
//! fail with. Messages name the URL, shard, offset or sample they are about.

use tributary_common::job::SpecError;
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
    /// A rank's configuration that cannot work (see [`InvalidConfig`]).
    #[error("invalid configuration: {0}")]
    Invalid(#[from] InvalidConfig),
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

/// A rank's configuration that cannot work, in the Rust API's words; the
/// variants carry the values, so that a binding can say it in its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidConfig {
    /// The job's spec (`RankConfig::spec`).
    #[error(transparent)]
    Job(#[from] SpecError),
    #[error("stripe ({index}, {count}): the stripe index must be below the number of stripes")]
    Stripe { index: usize, count: usize },
    #[error(
        "{count} worker processes of a dynamic job need a shared coordinator \
         (Coordinator::Shared): with an in-process one each would read the whole epoch"
    )]
    DynamicStripesInProcess { count: usize },
    #[error(
        "a world of {world} ranks needs a shared coordinator (Coordinator::Shared): \
         an in-process one serves one rank alone"
    )]
    WorldInProcess { world: u32 },
    #[error("dynamic.lookahead is for Mode::Dynamic; sync ranks read a fixed part")]
    LookaheadForSync,
    #[error("epoch is for Mode::Sync; dynamic members read the job's current epoch")]
    EpochForDynamic,
    #[error("an unshuffled loader (evaluation) reads a fixed split by rank: use Mode::Sync")]
    UnshuffledDynamic,
}

impl From<SpecError> for WorkerError {
    fn from(error: SpecError) -> Self {
        Self::Invalid(InvalidConfig::Job(error))
    }
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
