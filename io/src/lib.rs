//! # tributary-io
//!
//! The object-store layer both sides of Tributary stand on: the coordinator
//! opens a dataset's manifest to plan a job, the worker streams its shards.
//! Nothing here decodes an image or plans an epoch.
//!
//! - [`location`]: URLs to object stores (a local path, `file://`,
//!   `memory://`, `s3://`, `gs://`, `az://`), [`StoreOptions`] and where they
//!   come from (the cloud SDKs' environment variables, flags), reads, writes
//!   and listings under one retry policy.
//! - [`read`]: [`RetryPolicy`], retries with backoff and jitter, and reads
//!   that resume where a broken body stopped, never allocating from what a
//!   server claims.
//! - [`upload`]: [`Upload`], objects of any size written as they are made:
//!   one PUT up to a limit, a multipart upload above it (parts retried
//!   alone, aborted on failure), in bounded memory; [`BlockingUpload`] for
//!   rayon threads.
//! - [`dataset`]: [`Dataset::open`]: a location plus its manifest, read
//!   within [`dataset::MAX_MANIFEST_BYTES`] and validated;
//!   [`Dataset::shard_meta`]: a shard's chunk columns, from a version 2
//!   manifest's index object, read once and shared.
//! - [`publish`]: [`write_manifest`]: index objects, then the manifest.
//! - [`cache`]: [`ShardCache`], a bounded cache of whole shard files on
//!   local disk, shared by the ranks of a node ([`Dataset::with_cache`]).
//! - [`error`]: [`IoError`], naming the URL of every failure.
//! - [`digest`]: hex SHA-256, and the digest a job records of its data.
//! - [`machine`]: what the machine has (its memory), for budgets.
//! - [`metrics`]: Prometheus metrics over plain HTTP (`GET /metrics`), for
//!   the coordinator and for ranks.
//! - `testing` (feature `testing`, off by default): a store wrapper that
//!   counts requests and injects faults, for tests.
//!
//! ## Example
//!
//! ```no_run
//! # async fn run() -> Result<(), tributary_io::IoError> {
//! use tributary_io::{Dataset, StoreOptions};
//!
//! let options = StoreOptions::from_vars(std::env::vars());
//! let dataset = Dataset::open("s3://bucket/imagenet", &options).await?;
//! println!("{} samples in {} shards", dataset.manifest.samples, dataset.manifest.shards.len());
//! # Ok(()) }
//! ```

pub mod bufpool;
pub mod cache;
pub mod dataset;
pub mod digest;
pub mod error;
pub mod location;
pub mod machine;
pub mod metrics;
pub mod parquet;
pub mod publish;
pub mod read;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tokens;
pub mod upload;

pub use cache::{CacheConfig, CacheStats, ShardCache};
pub use dataset::{dataset_url, Dataset};
pub use digest::{dataset_sha256, sha256_hex};
pub use error::{IoError, ReadError, Result};
pub use location::{Location, S3Settings, StoreOptions};
pub use metrics::MetricsServer;
pub use publish::{write_manifest, ManifestDraft, ManifestVersion};
pub use read::{retry, RetryPolicy};
pub use tokens::{open_any, open_any_within, write_token_dataset, AnyDataset, TokenDataset};
pub use upload::{BlockingUpload, Upload, UploadMeter, UploadOptions, Uploaded};
