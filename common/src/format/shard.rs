//! Writing and reading shards.
//!
//! A shard is a tar archive in WebDataset layout. Uncompressed, each sample is
//! a chunk of its own, so reading can start at any sample. With zstd, samples
//! are grouped into blocks of about [`ShardWriter::block_bytes`] and each block
//! is one independent zstd frame, so reading can start at any block; the
//! concatenated frames decompress to a plain tar (`zstd -dc | tar t` works).
//!
//! Both directions are pure: they take and return bytes, no I/O (a
//! [`ShardWriter`] streams into whatever [`std::io::Write`] it is given).

use std::ops::Range;

use bytes::Bytes;

use super::tar::TarReader;
use crate::error::FormatError;
use crate::manifest::{CompressionKind, ShardMeta};
use crate::sample::{group_entries, Field, Sample, SampleId};

pub use super::index::{index_tar, TarIndexer};
pub use super::verify::{verify_shard, ShardVerifier};
pub use super::writer::{FinishedShard, ShardWriter, StreamedShard};
pub use super::zstd::decompress_chunk;

/// Default uncompressed size of a zstd block.
pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;

/// The chunks, and the byte range holding them, that a reader fetches to get
/// samples `samples` of a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRange {
    pub chunks: Range<usize>,
    pub bytes: Range<u64>,
    /// Shard-local index of the first sample of the first chunk.
    pub first_sample: u32,
}

/// The smallest run of chunks holding samples `samples` (non-empty, within
/// the shard) of `meta`.
pub fn chunk_range(meta: &ShardMeta, samples: Range<u32>) -> ChunkRange {
    debug_assert!(samples.start < samples.end && samples.end <= meta.samples);
    let (first, first_sample, last) = if meta.chunk_samples.is_empty() {
        (samples.start as usize, samples.start, samples.end as usize)
    } else {
        let mut start = 0u32;
        let mut first = None;
        let mut last = meta.chunks();
        for (chunk, &n) in meta.chunk_samples.iter().enumerate() {
            if first.is_none() && samples.start < start + n {
                first = Some((chunk, start));
            }
            start += n;
            if samples.end <= start {
                last = chunk + 1;
                break;
            }
        }
        let (first, first_sample) = first.unwrap_or((meta.chunks(), meta.samples));
        (first, first_sample, last)
    };
    ChunkRange {
        chunks: first..last,
        bytes: meta.chunk_offsets[first]..meta.chunk_offsets[last],
        first_sample,
    }
}

