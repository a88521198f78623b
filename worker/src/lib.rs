//! # tributary-worker
//!
//! Everything that touches bytes on the data path of one rank: the streaming
//! pipeline that turns a span set into decoded, augmented batches, and the
//! tools that write and check datasets (packer, indexer, inspector, synthetic
//! data). It runs in-process in the trainer; the `tributary` CLI and the
//! Python binding are thin layers over it.
//!
//! ## Layout
//!
//! - [`fetch`]: range reads of whole chunks, many in flight under a byte
//!   budget, verified and parsed, in span order.
//! - [`shuffle`]: the seeded, bounded shuffle buffer.
//! - [`augment`]: decode, RandomResizedCrop, flip, resize, normalise, into a
//!   batch slot.
//! - [`batch`]: the batch type and the rayon decode of a whole batch.
//! - [`pixels`]: image formats by magic bytes, header dimensions, the
//!   per-image pixel limit and the pixel budget decode threads share.
//! - [`bad_samples`]: what a loader does with samples that cannot be
//!   decoded (raise or skip, up to a fraction), and where they are.
//! - [`buffers`]: batch buffers recycled from dropped batches.
//! - [`loader`]: the pipeline wiring, its bounds and its public API.
//! - [`coordinated`]: loading under a coordinator: join, keep-alive, the
//!   sync loader (equal parts per generation, checkpoints) and the dynamic
//!   loader (leased units, acks).
//! - [`rank`]: one rank of a coordinated job in one call: dataset,
//!   coordinator, job, membership and the loader of the job's mode.
//! - [`metrics`]: throughput, per-stage time, consumer wait.
//! - [`pack`], [`index`], [`inspect`]: writing shards and manifests from an
//!   ImageFolder tree, indexing foreign WebDataset shards, verifying datasets.
//! - [`synth`]: deterministic photo-like sample images.
//!
//! ## Example
//!
//! ```no_run
//! # async fn run() -> Result<(), tributary_worker::WorkerError> {
//! use tributary_worker::{Dataset, Loader, LoaderConfig, StoreOptions};
//!
//! let dataset = Dataset::open("s3://bucket/imagenet", &StoreOptions::default()).await?;
//! let config = LoaderConfig { rank: 0, world: 8, batch_size: 256, seed: 42, ..LoaderConfig::default() };
//! let mut loader = Loader::builder(dataset).config(config).build().await?;
//! while let Some(batch) = loader.next().await {
//!     let batch = batch?;
//!     println!("batch {} of {} images, labels {:?}", batch.index, batch.len(), &batch.labels[..4]);
//! }
//! # Ok(()) }
//! ```

pub mod augment;
pub mod bad_samples;
pub mod batch;
pub mod buffers;
pub mod coordinated;
pub mod error;
pub mod fetch;
pub mod index;
pub mod inspect;
pub mod jpeg;
pub mod loader;
pub mod metrics;
pub mod pack;
pub mod pixels;
pub mod progress;
pub mod rank;
pub mod shuffle;
pub mod synth;

#[cfg(test)]
mod loader_tests;

pub use bad_samples::OnError;
pub use batch::{Batch, Images};
pub use error::{Result, WorkerError};
pub use loader::{Loader, LoaderBuilder, LoaderConfig, Stripe};
/// The object-store layer this crate reads through (`tributary-io`).
pub use tributary_io::{Dataset, Location, StoreOptions};
