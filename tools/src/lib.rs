//! # tributary-tools
//!
//! The tools that write and check datasets, outside any training job: the
//! packer, the WebDataset indexer, the inspector and synthetic images. They
//! share no code path with a rank's pipeline (`tributary-worker`), so they
//! live apart from it: a trainer and the Python wheel link none of this; the
//! `tributary` CLI does. Both read and write through `tributary-io`.
//!
//! ## Layout
//!
//! - [`pack`]: a source (an ImageFolder tree, a directory of WebDataset-style
//!   files or a CSV/JSONL listing, each a [`pack::Source`] streaming its
//!   samples) into shards (tar, zstd optional) and a manifest, uploaded with
//!   bounded memory; the manifest last.
//! - [`index`]: foreign WebDataset tars indexed in place into a manifest.
//! - [`inspect`]: a dataset verified shard by shard against its manifest.
//! - [`synth`]: deterministic photo-like sample images.
//! - [`tokens`]: token datasets: a text corpus tokenized into Megatron
//!   `.bin`/`.idx` shards (`pack --tokenizer`), and token files indexed in
//!   place (`index --tokens`).
//! - [`progress`]: how long-running tools report progress.
//! - [`error`]: [`ToolsError`]; object-store errors come from
//!   `tributary-io`.
//!
//! ## Example
//!
//! ```no_run
//! # async fn run() -> Result<(), tributary_tools::ToolsError> {
//! use std::path::Path;
//! use std::sync::Arc;
//! use tributary_io::{Location, StoreOptions};
//! use tributary_tools::pack::{pack, PackOptions};
//! use tributary_tools::progress::NoProgress;
//!
//! let dest = Location::open("s3://bucket/imagenet", &StoreOptions::default(), true)?;
//! let summary = pack(Path::new("/data/imagenet/train"), &dest, &PackOptions::default(), Arc::new(NoProgress)).await?;
//! println!("{} samples in {} shards", summary.samples, summary.shards);
//! # Ok(()) }
//! ```

pub mod error;
pub mod index;
pub mod inspect;
pub mod pack;
pub mod progress;
pub mod synth;
pub mod table;
pub mod tokens;

pub use error::{Result, ToolsError};