/// Verifies and parses the chunks `range` of shard `meta`, whose stored bytes
/// are `data`, appending the samples with shard-local index in `want` to `out`.
///
/// `first_id` is the global id of the shard's sample 0. Uncompressed fields
/// share `data`'s buffer; compressed ones share their decompressed block.
pub fn decode_chunks(
    meta: &ShardMeta,
    kind: CompressionKind,
    range: &ChunkRange,
    data: &Bytes,
    first_id: SampleId,
    want: Range<u32>,
    out: &mut Vec<Sample>,
) -> Result<(), FormatError> {
    let expected = range.bytes.end - range.bytes.start;
    if data.len() as u64 != expected {
        return Err(FormatError::ShortRead {
            shard: meta.name.clone(),
            offset: range.bytes.start,
            expected,
            actual: data.len() as u64,
        });
    }
    let mut sample_index = range.first_sample;
    for chunk in range.chunks.clone() {
        let offset = meta.chunk_offsets[chunk];
        let stored = data.slice(
            (offset - range.bytes.start) as usize
                ..(meta.chunk_offsets[chunk + 1] - range.bytes.start) as usize,
        );
        let actual = crc32c::crc32c(&stored);
        if actual != meta.chunk_crc32c[chunk] {
            return Err(FormatError::Checksum {
                shard: meta.name.clone(),
                chunk,
                offset,
                expected: meta.chunk_crc32c[chunk],
                actual,
            });
        }
        let (tar_bytes, tar_base) = match kind {
            CompressionKind::None => (stored, offset),
            // Offsets inside a decompressed block are relative to it.
            CompressionKind::Zstd => (Bytes::from(decompress_chunk(meta, chunk, &stored)?), 0),
        };
        let expected = meta.samples_in_chunk(chunk);
        let mut reader = TarReader::new(&tar_bytes, tar_base);
        let mut entries = Vec::new();
        while let Some(entry) = reader.next_entry().map_err(|error| FormatError::Tar {
            shard: meta.name.clone(),
            error,
        })? {
            entries.push(entry);
        }
        let raw = group_entries(entries);
        if raw.len() != expected as usize {
            return Err(FormatError::SampleCount {
                shard: meta.name.clone(),
                chunk,
                offset,
                expected,
                found: raw.len(),
            });
        }
        for sample in raw {
            if want.contains(&sample_index) {
                out.push(Sample {
                    id: first_id + u64::from(sample_index),
                    key: sample.key,
                    fields: sample
                        .fields
                        .into_iter()
                        .map(|(ext, range)| Field {
                            ext,
                            data: tar_bytes.slice(range),
                        })
                        .collect(),
                });
            }
            sample_index += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Write;

    use super::*;
    use crate::format::tar;
    use crate::manifest::{Compression, MAX_CHUNK_BYTES};
    use proptest::prelude::*;

    type Fields = Vec<(String, Vec<u8>)>;

    fn write(samples: &[Fields], compression: Compression, block: usize) -> FinishedShard {
        let mut writer = ShardWriter::new("s.tar", compression).block_bytes(block);
        for (i, fields) in samples.iter().enumerate() {
            let refs: Vec<(&str, &[u8])> = fields
                .iter()
                .map(|(e, d)| (e.as_str(), d.as_slice()))
                .collect();
            writer.push(&format!("k/{i:05}"), &refs).expect("push");
        }
        writer.finish().expect("finish")
    }

    fn read(
        shard: &FinishedShard,
        kind: CompressionKind,
        want: Range<u32>,
    ) -> Result<Vec<Sample>, FormatError> {
        let range = chunk_range(&shard.meta, want.clone());
        let bytes = Bytes::copy_from_slice(
            &shard.data[range.bytes.start as usize..range.bytes.end as usize],
        );
        let mut out = Vec::new();
        decode_chunks(&shard.meta, kind, &range, &bytes, 100, want, &mut out)?;
        Ok(out)
    }

    fn arb_samples() -> impl Strategy<Value = Vec<Fields>> {
        let field = (
            prop::sample::select(vec!["jpg", "cls", "json", "seg.png", "txt"]),
            prop::collection::vec(any::<u8>(), 0..1500),
        );
        prop::collection::vec(
            prop::collection::btree_map(
                field
                    .prop_map(|(e, d)| (e.to_owned(), d))
                    .prop_map(|(e, d)| (e, d)),
                Just(()),
                1..4,
            )
            .prop_map(|m| m.into_keys().collect::<Vec<_>>()),
            1..40,
        )
        .prop_map(|samples| {
            samples
                .into_iter()
                .map(|fields| {
                    let mut seen = BTreeSet::new();
                    fields
                        .into_iter()
                        .filter(|(e, _)| seen.insert(e.clone()))
                        .collect()
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn round_trip_from_any_offset(
            samples in arb_samples(),
            zstd in any::<bool>(),
            block in 1usize..8000,
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
        ) {
            let compression = if zstd { Compression::ZSTD } else { Compression::NONE };
            let shard = write(&samples, compression, block);
            let n = samples.len();
            let (x, y) = (a.index(n), b.index(n));
            let want = x.min(y) as u32..x.max(y) as u32 + 1;
            let got = read(&shard, compression.kind, want.clone()).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(got.len(), want.len());
            for (sample, index) in got.iter().zip(want.clone()) {
                prop_assert_eq!(sample.id, 100 + u64::from(index));
                prop_assert_eq!(&sample.key, &format!("k/{index:05}"));
                let expected = &samples[index as usize];
                prop_assert_eq!(sample.fields.len(), expected.len());
                for (field, (ext, data)) in sample.fields.iter().zip(expected) {
                    prop_assert_eq!(&field.ext, ext);
                    prop_assert_eq!(&field.data[..], &data[..]);
                }
            }
            // Only the chunks holding the wanted samples are fetched.
            let range = chunk_range(&shard.meta, want.clone());
            if !zstd {
                prop_assert_eq!(range.bytes.start, shard.meta.chunk_offsets[want.start as usize]);
                prop_assert_eq!(range.bytes.end, shard.meta.chunk_offsets[want.end as usize]);
            }
            prop_assert_eq!(verify_shard(&shard.meta, compression.kind, &Bytes::from(shard.data.clone())).ok(), Some(n as u32));
        }
    }

    /// A sink that takes at most 7 bytes per call, as a slow pipe would.
    #[derive(Debug, Default)]
    struct Trickle(Vec<u8>);

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    proptest! {
        #[test]
        fn a_streamed_shard_has_the_bytes_and_meta_of_one_built_in_memory(
            samples in arb_samples(),
            zstd in any::<bool>(),
            block in 1usize..8000,
        ) {
            let compression = if zstd { Compression::ZSTD } else { Compression::NONE };
            let in_memory = write(&samples, compression, block);
            let mut writer =
                ShardWriter::with_sink("s.tar", compression, Trickle::default()).block_bytes(block);
            for (i, fields) in samples.iter().enumerate() {
                let refs: Vec<(&str, &[u8])> = fields
                    .iter()
                    .map(|(e, d)| (e.as_str(), d.as_slice()))
                    .collect();
                writer.push(&format!("k/{i:05}"), &refs).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
            prop_assert_eq!(writer.samples() as usize, samples.len());
            let streamed = writer.finish_sink().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&streamed.sink.0, &in_memory.data);
            prop_assert_eq!(&streamed.meta, &in_memory.meta);
            prop_assert_eq!(&streamed.fields, &in_memory.fields);
        }
    }

    #[test]
    fn a_failing_sink_is_an_error_naming_the_shard_and_offset() {
        #[derive(Debug)]
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("the upload gave up"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut writer = ShardWriter::with_sink("w.tar", Compression::NONE, Broken);
        let err = writer.push("k", &[("bin", b"x")]).expect_err("sink fails");
        let text = err.to_string();
        assert!(text.contains("shard w.tar"), "{text}");
        assert!(text.contains("byte 0"), "{text}");
        assert!(text.contains("the upload gave up"), "{text}");
    }

    #[test]
    fn uncompressed_shards_are_plain_tar_and_index_back_to_the_same_meta() {
        let samples: Vec<Fields> = (0..5)
            .map(|i| vec![("cls".into(), vec![b'0' + i]), ("jpg".into(), vec![i; 700])])
            .collect();
        let shard = write(&samples, Compression::NONE, 1);
        let (meta, fields) = index_tar("s.tar", &shard.data).expect("index");
        assert_eq!(meta, shard.meta);
        assert_eq!(fields, shard.fields);
    }

    #[test]
    fn corruption_is_reported_with_shard_chunk_and_offset() {
        // Incompressible payloads, so a zstd frame is as long as its samples.
        let noise = |i: u32| {
            (0..3000u32)
                .map(|j| (j.wrapping_mul(2_654_435_761).wrapping_add(i) >> 13) as u8)
                .collect()
        };
        let samples: Vec<Fields> = (0..6).map(|i| vec![("jpg".into(), noise(i))]).collect();
        for compression in [Compression::NONE, Compression::ZSTD] {
            let mut shard = write(&samples, compression, 4000);
            let chunk = shard.meta.chunks() - 1;
            let offset = shard.meta.chunk_offsets[chunk];
            shard.data[offset as usize + 100] ^= 0x55;
            let err = read(&shard, compression.kind, 0..6).expect_err("corrupt");
            let text = err.to_string();
            assert!(text.contains("shard s.tar"), "{text}");
            assert!(
                text.contains(&format!("chunk {chunk} at byte {offset}")),
                "{text}"
            );

            let shard = write(&samples, compression, 4000);
            let range = chunk_range(&shard.meta, 0..6);
            let cut = Bytes::copy_from_slice(&shard.data[..range.bytes.end as usize - 100]);
            let err = decode_chunks(
                &shard.meta,
                compression.kind,
                &range,
                &cut,
                0,
                0..6,
                &mut Vec::new(),
            )
            .expect_err("truncated");
            assert!(err.to_string().contains("truncated"), "{err}");
        }
    }

    #[test]
    fn a_chunk_shorter_than_its_recorded_size_is_an_error() {
        let shard = write(
            &[vec![("txt".into(), vec![1; 700])]],
            Compression::ZSTD,
            1 << 20,
        );
        let mut meta = shard.meta.clone();
        assert_eq!(meta.chunk_uncompressed_bytes, vec![512 + 1024 + 1024]);
        meta.chunk_uncompressed_bytes[0] += 512;
        let range = chunk_range(&meta, 0..1);
        let err = decode_chunks(
            &meta,
            CompressionKind::Zstd,
            &range,
            &Bytes::from(shard.data),
            0,
            0..1,
            &mut Vec::new(),
        )
        .expect_err("short");
        assert!(
            err.to_string().contains("the manifest records 3072"),
            "{err}"
        );
    }

    #[test]
    fn pack_and_index_reject_the_same_keys() {
        for key in ["a\u{1}b", "cat/x\ny", "a//b", "/abs"] {
            let mut writer = ShardWriter::new("w.tar", Compression::NONE);
            assert!(
                writer.push(key, &[("jpg", b"x")]).is_err(),
                "pack took {key:?}"
            );
            let mut tar = Vec::new();
            tar::append_entry(&mut tar, &format!("{key}.jpg"), b"x").expect("entry");
            tar::append_end(&mut tar);
            let indexed = index_tar("i.tar", &tar);
            assert!(
                matches!(
                    indexed,
                    Err(FormatError::BadSample { .. }) | Err(FormatError::Shard { .. })
                ),
                "index took {key:?}: {indexed:?}"
            );
        }
    }

    #[test]
    fn a_sample_over_the_chunk_limit_is_refused_by_the_writer() {
        let mut writer = ShardWriter::new("w.tar.zst", Compression::ZSTD);
        let big = vec![0u8; MAX_CHUNK_BYTES as usize];
        let err = writer
            .push("k", &[("bin", &big)])
            .expect_err("over the limit");
        assert!(err.to_string().contains("chunk limit"), "{err}");
    }

    #[test]
    fn zstd_frames_decompress_to_a_plain_tar() {
        let samples: Vec<Fields> = (0..9)
            .map(|i| vec![("txt".into(), vec![b'a' + i; 900])])
            .collect();
        let shard = write(&samples, Compression::ZSTD, 2000);
        assert!(shard.meta.chunks() > 1);
        let plain = zstd::stream::decode_all(&shard.data[..]).expect("concatenated frames decode");
        let (meta, _) = index_tar("plain.tar", &plain).expect("valid tar");
        assert_eq!(meta.samples, 9);
    }
}
