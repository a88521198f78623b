//! # tributary-common
//!
//! The pure core of Tributary: everything that decides *what* is read, and
//! how bytes on the wire are laid out, with no I/O beyond the byte buffers it
//! is handed. The coordinator, the worker and the CLI build on it; because it
//! is pure, every rule here is unit- and property-tested in isolation.
//!
//! ## Layout
//!
//! - [`format`](mod@format): the bytes of a shard. The ustar subset Tributary writes and
//!   the tar dialects it reads ([`format::tar`]); building shards (plain tar
//!   or zstd blocks) and decoding any run of their chunks, each zstd frame
//!   within its recorded size ([`format::shard`]); indexing foreign
//!   WebDataset tars as a stream of bytes ([`format::index`]); verifying a
//!   shard against its manifest entry, read by read ([`format::verify`]).
//! - [`manifest`]: the versioned JSON manifest beside the shards, and the
//!   binary chunk index of each shard that a version 2 manifest names
//!   ([`manifest::index`]): encoded, and decoded within bounds.
//! - [`plan`]: everything that decides which samples a rank reads, as pure
//!   functions: spans and span sets, the unit of every assignment
//!   ([`plan::span`]); seeded shard order per epoch, the equal split of a
//!   cut and its dropped remainder; mixing datasets ([`plan::mix`]); the
//!   static and unshuffled parts of ranks without a coordinator
//!   ([`plan::assign`]); the seeded, bounded shuffle buffer every rank runs
//!   ([`plan::shuffle`]); synchronous elasticity, every generation's cut
//!   replayed from its small stored record ([`plan::generation`]); dynamic
//!   elasticity, the pool that leases units and records acknowledgements
//!   exactly once ([`plan::lease`]); deterministic ChaCha streams keyed by
//!   (seed, epoch, id, ...) ([`plan::seed`]).
//! - [`sample`]: WebDataset samples: keys, fields, grouping tar entries.
//! - [`text`]: dataset-controlled strings (keys, field names) escaped to
//!   print on one line.
//! - [`tokens`]: token datasets (flat token shards, Megatron `.idx`
//!   indexes, the token manifest) and fixed-length sequences: rows per
//!   shard and what each row holds, for `concat`, `bestfit` and `none`
//!   packing.
//! - [`proto`]: the coordinator protocol's messages, generated from
//!   `proto/`; its tonic client and server with the `grpc` feature.
//! - [`identity`]: how a member identifies itself (torchrun rank or name),
//!   read from torchrun's variables once at the edge.
//! - [`ids`]: `JobId`, `MemberId`, `Epoch`, `Generation` newtypes.
//! - [`invariants`]: "nothing lost, nothing twice", "equal parts" and an
//!   epoch's commits, written once.
//! - [`job`]: a job's spec ([`job::JobSpec`]), its one validation and its
//!   conversions to and from the protocol's `JobConfig`.
//! - [`error`]: format and manifest errors that name shard, chunk and offset;
//!   planner and lease-pool errors that name the generation, unit and member.
//!
//! ## Example
//!
//! ```
//! use bytes::Bytes;
//! use tributary_common::format::shard::{chunk_range, decode_chunks, ShardWriter};
//! use tributary_common::manifest::{Compression, Manifest};
//!
//! let mut writer = ShardWriter::new("shard-000000.tar.zst", Compression::ZSTD);
//! for i in 0..10 {
//!     writer.push(&format!("cat/{i:04}"), &[("cls", b"0"), ("txt", b"meow")])?;
//! }
//! let shard = writer.finish()?;
//! let manifest = Manifest::new(
//!     Compression::ZSTD.kind,
//!     shard.fields.iter().cloned().collect(),
//!     vec!["cat".into()],
//!     vec![shard.meta.clone()],
//! )?;
//!
//! // Read samples 4..7 only: fetch just the bytes of the chunks holding them.
//! let meta = manifest.shards[0].inline().expect("version 1: inline");
//! let range = chunk_range(meta, 4..7);
//! let bytes = Bytes::from(shard.data[range.bytes.start as usize..range.bytes.end as usize].to_vec());
//! let mut samples = Vec::new();
//! decode_chunks(meta, manifest.compression, &range, &bytes, 0, 4..7, &mut samples)?;
//! assert_eq!(samples.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(), ["cat/0004", "cat/0005", "cat/0006"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod error;
pub mod format;
pub mod identity;
pub mod ids;
pub mod invariants;
pub mod job;
pub mod manifest;
pub mod plan;
pub mod proto;
pub mod sample;
pub mod text;
pub mod tokens;

pub use error::{FormatError, ManifestError, PlanError, PoolError};
pub use identity::Identity;
pub use ids::{Epoch, Generation, JobId, MemberId};
