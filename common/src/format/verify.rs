//! Verifying a shard object against its manifest entry as a stream of
//! reads, so that a shard of any size is checked in the memory of one read
//! window: the object checksum, every chunk's checksum, tar structure and
//! sample count.

use std::ops::Range;

use bytes::Bytes;

use super::shard::{decode_chunks, ChunkRange};
use crate::error::FormatError;
use crate::manifest::{CompressionKind, ShardMeta};
use crate::sample::check_labels;

/// Verifies one shard from successive reads of it: ask
/// [`ShardVerifier::next_range`] what to read, hand the bytes to
/// [`ShardVerifier::feed`], and call [`ShardVerifier::finish`] once no range
/// is left. It holds only its position, so it can move between threads;
/// every call takes the shard's (validated) manifest entry.
#[derive(Debug, Clone)]
pub struct ShardVerifier {
    kind: CompressionKind,
    max_read: u64,
    /// Offset of the next byte to verify.
    pos: u64,
    next_chunk: usize,
    next_sample: u32,
    object_crc: u32,
    classes: usize,
}

impl ShardVerifier {
    /// A verifier reading at most `max_read` bytes at a time (a chunk larger
    /// than that is still read whole; the manifest bounds chunks).
    pub fn new(kind: CompressionKind, max_read: u64) -> Self {
        Self {
            kind,
            max_read: max_read.max(1),
            pos: 0,
            next_chunk: 0,
            next_sample: 0,
            object_crc: 0,
            classes: 0,
        }
    }

    /// Also checks every sample's label against a manifest's `classes`
    /// names (none: no check).
    pub fn classes(mut self, classes: usize) -> Self {
        self.classes = classes;
        self
    }

    /// The next bytes to read, `None` when the whole object was verified.
    pub fn next_range(&self, meta: &ShardMeta) -> Option<Range<u64>> {
        let first = meta.chunk_offsets[0];
        if self.pos < first {
            return Some(self.pos..first.min(self.pos.saturating_add(self.max_read)));
        }
        if self.next_chunk < meta.chunks() {
            return Some(self.pos..meta.chunk_offsets[self.chunks_end(meta)]);
        }
        (self.pos < meta.bytes)
            .then(|| self.pos..meta.bytes.min(self.pos.saturating_add(self.max_read)))
    }

    /// One past the last chunk of the next read.
    fn chunks_end(&self, meta: &ShardMeta) -> usize {
        let offsets = &meta.chunk_offsets;
        let mut end = self.next_chunk + 1;
        while end < meta.chunks() && offsets[end + 1] - offsets[self.next_chunk] <= self.max_read {
            end += 1;
        }
        end
    }

    /// Verifies the bytes of the range [`ShardVerifier::next_range`] gave.
    pub fn feed(&mut self, meta: &ShardMeta, data: &Bytes) -> Result<(), FormatError> {
        let Some(range) = self.next_range(meta) else {
            return Err(FormatError::Shard {
                shard: meta.name.clone(),
                reason: format!("bytes past its end ({}) were read", meta.bytes),
            });
        };
        let expected = range.end - range.start;
        if data.len() as u64 != expected {
            return Err(FormatError::ShortRead {
                shard: meta.name.clone(),
                offset: range.start,
                expected,
                actual: data.len() as u64,
            });
        }
        let in_chunks = self.pos >= meta.chunk_offsets[0] && self.next_chunk < meta.chunks();
        if in_chunks {
            let chunks = self.next_chunk..self.chunks_end(meta);
            let samples: u32 = chunks.clone().map(|c| meta.samples_in_chunk(c)).sum();
            let want = self.next_sample..self.next_sample + samples;
            let chunk_range = ChunkRange {
                chunks: chunks.clone(),
                bytes: range.clone(),
                first_sample: self.next_sample,
            };
            let mut out = Vec::new();
            decode_chunks(meta, self.kind, &chunk_range, data, 0, want, &mut out)?;
            check_labels(&meta.name, &out, self.classes)?;
            self.next_chunk = chunks.end;
            self.next_sample += samples;
        }
        self.object_crc = crc32c::crc32c_append(self.object_crc, data);
        self.pos = range.end;
        Ok(())
    }

    /// Samples verified so far.
    pub fn samples(&self) -> u32 {
        self.next_sample
    }

