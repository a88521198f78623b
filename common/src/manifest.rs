//! The dataset manifest: one JSON object beside the shards that says what
//! every shard holds and where each of its chunks starts.
//!
//! A *chunk* is the unit a reader can start at and verify on its own: one
//! sample in an uncompressed shard, one zstd frame (a block of samples) in a
//! compressed one. A shard's chunk columns ([`ShardMeta`]): `chunk_offsets`
//! has one entry per chunk plus the end of the last chunk; `chunk_crc32c`
//! checks each chunk's stored bytes. In a compressed shard
//! `chunk_uncompressed_bytes` records what each frame decompresses to, and a
//! reader decompresses no more than that (a zstd frame of a few KB can
//! expand to gigabytes).
//!
//! Two versions (docs/FORMAT.md): version 1 lists every shard's chunk
//! columns inline (about 20 bytes of JSON a sample, 25 MB for ImageNet,
//! parsed by every rank); version 2, written by default, keeps only each
//! shard's name, samples, size and checksum, and names a binary index
//! object per shard ([`crate::chunk_index`]) that a rank reads only for the
//! shards it touches. [`ShardEntry::chunks`] says which.
//!
//! Every count, offset and size is checked against the others when a
//! manifest is parsed or built ([`Manifest::from_json`], [`Manifest::new`]),
//! or when an index is decoded ([`crate::chunk_index::decode`]), before
//! anything is sized from it: see [`MAX_CHUNK_BYTES`], [`MIN_SAMPLE_BYTES`]
//! and [`ShardMeta::chunk_limit`].
//!
//! ```json
//! {"format":"tributary","version":1,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "chunk_offsets":[0,3584],"chunk_samples":[2],"chunk_crc32c":[305419896],
//!             "chunk_uncompressed_bytes":[4096]}]}
//! {"format":"tributary","version":2,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "index":{"name":"shard-000000.tar.zst.idx","bytes":17,"crc32c":2596996162}}]}
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::chunk_index::{self, IndexRef, ShardSummary};
use crate::error::ManifestError;
use crate::manifest_check::{validate_entry, validate_shard};
use crate::manifest_wire::WireManifest;
use crate::sample::SampleId;

pub use crate::chunk_index::index_name;

/// The manifest's object name beside the shards.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The `format` value of every manifest.
pub const FORMAT_NAME: &str = "tributary";
/// Version 1: every shard's chunk columns inline in the JSON.
pub const VERSION_INLINE: u32 = 1;
/// Version 2: each shard names a binary index object holding its chunk
/// columns ([`crate::chunk_index`]); the JSON stays small.
pub const VERSION_INDEXED: u32 = 2;
/// The manifest version this build writes by default; it reads both.
pub const FORMAT_VERSION: u32 = VERSION_INDEXED;

/// The largest chunk, stored or decompressed: 1 GiB. A chunk is one sample
/// (uncompressed shards) or one zstd block of about 1 MiB plus at most one
/// sample, so only a sample of about a gigabyte reaches it.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// The fewest bytes a sample takes in a tar stream: one 512-byte header. A
/// chunk of `n` bytes therefore holds at most `n / 512` samples.
pub const MIN_SAMPLE_BYTES: u64 = 512;
/// The decompression limit of a chunk of a manifest written before chunk
/// sizes were recorded is this many times its stored size...
pub const LEGACY_EXPANSION: u64 = 32;
/// ...but at least this much (64 MiB, far above the 1 MiB blocks `pack`
/// writes by default), and at most [`MAX_CHUNK_BYTES`].
pub const LEGACY_MIN_LIMIT: u64 = 64 << 20;
/// The longest shard name.
pub const MAX_NAME_BYTES: usize = 1024;

/// How a dataset's shards are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionKind {
    /// Plain tar: any tar or WebDataset reader reads the shard as is.
    None,
    /// Concatenated independent zstd frames, each holding whole samples; the
    /// decompressed stream is a plain tar.
    Zstd,
}

impl CompressionKind {
    /// The manifest's name for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Zstd => "zstd",
        }
    }

    /// File-name suffix of shards of this kind.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::None => ".tar",
            Self::Zstd => ".tar.zst",
        }
    }
}

/// A compression choice for writing: kind plus zstd level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub kind: CompressionKind,
    pub level: i32,
}

impl Compression {
    pub const NONE: Self = Self {
        kind: CompressionKind::None,
        level: 0,
    };
    /// zstd at its default level (3).
    pub const ZSTD: Self = Self {
        kind: CompressionKind::Zstd,
        level: 3,
    };
}

impl FromStr for Compression {
    type Err = String;

    /// Parses `none`, `zstd` or `zstd:LEVEL` (1-22).
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            None if text == "none" => Ok(Self::NONE),
            None if text == "zstd" => Ok(Self::ZSTD),
            Some(("zstd", level)) => match level.parse::<i32>() {
                Ok(level @ 1..=22) => Ok(Self {
                    kind: CompressionKind::Zstd,
                    level,
                }),
                _ => Err(format!("zstd level `{level}` is not a number from 1 to 22")),
            },
            _ => Err(format!(
                "unknown compression `{text}` (expected none, zstd or zstd:LEVEL)"
            )),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CompressionKind::None => f.write_str("none"),
            CompressionKind::Zstd => write!(f, "zstd:{}", self.level),
        }
    }
}

