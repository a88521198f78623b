//! The manifest's leaf types: its names, versions and bounds, how shards
//! are compressed, and one shard's full chunk columns ([`ShardMeta`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The manifest's object name beside the shards.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The `format` value of every manifest.
pub const FORMAT_NAME: &str = "tributary";
/// Version 1: every shard's chunk columns inline in the JSON.
pub const VERSION_INLINE: u32 = 1;
/// Version 2: each shard names a binary index object holding its chunk
/// columns ([`super::index`]); the JSON stays small.
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

/// The decompression limit of a chunk of `stored` bytes whose size the
/// manifest does not record.
pub(super) fn legacy_limit(stored: u64) -> u64 {
    stored
        .saturating_mul(LEGACY_EXPANSION)
        .clamp(LEGACY_MIN_LIMIT, MAX_CHUNK_BYTES)
}
