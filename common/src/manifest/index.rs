//! A shard's binary chunk index: the per-chunk columns of a
//! [`ShardMeta`] (offsets, crc32c, sample counts, decompressed sizes) in one
//! small object beside the shard, named by a version 2 manifest
//! ([`IndexRef`]). A rank reads the indexes of the shards it touches, and
//! nobody parses a 25 MB JSON manifest to learn one shard's offsets.
//!
//! Layout (all integers little-endian; `varint` is unsigned LEB128, at most
//! 10 bytes, no bits past 64):
//!
//! ```text
//! magic      4 bytes  "TBIX"
//! version    u8       1
//! flags      u8       bit 0: chunk sample counts follow, bit 1: chunk
//!                     decompressed sizes follow; other bits 0
//! chunks     varint   n, at least 1
//! offset     varint   the first chunk's start
//! deltas     n varints  each chunk's stored size (start of the next minus start)
//! crc32c     n × u32  each chunk's stored bytes' crc32c
//! samples    n varints  (flag bit 0) samples per chunk
//! sizes      n varints  (flag bit 1) decompressed bytes per chunk
//! ```
//!
//! Nothing follows. The manifest records the index's exact size and crc32c;
//! [`decode`] checks both before it reads a field, bounds every count by
//! the bytes left and by the shard's sample count before anything is sized
//! from it, and then runs the same checks a version 1 manifest's inline
//! columns get. Its errors ([`IndexError`]) name the index object, the
//! shard, and the field or byte offset.

use serde::{Deserialize, Serialize};

use super::check::validate_shard;
use super::meta::{CompressionKind, ShardMeta};

/// The first bytes of every index.
pub const INDEX_MAGIC: &[u8; 4] = b"TBIX";
/// The index layout this build writes and reads.
pub const INDEX_VERSION: u8 = 1;
/// The suffix of index object names: `shard-000000.tar.zst.idx`.
pub const INDEX_SUFFIX: &str = ".idx";

const FLAG_SAMPLES: u8 = 1;
const FLAG_SIZES: u8 = 2;
/// magic, version, flags.
const HEADER_BYTES: u64 = 6;
const MAX_VARINT_BYTES: u64 = 10;
/// The most one chunk can take: a delta, a crc32c, a sample count and a
/// size.
const MAX_CHUNK_ENTRY_BYTES: u64 = MAX_VARINT_BYTES + 4 + 5 + MAX_VARINT_BYTES;
/// The fewest one chunk can take: a one-byte delta and a crc32c.
const MIN_CHUNK_ENTRY_BYTES: u64 = 5;

/// Where a shard's chunk index lives: a version 2 manifest's `index` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRef {
    /// Object name relative to the manifest's directory.
    pub name: String,
    /// Exact size of the object.
    pub bytes: u64,
    /// crc32c of the whole object.
    pub crc32c: u32,
}

impl IndexRef {
    /// The reference to `data`, stored as `name`.
    pub fn of(name: String, data: &[u8]) -> Self {
        Self {
            name,
            bytes: data.len() as u64,
            crc32c: crc32c::crc32c(data),
        }
    }
}

/// The largest index a shard of `samples` samples can need: every chunk
/// holds at least one sample, and no chunk's entry takes more than its
/// widest encoding. A manifest naming a larger index is refused before a
/// byte of it is read.
pub fn max_index_bytes(samples: u32) -> u64 {
    HEADER_BYTES + 2 * MAX_VARINT_BYTES + u64::from(samples) * MAX_CHUNK_ENTRY_BYTES
}

/// The name of the index object of shard `shard`.
pub fn index_name(shard: &str) -> String {
    format!("{shard}{INDEX_SUFFIX}")
}

/// An index that does not match its manifest entry or the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("index {index} of shard {shard}: {field}: {reason}")]
pub struct IndexError {
    /// The index object's name.
    pub index: String,
    /// The shard it describes.
    pub shard: String,
    /// The field (or `byte N`) at fault.
    pub field: String,
    pub reason: String,
}

