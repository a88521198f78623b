//! The per-rank pipeline: fetch -> parse -> shuffle -> cut -> decode ->
//! ready batches.
//!
//! ```text
//!  object store ──range GETs (bounded count + bytes)──▶ parse (blocking pool)
//!     ──▶ shuffle buffer (seeded, bounded) ──▶ cut into sample batches
//!     ──▶ sample batches (bounded channel)
//!     ──▶ decode + augment (rayon pool, batches in flight bounded)
//!     ──▶ ready batches (bounded prefetch queue) ──▶ Loader::next()
//! ```
//!
//! Every queue has a bound, so memory is bounded whatever the consumer does;
//! a slow consumer back-pressures all the way to the GETs. Batches come out in
//! a deterministic order: a pure function of (seed, epoch, spans).
//!
//! Each stage is a stream transformer; [`loader`] chains them in one
//! function, in the order the data flows.
//!
//! - [`config`]: [`LoaderConfig`] (its [`PlanConfig`] and [`DecodeConfig`]),
//!   [`Stripe`] and their [`limits`].
//! - [`output`]: what the trainer gets: [`Batch`], its [`Column`]s and
//!   [`Images`].
//! - [`loader`]: [`Loader`] and its builder, which wire the stages.
//! - [`fetch`]: range reads of whole chunks, many in flight under a byte
//!   budget, in span order.
//! - [`parse`]: verifying and splitting the bytes of a read into samples.
//! - [`shuffle`]: the seeded, bounded shuffle buffer.
//! - [`cut`]: the stage that cuts shuffled samples into batches (and
//!   stripes), by a [`Cut`](cut::Cut) strategy.
//! - [`decode`]: decoding and augmenting a batch on the rayon pool.
//! - [`tokens`]: the token path: spans of rows read as rows, batches of
//!   rows built into `input_ids`, `labels`, ... (a token job's fetch,
//!   parse and decode stages).
//! - [`buffers`]: batch buffers recycled from dropped batches.
//! - [`metrics`]: throughput, reads in flight and their latency, per-stage
//!   time, consumer wait; their Prometheus view.

pub mod buffers;
pub mod config;
pub mod cut;
pub mod datasets;
pub mod decode;
pub mod fetch;
pub mod loader;
pub mod metrics;
pub mod output;
pub mod parse;
pub mod shuffle;
pub mod table;
pub mod table_fields;
pub mod tokens;

#[cfg(test)]
mod tests;

pub use config::{
    limits, machine_batch_bytes, DecodeConfig, LoaderConfig, PlanConfig, ShuffleBytes, Stripe,
    Tail, DEFAULT_MAX_BATCH_BYTES, DEFAULT_SHUFFLE_BYTES,
};
pub use datasets::Datasets;
pub use loader::{decode_pool, span_samples, span_samples_with, Loader, LoaderBuilder};
pub use output::{Batch, Column, Images};
