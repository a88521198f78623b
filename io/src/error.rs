//! Errors of the object-store layer. Every message names the URL it is
//! about; "not found" stays its own variant so callers (and users) can tell
//! it apart from a store that failed.

use std::ops::Range;
use std::time::Duration;

use tributary_common::manifest::index::IndexError;
use tributary_common::ManifestError;

/// Errors of `tributary-io`.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("invalid dataset URL `{url}`: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("{url}: not found{hint}")]
    NotFound { url: String, hint: &'static str },
    #[error("{url}: {error}")]
    Store {
        url: String,
        error: object_store::Error,
    },
    /// An S3 request with no credentials configured: the store's last
    /// resort, the EC2 instance-metadata endpoint, failed (off EC2, it
    /// answers 403 or nothing).
    #[error(
        "{url}: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \
         (and AWS_SESSION_TOKEN for temporary ones), or AWS_WEB_IDENTITY_TOKEN_FILE with \
         AWS_ROLE_ARN, or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI; a public bucket reads with \
         AWS_SKIP_SIGNATURE=true (AWS_PROFILE is not read: export the profile's keys). \
         The instance-metadata endpoint, tried last, said: {error}"
    )]
    NoCredentials {
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
    /// A token dataset's manifest or document index that does not hold
    /// what it must (the message names the shard, field or byte offset).
    #[error("{url}: {reason}")]
    Tokens { url: String, reason: String },
    /// A Parquet file whose footer, page index or pages are not what they
    /// must be (the message says what, and where).
    #[error("{url}: {reason}")]
    Parquet { url: String, reason: String },
    /// An upload that cannot go on (too many parts, a part lost).
    #[error("{url}: upload failed: {reason}")]
    Upload { url: String, reason: String },
    /// Upload options outside the stores' limits.
    #[error("upload options: {reason}")]
    UploadOptions { reason: String },
    /// A shard's chunk index that does not match the manifest or the format.
    #[error("{url}: {error}")]
    Index { url: String, error: IndexError },
    /// The shard cache's directory or limit is unusable, or a shard's
    /// bytes do not match its manifest.
    #[error("shard cache {path}: {reason}")]
    Cache { path: String, reason: String },
    /// A local directory that could not be created or resolved.
    #[error("{path}: {error}")]
    Local { path: String, error: std::io::Error },
}

impl IoError {
    /// Maps an object-store error on `url`, keeping "not found" distinct.
    pub fn store(url: impl Into<String>, error: object_store::Error) -> Self {
        let url = url.into();
        if no_credentials(&error) {
            return Self::NoCredentials { url, error };
        }
        match error {
            object_store::Error::NotFound { .. } => Self::NotFound { url, hint: "" },
            // A local path through a file: nothing is there either.
            error @ object_store::Error::Generic { .. } => match local_error(&error) {
                Some(std::io::ErrorKind::NotFound) => Self::NotFound { url, hint: "" },
                Some(std::io::ErrorKind::NotADirectory) => Self::NotFound {
                    url,
                    hint: " (a path in it is a file, not a directory)",
                },
                _ => Self::Store { url, error },
            },
            error => Self::Store { url, error },
        }
    }

    /// Is this "the object (or dataset) is not there"?
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }
}

/// The local filesystem's answer inside a store's error, when it is one
/// that another attempt cannot change: no such file, a path through a file
/// (`ds/manifest.json/manifest.json`), a directory where a file was
/// expected, no permission.
pub(crate) fn local_error(error: &object_store::Error) -> Option<std::io::ErrorKind> {
    use std::io::ErrorKind;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                ErrorKind::NotFound
                    | ErrorKind::NotADirectory
                    | ErrorKind::IsADirectory
                    | ErrorKind::PermissionDenied
                    | ErrorKind::InvalidInput
            )
            .then_some(io.kind());
        }
        source = current.source();
    }
    None
}

/// Whether `error` comes from asking the EC2 instance-metadata endpoint
/// for credentials (its paths are in the message whatever the endpoint):
/// the S3 store does that only when no other credentials were given.
pub(crate) fn no_credentials(error: &object_store::Error) -> bool {
    let message = error.to_string();
    message.contains("/latest/api/token") || message.contains("/latest/meta-data/iam/")
}

/// Why one attempt at a read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Store(#[from] object_store::Error),
    #[error("the body ended after {received} of {expected} bytes")]
    Truncated { received: u64, expected: u64 },
    #[error("the body brought more than the {expected} bytes asked for")]
    Overlong { expected: u64 },
    #[error("asked for bytes {asked:?}, the store answered with bytes {got:?}")]
    WrongRange { asked: Range<u64>, got: Range<u64> },
    #[error("no byte arrived for {0:?}")]
    Stalled(Duration),
    #[error("the object changed while it was read (it was version {etag})")]
    Changed { etag: String },
}

fn progress(received: u64, expected: Option<u64>) -> String {
    match expected {
        Some(expected) => format!("{received} of {expected} bytes received"),
        None => format!("{received} bytes received"),
    }
}

/// Result alias of this crate.
pub type Result<T, E = IoError> = std::result::Result<T, E>;
