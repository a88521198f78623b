//! # tributary-worker
//!
//! Everything that touches bytes on the data path of one rank: the streaming
//! pipeline that turns a span set into decoded, augmented batches. It runs
//! in-process in the trainer; the `tributary` CLI and the Python binding are
//! thin layers over it. The tools that write and check datasets (packer,
//! indexer, inspector, synthetic data) share no code path with it and live
//! in `tributary-tools`.
//!
//! ## Layout
//!
//! Three rooms, and the rank API in front of them:
//!
//! - [`pipeline`]: the streaming pipeline of one rank, stage by stage
//!   (`fetch`, `parse`, `shuffle`, `cut`, `decode`), its output types, its
//!   configuration and the [`Loader`] that wires it.
//! - [`coordinated`]: loading under a coordinator: the client, join and
//!   keep-alive, the sync loader (equal parts per generation, checkpoints)
//!   and the dynamic loader (leased units, acks).
//! - [`rank`]: one rank of a coordinated job in one call: dataset,
//!   coordinator, job, membership and the loader of the job's mode.
//! - [`error`]: [`WorkerError`]; object-store errors come from
//!   `tributary-io`, which this crate reads through.
//!
//! ## Example
//!
//! ```no_run
//! # async fn run() -> Result<(), tributary_worker::WorkerError> {
//! use tributary_worker::{Dataset, Loader, LoaderConfig, PlanConfig, StoreOptions};
//!
//! let dataset = Dataset::open("s3://bucket/imagenet", &StoreOptions::default()).await?;
//! let plan = PlanConfig { rank: 0, world: 8, batch_size: 256, seed: 42, ..PlanConfig::default() };
//! let config = LoaderConfig { plan, ..LoaderConfig::default() };
//! let mut loader = Loader::builder(dataset).config(config).build().await?;
//! while let Some(batch) = loader.next().await {
//!     let batch = batch?;
//!     println!("batch {} of {} images, labels {:?}", batch.index, batch.len(), batch.labels());
//! }
//! # Ok(()) }
//! ```

pub mod coordinated;
pub mod error;
pub mod pipeline;
pub mod rank;

pub use error::{InvalidConfig, Result, WorkerError};
pub use pipeline::decode::bad_samples::OnError;
pub use pipeline::decode::fields::Fields;
pub use pipeline::decode::pixels::DecodeLimits;
pub use pipeline::decode::restart_markers::with_restarts as jpeg_with_restart_markers;
pub use pipeline::decode::transform::{Dtype, Layout, Preset, Size, Transform};
pub use pipeline::fetch::FetchConfig;
pub use pipeline::{
    Batch, Column, Datasets, DecodeConfig, Images, Loader, LoaderBuilder, LoaderConfig, PlanConfig,
    ShuffleBytes, Stripe, Tail,
};
/// The object-store layer this crate reads through (`tributary-io`).
pub use tributary_io::{CacheConfig, Dataset, Location, ShardCache, StoreOptions};