    /// Checks the whole object's checksum once every range was fed; returns
    /// the number of samples verified.
    pub fn finish(self, meta: &ShardMeta) -> Result<u32, FormatError> {
        if let Some(range) = self.next_range(meta) {
            return Err(FormatError::Shard {
                shard: meta.name.clone(),
                reason: format!("bytes {}..{} were not verified", range.start, range.end),
            });
        }
        // Chunks first (their errors say where), then the whole object, which
        // also covers bytes outside every chunk (the end-of-archive marker).
        if self.object_crc != meta.crc32c {
            return Err(FormatError::Shard {
                shard: meta.name.clone(),
                reason: format!(
                    "object checksum mismatch (manifest says crc32c {:08x}, object has {:08x})",
                    meta.crc32c, self.object_crc
                ),
            });
        }
        Ok(self.next_sample)
    }
}

/// Verifies a whole shard object held in memory against its manifest entry.
/// Returns the number of samples checked.
pub fn verify_shard(
    meta: &ShardMeta,
    kind: CompressionKind,
    data: &Bytes,
) -> Result<u32, FormatError> {
    if data.len() as u64 != meta.bytes {
        return Err(FormatError::ShortRead {
            shard: meta.name.clone(),
            offset: 0,
            expected: meta.bytes,
            actual: data.len() as u64,
        });
    }
    let mut verifier = ShardVerifier::new(kind, 8 << 20);
    while let Some(range) = verifier.next_range(meta) {
        verifier.feed(meta, &data.slice(range.start as usize..range.end as usize))?;
    }
    verifier.finish(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::shard::{FinishedShard, ShardWriter};
    use crate::manifest::Compression;
    use proptest::prelude::*;

    fn shard(n: usize, compression: Compression) -> FinishedShard {
        let mut writer = ShardWriter::new("s.tar", compression).block_bytes(3000);
        for i in 0..n {
            let data: Vec<u8> = (0..1000 + 37 * i).map(|j| (j * 7 + i) as u8).collect();
            writer
                .push(&format!("k/{i}"), &[("cls", b"2"), ("jpg", &data)])
                .expect("push");
        }
        writer.finish().expect("finish")
    }

    fn verify_in_reads(
        shard: &FinishedShard,
        kind: CompressionKind,
        max_read: u64,
        classes: usize,
    ) -> Result<(u32, usize), FormatError> {
        let mut verifier = ShardVerifier::new(kind, max_read).classes(classes);
        let mut reads = 0;
        while let Some(range) = verifier.next_range(&shard.meta) {
            prop_assert_le(
                range.end - range.start,
                max_read.max(
                    shard
                        .meta
                        .chunk_offsets
                        .windows(2)
                        .map(|w| w[1] - w[0])
                        .max()
                        .unwrap_or(0),
                ),
            );
            let data =
                Bytes::copy_from_slice(&shard.data[range.start as usize..range.end as usize]);
            verifier.feed(&shard.meta, &data)?;
            reads += 1;
        }
        verifier.finish(&shard.meta).map(|n| (n, reads))
    }

    fn prop_assert_le(a: u64, b: u64) {
        assert!(a <= b, "a read of {a} bytes, over {b}");
    }

    proptest! {
        #[test]
        fn any_read_size_verifies_the_whole_shard(
            n in 1usize..20,
            zstd in any::<bool>(),
            max_read in 1u64..20_000,
        ) {
            let compression = if zstd { Compression::ZSTD } else { Compression::NONE };
            let shard = shard(n, compression);
            let (samples, _) = verify_in_reads(&shard, compression.kind, max_read, 0)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(samples as usize, n);
        }
    }

    #[test]
    fn a_shard_is_verified_in_many_bounded_reads_and_damage_outside_chunks_is_found() {
        let mut shard = shard(12, Compression::NONE);
        let (samples, reads) =
            verify_in_reads(&shard, CompressionKind::None, 4096, 3).expect("healthy");
        assert_eq!(samples, 12);
        assert!(reads >= 6, "{reads} reads");
        let err = verify_in_reads(&shard, CompressionKind::None, 4096, 2).expect_err("cls 2 of 2");
        assert!(err.to_string().contains("`cls` 2"), "{err}");
        // The end-of-archive marker lies outside every chunk.
        let last = shard.data.len() - 1;
        shard.data[last] = 1;
        let err = verify_in_reads(&shard, CompressionKind::None, 4096, 0).expect_err("damaged");
        assert!(
            err.to_string().contains("object checksum mismatch"),
            "{err}"
        );
    }
}
