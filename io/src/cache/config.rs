//! The cache's settings and names: [`CacheConfig`] (a directory and a
//! byte limit, from flags, environment or Python), [`ShardObject`] (what
//! the cache checks a cached file against) and the entry names.

use std::path::PathBuf;
use std::sync::Arc;

use tributary_common::manifest::{ShardEntry, ShardMeta};

use super::ShardCache;
use crate::error::Result;

/// Where a rank's shard cache is and how large it may grow, as given
/// (flags, environment, Python arguments); [`CacheConfig::open`] checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    pub dir: PathBuf,
    /// Bytes, at least 1.
    pub limit: u64,
}

impl CacheConfig {
    /// Opens the cache, creating its directory; a zero limit or a directory
    /// that cannot be created is an error naming it.
    pub fn open(&self) -> Result<Arc<ShardCache>> {
        ShardCache::open(&self.dir, self.limit).map(Arc::new)
    }
}

/// A byte count as people write it: `1000`, `512KiB`, `64MiB`, `10GiB`,
/// `1TiB` (binary units; `K`, `M`, `G`, `T` and `KB`..`TB` mean the same).
pub fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => {
            return Err(format!(
                "{text:?} is not a byte count (e.g. 500000000, 64MiB, 10GiB)"
            ))
        }
    };
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count (e.g. 500000000, 64MiB, 10GiB)"))?;
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is more bytes than 2^64"))
}

/// What the cache knows of a shard: its object name, and the size and
/// crc32c its manifest gives (a cached file is checked against them).
#[derive(Debug, Clone, Copy)]
pub struct ShardObject<'a> {
    pub name: &'a str,
    pub bytes: u64,
    pub crc32c: u32,
    /// The first byte `crc32c` covers: 0 for a shard's whole object; for a
    /// Parquet file, the start of its tail (footer and page indexes), all
    /// its manifest knows of its bytes.
    pub checked_from: u64,
}

impl<'a> From<&'a ShardEntry> for ShardObject<'a> {
    fn from(entry: &'a ShardEntry) -> Self {
        Self {
            name: &entry.name,
            bytes: entry.bytes,
            crc32c: entry.crc32c,
            checked_from: entry
                .row_groups()
                .map_or(0, |groups| entry.bytes - groups.tail_bytes),
        }
    }
}

impl<'a> From<&'a ShardMeta> for ShardObject<'a> {
    fn from(meta: &'a ShardMeta) -> Self {
        Self {
            name: &meta.name,
            bytes: meta.bytes,
            crc32c: meta.crc32c,
            checked_from: 0,
        }
    }
}

/// The entry file name of the object at `url` of `bytes` bytes and
/// `crc32c`: the URL's 64-bit FNV-1a hash (stable across builds and
/// machines), size, crc32c and the object's base name (for people).
pub fn entry_name(url: &str, bytes: u64, crc32c: u32) -> String {
    let base: String = url
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    format!("{:016x}-{bytes}-{crc32c:08x}-{base}", fnv64(url.as_bytes()))
}

pub(super) fn fnv64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