/// Encodes the chunk columns of `meta`.
pub fn encode(meta: &ShardMeta) -> Vec<u8> {
    let chunks = meta.chunks();
    let mut out = Vec::with_capacity(16 + chunks * 8);
    out.extend_from_slice(INDEX_MAGIC);
    out.push(INDEX_VERSION);
    let mut flags = 0;
    if !meta.chunk_samples.is_empty() {
        flags |= FLAG_SAMPLES;
    }
    if !meta.chunk_uncompressed_bytes.is_empty() {
        flags |= FLAG_SIZES;
    }
    out.push(flags);
    put_varint(&mut out, chunks as u64);
    put_varint(&mut out, meta.chunk_offsets.first().copied().unwrap_or(0));
    for pair in meta.chunk_offsets.windows(2) {
        put_varint(&mut out, pair[1] - pair[0]);
    }
    for crc in &meta.chunk_crc32c {
        out.extend_from_slice(&crc.to_le_bytes());
    }
    for &n in &meta.chunk_samples {
        put_varint(&mut out, u64::from(n));
    }
    for &size in &meta.chunk_uncompressed_bytes {
        put_varint(&mut out, size);
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The summary a manifest keeps of a shard, which a decoded index must
/// agree with.
#[derive(Debug, Clone, Copy)]
pub struct ShardSummary<'a> {
    pub name: &'a str,
    pub samples: u32,
    pub bytes: u64,
    pub crc32c: u32,
}

/// Decodes the index `data` of shard `shard`, named by `index`, into the
/// shard's full [`ShardMeta`], checking it against both.
pub fn decode(
    data: &[u8],
    index: &IndexRef,
    shard: ShardSummary<'_>,
    compression: CompressionKind,
) -> Result<ShardMeta, IndexError> {
    let fail = |field: &str, reason: String| IndexError {
        index: index.name.clone(),
        shard: shard.name.to_owned(),
        field: field.to_owned(),
        reason,
    };
    if data.len() as u64 != index.bytes {
        return Err(fail(
            "bytes",
            format!(
                "the object is {} bytes, the manifest says {} (truncated or replaced?)",
                data.len(),
                index.bytes
            ),
        ));
    }
    let actual = crc32c::crc32c(data);
    if actual != index.crc32c {
        return Err(fail(
            "crc32c",
            format!(
                "checksum mismatch (manifest says crc32c {:08x}, data has {actual:08x})",
                index.crc32c
            ),
        ));
    }
    let mut reader = Reader { data, pos: 0 };
    let columns =
        read_columns(&mut reader, shard.samples).map_err(|(field, reason)| fail(&field, reason))?;
    if reader.pos != data.len() {
        return Err(fail(
            &format!("byte {}", reader.pos),
            format!("{} bytes follow the last column", data.len() - reader.pos),
        ));
    }
    let meta = ShardMeta {
        name: shard.name.to_owned(),
        samples: shard.samples,
        bytes: shard.bytes,
        crc32c: shard.crc32c,
        chunk_offsets: columns.offsets,
        chunk_samples: columns.samples,
        chunk_crc32c: columns.crc32c,
        chunk_uncompressed_bytes: columns.sizes,
    };
    validate_shard(&meta, compression).map_err(|(field, reason)| fail(&field, reason))?;
    Ok(meta)
}

struct Columns {
    offsets: Vec<u64>,
    crc32c: Vec<u32>,
    samples: Vec<u32>,
    sizes: Vec<u64>,
}

type FieldError = (String, String);

fn read_columns(reader: &mut Reader<'_>, shard_samples: u32) -> Result<Columns, FieldError> {
    let magic = reader.take(4, "magic")?;
    if magic != INDEX_MAGIC {
        return Err((
            "magic".into(),
            format!("is {magic:02x?}, expected {INDEX_MAGIC:02x?} (not a tributary index)"),
        ));
    }
    let version = reader.take(1, "version")?[0];
    if version != INDEX_VERSION {
        return Err((
            "version".into(),
            format!("is {version}, this build reads index version {INDEX_VERSION}"),
        ));
    }
    let flags = reader.take(1, "flags")?[0];
    if flags & !(FLAG_SAMPLES | FLAG_SIZES) != 0 {
        return Err(("flags".into(), format!("{flags:#04x} sets unknown bits")));
    }
    let chunks = reader.varint("chunks")?;
    // Bounded before it sizes anything: by the shard's samples (a chunk
    // holds at least one) and by the bytes left (a chunk takes at least a
    // one-byte size and a crc32c).
    let left = (reader.data.len() - reader.pos) as u64;
    if chunks == 0 || chunks > u64::from(shard_samples) || chunks > left / MIN_CHUNK_ENTRY_BYTES {
        return Err((
            "chunks".into(),
            format!(
                "is {chunks}; a shard of {shard_samples} samples with {left} index bytes left holds 1 to {}",
                u64::from(shard_samples).min(left / MIN_CHUNK_ENTRY_BYTES)
            ),
        ));
    }
    let n = chunks as usize;
    let mut offsets = Vec::with_capacity(n + 1);
    let mut offset = reader.varint("chunk_offsets")?;
    offsets.push(offset);
    for chunk in 0..n {
        let delta = reader.varint("chunk_offsets")?;
        offset = offset.checked_add(delta).ok_or_else(|| {
            (
                "chunk_offsets".to_owned(),
                format!("chunk {chunk}: the offsets overflow"),
            )
        })?;
        offsets.push(offset);
    }
    let crc_bytes = reader.take(n * 4, "chunk_crc32c")?;
    let crc32c = crc_bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let mut samples = Vec::new();
    if flags & FLAG_SAMPLES != 0 {
        samples.reserve(n);
        for chunk in 0..n {
            let count = reader.varint("chunk_samples")?;
            let count = u32::try_from(count).map_err(|_| {
                (
                    "chunk_samples".to_owned(),
                    format!("chunk {chunk}: {count} does not fit in 32 bits"),
                )
            })?;
            samples.push(count);
        }
    }
    let mut sizes = Vec::new();
    if flags & FLAG_SIZES != 0 {
        sizes.reserve(n);
        for _ in 0..n {
            sizes.push(reader.varint("chunk_uncompressed_bytes")?);
        }
    }
    Ok(Columns {
        offsets,
        crc32c,
        samples,
        sizes,
    })
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, field: &str) -> Result<&'a [u8], FieldError> {
        match self.pos.checked_add(len) {
            Some(end) if end <= self.data.len() => {
                let out = &self.data[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            _ => Err((
                field.to_owned(),
                format!(
                    "needs {len} bytes at byte {}, the index ends at {}",
                    self.pos,
                    self.data.len()
                ),
            )),
        }
    }

    fn varint(&mut self, field: &str) -> Result<u64, FieldError> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..MAX_VARINT_BYTES as u32 {
            let Some(&byte) = self.data.get(self.pos) else {
                return Err((
                    field.to_owned(),
                    format!("a number at byte {start} runs past the end of the index"),
                ));
            };
            self.pos += 1;
            let bits = u64::from(byte & 0x7f);
            if i == 9 && bits > 1 {
                break;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err((
            field.to_owned(),
            format!("the number at byte {start} overflows 64 bits"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::shard::ShardWriter;
    use crate::manifest::Compression;

    fn zstd_meta() -> ShardMeta {
        let mut writer = ShardWriter::new("s.tar.zst", Compression::ZSTD).block_bytes(2048);
        for i in 0..40 {
            writer
                .push(
                    &format!("k{i:03}"),
                    &[("txt", &vec![b'x'; 100 + i * 7][..])],
                )
                .expect("push");
        }
        writer.finish().expect("finish").meta
    }

    fn summary(meta: &ShardMeta) -> ShardSummary<'_> {
        ShardSummary {
            name: &meta.name,
            samples: meta.samples,
            bytes: meta.bytes,
            crc32c: meta.crc32c,
        }
    }

    fn decode_all(meta: &ShardMeta, data: &[u8]) -> Result<ShardMeta, IndexError> {
        let index = IndexRef::of("s.idx".into(), data);
        decode(data, &index, summary(meta), CompressionKind::Zstd)
    }

    #[test]
    fn round_trips_and_stays_small() {
        let meta = zstd_meta();
        assert!(meta.chunks() > 3);
        let data = encode(&meta);
        assert_eq!(decode_all(&meta, &data).expect("decodes"), meta);
        assert!(data.len() as u64 <= max_index_bytes(meta.samples));
        // About 8 bytes a chunk here, against ~40 in JSON.
        assert!(data.len() < 16 + meta.chunks() * 12, "{}", data.len());
    }

    #[test]
    fn varints_at_the_edges() {
        for value in [0, 1, 127, 128, 1 << 35, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut reader = Reader { data: &out, pos: 0 };
            assert_eq!(reader.varint("v"), Ok(value));
            assert_eq!(reader.pos, out.len());
        }
        let too_long = [0xffu8; 11];
        let err = Reader {
            data: &too_long,
            pos: 0,
        }
        .varint("v")
        .expect_err("overflow");
        assert!(err.1.contains("overflows 64 bits"), "{err:?}");
        let tenth_too_big = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader {
            data: &tenth_too_big,
            pos: 0
        }
        .varint("v")
        .is_err());
        let cut = [0x80u8];
        let err = Reader { data: &cut, pos: 0 }.varint("v").expect_err("cut");
        assert!(err.1.contains("past the end"), "{err:?}");
    }

    #[test]
    fn errors_name_the_index_the_shard_and_the_field() {
        let meta = zstd_meta();
        let data = encode(&meta);
        // The manifest's size and checksum come first.
        let index = IndexRef::of("s.idx".into(), &data);
        let err = decode(
            &data[..data.len() - 1],
            &index,
            summary(&meta),
            CompressionKind::Zstd,
        )
        .expect_err("truncated");
        let text = err.to_string();
        assert!(
            text.starts_with("index s.idx of shard s.tar.zst: bytes:"),
            "{text}"
        );
        let mut flipped = data.clone();
        flipped[9] ^= 1;
        let err =
            decode(&flipped, &index, summary(&meta), CompressionKind::Zstd).expect_err("flipped");
        assert_eq!(err.field, "crc32c");
        // Past the checksum (an index re-signed by a hostile writer), the
        // decoder still bounds everything.
        let mut bad_magic = data.clone();
        bad_magic[0] = b'X';
        assert_eq!(
            decode_all(&meta, &bad_magic).expect_err("magic").field,
            "magic"
        );
        let mut trailing = data.clone();
        trailing.push(0);
        let err = decode_all(&meta, &trailing).expect_err("trailing");
        assert!(err.field.starts_with("byte "), "{err}");
        let mut huge_count = data[..6].to_vec();
        put_varint(&mut huge_count, u64::from(u32::MAX) + 7);
        huge_count.extend_from_slice(&data[7..]);
        assert_eq!(
            decode_all(&meta, &huge_count).expect_err("count").field,
            "chunks"
        );
        // A count that disagrees with the shard: the manifest checks run.
        let mut lying = meta.clone();
        lying.chunk_samples[0] += 1;
        let err = decode_all(&meta, &encode(&lying)).expect_err("samples disagree");
        assert_eq!(err.field, "samples", "{err}");
        let mut past_end = meta.clone();
        *past_end.chunk_offsets.last_mut().expect("offsets") = meta.bytes + 1;
        let err = decode_all(&meta, &encode(&past_end)).expect_err("past the shard");
        assert_eq!(err.field, "chunk_offsets", "{err}");
    }
}
