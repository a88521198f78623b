//! Writing and checking datasets, outside any training job.
//!
//! - [`pack`]: an ImageFolder tree, a directory of WebDataset-style files or
//!   a CSV/JSONL listing into shards (tar, zstd optional) and a manifest,
//!   uploaded with bounded memory; the manifest last.
//! - [`index`]: foreign WebDataset tars indexed in place into a manifest.
//! - [`inspect`]: a dataset verified shard by shard against its manifest.
//! - [`synth`]: deterministic photo-like sample images.
//! - [`progress`]: how long-running tools report progress.

pub mod index;
pub mod inspect;
pub mod pack;
pub mod progress;
pub mod synth;