/// One shard's full description: its summary and every chunk's offset,
/// checksum, sample count and decompressed size. A version 1 manifest holds
/// it inline; a version 2 manifest names the index object it is read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMeta {
    /// Object name relative to the manifest's directory.
    pub name: String,
    /// Number of samples.
    pub samples: u32,
    /// Size of the object in bytes.
    pub bytes: u64,
    /// crc32c of the whole object.
    pub crc32c: u32,
    /// Start of each chunk, then the end of the last one.
    pub chunk_offsets: Vec<u64>,
    /// Samples per chunk; empty for uncompressed shards (one each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_samples: Vec<u32>,
    /// crc32c of each chunk's stored bytes.
    pub chunk_crc32c: Vec<u32>,
    /// Decompressed size of each chunk of a compressed shard; empty for
    /// uncompressed shards (a chunk's stored bytes are its bytes) and in
    /// manifests written before sizes were recorded (see
    /// [`ShardMeta::chunk_limit`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_uncompressed_bytes: Vec<u64>,
}

impl ShardMeta {
    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.chunk_crc32c.len()
    }

    /// Samples in chunk `chunk`.
    pub fn samples_in_chunk(&self, chunk: usize) -> u32 {
        if self.chunk_samples.is_empty() {
            1
        } else {
            self.chunk_samples[chunk]
        }
    }

    /// Stored bytes of chunk `chunk`.
    pub fn chunk_stored_bytes(&self, chunk: usize) -> u64 {
        self.chunk_offsets[chunk + 1] - self.chunk_offsets[chunk]
    }

    /// The most bytes chunk `chunk` may decompress to: its recorded size, or
    /// for a manifest without recorded sizes [`LEGACY_EXPANSION`] times its
    /// stored size, within [`LEGACY_MIN_LIMIT`]..=[`MAX_CHUNK_BYTES`].
    pub fn chunk_limit(&self, chunk: usize) -> u64 {
        match self.chunk_uncompressed_bytes.get(chunk) {
            Some(&size) => size,
            None => legacy_limit(self.chunk_stored_bytes(chunk)),
        }
    }

    /// The exact decompressed size of chunk `chunk`, where recorded.
    pub fn chunk_uncompressed(&self, chunk: usize) -> Option<u64> {
        self.chunk_uncompressed_bytes.get(chunk).copied()
    }
}

fn legacy_limit(stored: u64) -> u64 {
    stored
        .saturating_mul(LEGACY_EXPANSION)
        .clamp(LEGACY_MIN_LIMIT, MAX_CHUNK_BYTES)
}

/// How a manifest entry holds its shard's chunk columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunks {
    /// A version 1 manifest lists them inline, validated when it is parsed.
    Inline(Arc<ShardMeta>),
    /// A version 2 manifest names the shard's binary index object, read and
    /// validated by whoever needs the columns ([`crate::chunk_index`]).
    Index(IndexRef),
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
            Chunks::Index(_) => None,
        }
    }

    /// The shard's index object, in a version 2 manifest.
    pub fn index(&self) -> Option<&IndexRef> {
        match &self.chunks {
            Chunks::Inline(_) => None,
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

    fn inline_from(meta: ShardMeta) -> Self {
        Self {
            name: meta.name.clone(),
            samples: meta.samples,
            bytes: meta.bytes,
            crc32c: meta.crc32c,
            chunks: Chunks::Inline(Arc::new(meta)),
        }
    }
}

/// One index object to write beside the shards, before the manifest that
/// names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexObject {
    pub name: String,
    pub data: Vec<u8>,
}

/// The manifest of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`VERSION_INLINE`] or [`VERSION_INDEXED`].
    pub version: u32,
    pub compression: CompressionKind,
    /// Every field extension present in the dataset, sorted.
    pub fields: Vec<String>,
    /// Class names; the `cls` field of a sample indexes this list.
    pub classes: Vec<String>,
    /// Total samples over all shards.
    pub samples: u64,
    /// Total bytes over all shards.
    pub bytes: u64,
    pub shards: Vec<ShardEntry>,
    /// First global sample id of each shard (prefix sums), plus the total.
    starts: Vec<u64>,
}

impl Manifest {
    /// Builds a version 1 manifest, every shard's chunk columns inline,
    /// computing the totals.
    pub fn new(
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardMeta>,
    ) -> Result<Self, ManifestError> {
        let shards = shards.into_iter().map(ShardEntry::inline_from).collect();
        Self::from_entries(VERSION_INLINE, compression, fields, classes, shards)
    }

