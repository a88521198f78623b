//! A shard's entry in the manifest: what every reader needs to know of it,
//! and where its chunk columns are (inline, or in the index object it
//! names), checked against what a shard of its samples can need.

use std::sync::Arc;

use super::check::{check_name, check_samples, validate_shard};
use super::index::{max_index_bytes, IndexRef, ShardSummary};
use super::meta::{CompressionKind, ShardMeta};
use super::table::RowGroups;

/// How a manifest entry holds its shard's chunk columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunks {
    /// A version 1 manifest lists them inline, validated when it is parsed.
    Inline(Arc<ShardMeta>),
    /// A version 2 manifest names the shard's binary index object, read and
    /// validated by whoever needs the columns ([`super::index`]).
    Index(IndexRef),
    /// A version 3 manifest's Parquet file: its row groups are its chunks,
    /// located by its footer ([`super::table`]).
    RowGroups(Arc<RowGroups>),
}

/// One shard's entry in the manifest: what every reader and the
/// coordinator need (name, samples, size, checksum), and where its chunk
/// columns are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardEntry {
    /// Object name relative to the manifest's directory.
    pub name: String,
    /// Number of samples.
    pub samples: u32,
    /// Size of the object in bytes.
    pub bytes: u64,
    /// crc32c of the whole object.
    pub crc32c: u32,
    pub chunks: Chunks,
}

impl ShardEntry {
    /// The shard's full entry, where the manifest holds it inline
    /// (version 1); `None` where it must be read from the shard's index.
    pub fn inline(&self) -> Option<&Arc<ShardMeta>> {
        match &self.chunks {
            Chunks::Inline(meta) => Some(meta),
            Chunks::Index(_) | Chunks::RowGroups(_) => None,
        }
    }

    /// The row groups of a Parquet shard (version 3).
    pub fn row_groups(&self) -> Option<&Arc<RowGroups>> {
        match &self.chunks {
            Chunks::RowGroups(groups) => Some(groups),
            _ => None,
        }
    }

    /// The shard's index object, in a version 2 manifest.
    pub fn index(&self) -> Option<&IndexRef> {
        match &self.chunks {
            Chunks::Inline(_) | Chunks::RowGroups(_) => None,
            Chunks::Index(index) => Some(index),
        }
    }

    /// The summary an index must agree with.
    pub fn summary(&self) -> ShardSummary<'_> {
        ShardSummary {
            name: &self.name,
            samples: self.samples,
            bytes: self.bytes,
            crc32c: self.crc32c,
        }
    }

    /// The entry of a shard whose columns the manifest holds inline.
    pub(super) fn inline_from(meta: ShardMeta) -> Self {
        Self {
            name: meta.name.clone(),
            samples: meta.samples,
            bytes: meta.bytes,
            crc32c: meta.crc32c,
            chunks: Chunks::Inline(Arc::new(meta)),
        }
    }
}

/// Checks one shard's manifest entry: its inline columns (version 1) as
/// [`validate_shard`] does, or its index reference (version 2), bounded by
/// what a shard of its samples can need. Errors are `(field, reason)`.
pub(super) fn validate_entry(
    entry: &ShardEntry,
    compression: CompressionKind,
) -> Result<(), (String, String)> {
    match &entry.chunks {
        Chunks::Inline(meta) => validate_shard(meta, compression),
        Chunks::RowGroups(groups) => {
            check_name("name", &entry.name)?;
            check_samples(entry.samples)?;
            groups.validate(entry.samples, entry.bytes)
        }
        Chunks::Index(index) => {
            check_name("name", &entry.name)?;
            check_samples(entry.samples)?;
            check_name("index.name", &index.name)?;
            if index.name == entry.name {
                return Err(("index.name".into(), "is the shard's own name".into()));
            }
            let most = max_index_bytes(entry.samples);
            if index.bytes == 0 || index.bytes > most {
                return Err((
                    "index.bytes".into(),
                    format!(
                        "is {}, outside 1..={most} (the most a shard of {} samples can need)",
                        index.bytes, entry.samples
                    ),
                ));
            }
            Ok(())
        }
    }
}
