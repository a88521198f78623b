//! The per-rank pipeline: fetch -> parse -> shuffle -> batch -> decode.
//!
//! ```text
//!  object store ──range GETs (bounded count + bytes)──▶ parse (blocking pool)
//!     ──▶ shuffle buffer (seeded, bounded) ──▶ sample batches (bounded channel)
//!     ──▶ decode + augment (rayon pool, batches in flight bounded)
//!     ──▶ ready batches (bounded prefetch queue) ──▶ Loader::next()
//! ```
//!
//! Every queue has a bound, so memory is bounded whatever the consumer does;
//! a slow consumer back-pressures all the way to the GETs. Batches come out in
//! a deterministic order: a pure function of (seed, epoch, spans).
//!
//! - [`config`]: [`LoaderConfig`], [`Stripe`] and their [`limits`].
//! - [`loader`]: [`Loader`] and its builder, which wire the stages.
//! - [`fetch`]: range reads of whole chunks, many in flight under a byte
//!   budget, in span order.
//! - [`parse`]: verifying and splitting the bytes of a read into samples.
//! - [`shuffle`]: the seeded, bounded shuffle buffer.
//! - [`batch`]: the batch type, and the stage that shuffles samples and
//!   cuts them into batches (and stripes).
//! - [`decode`]: decoding and augmenting a batch on the rayon pool.
//! - [`buffers`]: batch buffers recycled from dropped batches.
//! - [`metrics`]: throughput, reads in flight and their latency, per-stage
//!   time, consumer wait; their Prometheus view.

pub mod batch;
pub mod buffers;
pub mod config;
pub mod datasets;
pub mod decode;
pub mod fetch;
pub mod loader;
pub mod metrics;
pub mod parse;
pub mod shuffle;

#[cfg(test)]
mod tests;

pub use batch::{Batch, Images};
pub use config::{limits, LoaderConfig, Stripe, Tail};
pub use datasets::Datasets;
pub use loader::{decode_pool, Loader, LoaderBuilder};