    /// Builds a version 2 manifest and the index objects it names: shard
    /// `s`'s columns go to `index_name(&s.name)` (see [`index_name`]). The
    /// index objects are to be written before the manifest.
    pub fn new_indexed(
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardMeta>,
        index_name: impl Fn(&str) -> String,
    ) -> Result<(Self, Vec<IndexObject>), ManifestError> {
        // Each shard's columns pass the version 1 checks first, so that no
        // index is written that a reader would refuse.
        for (i, shard) in shards.iter().enumerate() {
            validate_shard(shard, compression).map_err(|(field, reason)| {
                ManifestError::Invalid {
                    field: format!("shards[{i}].{field}"),
                    reason,
                }
            })?;
        }
        let mut indexes = Vec::with_capacity(shards.len());
        let entries = shards
            .into_iter()
            .map(|meta| {
                let data = chunk_index::encode(&meta);
                let index = IndexRef::of(index_name(&meta.name), &data);
                indexes.push(IndexObject {
                    name: index.name.clone(),
                    data,
                });
                ShardEntry {
                    name: meta.name,
                    samples: meta.samples,
                    bytes: meta.bytes,
                    crc32c: meta.crc32c,
                    chunks: Chunks::Index(index),
                }
            })
            .collect();
        let manifest = Self::from_entries(VERSION_INDEXED, compression, fields, classes, entries)?;
        Ok((manifest, indexes))
    }

    /// A manifest from its parts, not yet validated.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        format: String,
        version: u32,
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        samples: u64,
        bytes: u64,
        shards: Vec<ShardEntry>,
    ) -> Self {
        Self {
            format,
            version,
            compression,
            fields,
            classes,
            samples,
            bytes,
            shards,
            starts: Vec::new(),
        }
    }

    fn from_entries(
        version: u32,
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardEntry>,
    ) -> Result<Self, ManifestError> {
        let mut manifest = Self {
            format: FORMAT_NAME.to_owned(),
            version,
            compression,
            fields,
            classes,
            // Saturating: an overflow is then reported by `validate`.
            samples: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(u64::from(s.samples))),
            bytes: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(s.bytes)),
            shards,
            starts: Vec::new(),
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses and validates manifest JSON of either version. Errors name
    /// the offending field path, e.g. `shards[3].chunk_offsets`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let wire: WireManifest = serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            ManifestError::Parse { path, message }
        })?;
        let mut manifest = wire.into_manifest()?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Serialises the manifest (compact: offset arrays can be long).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out =
            serde_json::to_vec(&WireManifest::from(self)).expect("a manifest always serialises");
        out.push(b'\n');
        out
    }

    /// First global sample id of shard `shard`.
    pub fn shard_start(&self, shard: usize) -> SampleId {
        self.starts[shard]
    }

    /// Global id of sample `index` of shard `shard`.
    pub fn sample_id(&self, shard: usize, index: u32) -> SampleId {
        self.starts[shard] + u64::from(index)
    }

    /// `(shard, index)` of a global sample id.
    pub fn locate(&self, id: SampleId) -> Option<(usize, u32)> {
        if id >= self.samples {
            return None;
        }
        let shard = self.starts.partition_point(|&start| start <= id) - 1;
        Some((shard, (id - self.starts[shard]) as u32))
    }

    fn validate(&mut self) -> Result<(), ManifestError> {
        let invalid = |field: String, reason: String| ManifestError::Invalid { field, reason };
        if self.format != FORMAT_NAME {
            return Err(invalid(
                "format".into(),
                format!("is `{}`, expected `{FORMAT_NAME}`", self.format),
            ));
        }
        if !(VERSION_INLINE..=VERSION_INDEXED).contains(&self.version) {
            return Err(ManifestError::Version {
                found: self.version,
                supported: VERSION_INDEXED,
            });
        }
        if self.shards.is_empty() {
            return Err(invalid("shards".into(), "lists no shards".into()));
        }
        let mut starts = Vec::with_capacity(self.shards.len() + 1);
        let (mut samples, mut bytes) = (0u64, 0u64);
        for (i, shard) in self.shards.iter().enumerate() {
            starts.push(samples);
            validate_entry(shard, self.compression)
                .map_err(|(field, reason)| invalid(format!("shards[{i}].{field}"), reason))?;
            samples = samples
                .checked_add(u64::from(shard.samples))
                .ok_or_else(|| {
                    invalid(
                        "samples".into(),
                        "the shards' sample counts overflow".into(),
                    )
                })?;
            bytes = bytes.checked_add(shard.bytes).ok_or_else(|| {
                invalid(
                    format!("shards[{i}].bytes"),
                    format!("{} overflows the sum of shard sizes", shard.bytes),
                )
            })?;
        }
        starts.push(samples);
        if samples != self.samples {
            return Err(invalid(
                "samples".into(),
                format!("is {}, but the shards hold {samples}", self.samples),
            ));
        }
        if bytes != self.bytes {
            return Err(invalid(
                "bytes".into(),
                format!("is {}, but the shards hold {bytes}", self.bytes),
            ));
        }
        self.starts = starts;
        Ok(())
    }
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
