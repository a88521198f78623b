//! Errors of the shard format, the manifest and the planner. Every message
//! names what it is about: the shard, chunk and byte offset, the manifest
//! field, the generation, or the unit and member.

use crate::format::tar::TarError;
use crate::ids::{Generation, MemberId};
use crate::text::printable;

/// A shard whose bytes disagree with the format or with its manifest entry.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("shard {shard}: {error}")]
    Tar { shard: String, error: TarError },
    #[error(
        "shard {shard}: chunk {chunk} at byte {offset}: checksum mismatch \
         (manifest says crc32c {expected:08x}, data has {actual:08x})"
    )]
    Checksum {
        shard: String,
        chunk: usize,
        offset: u64,
        expected: u32,
        actual: u32,
    },
    #[error("shard {shard}: zstd frame {chunk} at byte {offset} does not decompress: {message}")]
    Decompress {
        shard: String,
        chunk: usize,
        offset: u64,
        message: String,
    },
    #[error(
        "shard {shard}: chunk {chunk} at byte {offset} holds {found} samples, the manifest says {expected}"
    )]
    SampleCount {
        shard: String,
        chunk: usize,
        offset: u64,
        expected: u32,
        found: usize,
    },
    #[error("shard {shard}: expected {expected} bytes from byte {offset}, got {actual} (truncated shard?)")]
    ShortRead {
        shard: String,
        offset: u64,
        expected: u64,
        actual: u64,
    },
    #[error("shard {shard}: sample `{}`: {reason}", printable(.key))]
    BadSample {
        shard: String,
        key: String,
        reason: String,
    },
    #[error("shard {shard}: {reason}")]
    Shard { shard: String, reason: String },
    /// The sink a shard streams into failed (an upload, a file).
    #[error("shard {shard}: writing from byte {offset} failed: {error}")]
    Write {
        shard: String,
        offset: u64,
        error: std::io::Error,
    },
}

/// A manifest that cannot be parsed or that contradicts itself.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("field `{path}`: {message}")]
    Parse { path: String, message: String },
    #[error("unsupported manifest version {found} (this build reads versions 1 to {supported})")]
    Version { found: u32, supported: u32 },
    #[error("field `{field}`: {reason}")]
    Invalid { field: String, reason: String },
}

/// A generation history the planner cannot replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("generation {generation} is not in the history")]
    UnknownGeneration { generation: Generation },
    #[error(
        "generation history out of order: generation {generation} follows generation {previous}"
    )]
    OutOfOrder {
        generation: Generation,
        previous: Generation,
    },
    #[error("generation {generation} has no members")]
    EmptyWorld { generation: Generation },
    #[error("generation {generation} resumes from generation {from}, {reason}")]
    BadResume {
        generation: Generation,
        from: Generation,
        reason: String,
    },
}

/// A lease-pool operation that contradicts the pool's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("unit {unit} is not in this epoch's pool")]
    UnknownUnit { unit: u32 },
    #[error(
        "unit {unit} is not leased to member {member} (holder: {})",
        holder.as_ref().map_or("none", MemberId::as_str)
    )]
    NotLeasedTo {
        unit: u32,
        member: MemberId,
        holder: Option<MemberId>,
    },
    #[error("unit {unit} was already acknowledged by member {by}")]
    AlreadyAcked { unit: u32, by: MemberId },
}
