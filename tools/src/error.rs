//! The tools' error type: one enum for everything the packer, the indexer
//! and the inspector can fail with. Messages name the file, URL, shard or
//! sample they are about.

use tributary_common::FormatError;
use tributary_io::IoError;

/// Errors of `tributary-tools`.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// Object-store and manifest errors (see [`tributary_io::IoError`]).
    #[error(transparent)]
    Io(#[from] IoError),
    /// A shard that cannot be written or verified.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A token file or Megatron index that cannot be read (names the file
    /// and the byte offset).
    #[error(transparent)]
    Tokens(#[from] tributary_common::tokens::megatron::IdxError),
    #[error(
        "{url} already exists: a dataset is there (replace it with --force, PackOptions::force)"
    )]
    AlreadyExists { url: String },
    /// A local file (a source image, a directory being packed).
    #[error("{path}: {error}")]
    File { path: String, error: std::io::Error },
    /// A source changed between the pass that planned the shards and the
    /// pass that built them.
    #[error("{path} changed while it was packed ({what}); pack it again")]
    Changed { path: String, what: String },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the pipeline stopped: {0}")]
    Stopped(String),
}

/// Result alias of this crate.
pub type Result<T, E = ToolsError> = std::result::Result<T, E>;
