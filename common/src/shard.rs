//! Writing and reading shards.
//!
//! A shard is a tar archive in WebDataset layout. Uncompressed, each sample is
//! a chunk of its own, so reading can start at any sample. With zstd, samples
//! are grouped into blocks of about [`ShardWriter::block_bytes`] and each block
//! is one independent zstd frame, so reading can start at any block; the
//! concatenated frames decompress to a plain tar (`zstd -dc | tar t` works).
//!
//! Both directions are pure: they take and return bytes, no I/O (a
//! [`ShardWriter`] streams into whatever [`Write`] it is given).

use std::collections::BTreeSet;
use std::io::Write;
use std::ops::Range;

use bytes::Bytes;

use crate::error::FormatError;
use crate::manifest::{Compression, CompressionKind, ShardMeta, MAX_CHUNK_BYTES};
use crate::sample::{check_key, group_entries, Field, Sample, SampleId};
use crate::tar::{self, TarReader};

pub use crate::tar_index::{index_tar, TarIndexer};
pub use crate::verify::{verify_shard, ShardVerifier};
pub use crate::zstd_chunk::decompress_chunk;

/// Default uncompressed size of a zstd block.
pub const DEFAULT_BLOCK_BYTES: usize = 1 << 20;

/// Builds one shard, streaming its bytes into a sink `W` as they are made:
/// a `Vec<u8>` (the default, [`ShardWriter::new`]) or any [`Write`] (an
/// upload, [`ShardWriter::with_sink`]).
///
/// Memory stays bounded whatever the shard's size: the writer holds one
/// sample's tar entries (uncompressed) or one zstd block, and the manifest
/// entry's offsets and checksums, computed as the bytes go out. The bytes
/// and the [`ShardMeta`] are the same whichever sink takes them.
#[derive(Debug)]
pub struct ShardWriter<W = Vec<u8>> {
    name: String,
    compression: Compression,
    block_bytes: usize,
    out: W,
    /// Bytes written to `out` so far.
    written: u64,
    /// crc32c of those bytes.
    crc: u32,
    /// The open zstd block, or (uncompressed) the sample being written.
    block: Vec<u8>,
    block_samples: u32,
    samples: u32,
    chunk_offsets: Vec<u64>,
    chunk_samples: Vec<u32>,
    chunk_crc32c: Vec<u32>,
    chunk_uncompressed_bytes: Vec<u64>,
    fields: BTreeSet<String>,
}

/// A finished shard: its bytes and its manifest entry.
#[derive(Debug)]
pub struct FinishedShard {
    pub data: Vec<u8>,
    pub meta: ShardMeta,
    /// Field extensions present in this shard.
    pub fields: BTreeSet<String>,
}

/// A finished shard whose bytes went to a sink: the sink back (to finish an
/// upload, say) and the manifest entry.
#[derive(Debug)]
pub struct StreamedShard<W> {
    pub sink: W,
    pub meta: ShardMeta,
    /// Field extensions present in this shard.
    pub fields: BTreeSet<String>,
}

impl ShardWriter {
    /// A writer for the shard object `name`, built in memory.
    pub fn new(name: impl Into<String>, compression: Compression) -> Self {
        Self::with_sink(name, compression, Vec::new())
    }

    /// Closes the archive and returns its bytes and manifest entry.
    pub fn finish(self) -> Result<FinishedShard, FormatError> {
        let shard = self.finish_sink()?;
        Ok(FinishedShard {
            data: shard.sink,
            meta: shard.meta,
            fields: shard.fields,
        })
    }
}

impl<W: Write> ShardWriter<W> {
    /// A writer for the shard object `name` whose bytes go to `sink`.
    pub fn with_sink(name: impl Into<String>, compression: Compression, sink: W) -> Self {
        Self {
            name: name.into(),
            compression,
            block_bytes: DEFAULT_BLOCK_BYTES,
            out: sink,
            written: 0,
            crc: 0,
            block: Vec::new(),
            block_samples: 0,
            samples: 0,
            chunk_offsets: Vec::new(),
            chunk_samples: Vec::new(),
            chunk_crc32c: Vec::new(),
            chunk_uncompressed_bytes: Vec::new(),
            fields: BTreeSet::new(),
        }
    }

    /// Sets the target uncompressed size of a zstd block.
    pub fn block_bytes(mut self, bytes: usize) -> Self {
        self.block_bytes = bytes.max(1);
        self
    }

    /// Bytes written so far (bytes sent to the sink plus the open block).
    pub fn len(&self) -> u64 {
        self.written + self.block.len() as u64
    }

    /// Whether no sample was written yet.
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// Samples written so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Appends a sample: its key and `(extension, bytes)` fields.
    pub fn push(&mut self, key: &str, fields: &[(&str, &[u8])]) -> Result<(), FormatError> {
        let bad = |reason: String| FormatError::BadSample {
            shard: self.name.clone(),
            key: key.to_owned(),
            reason,
        };
        check_key(key).map_err(|reason| bad(reason.into()))?;
        if fields.is_empty() {
            return Err(bad("has no fields".into()));
        }
        if let Some((ext, _)) = fields
            .iter()
            .find(|(ext, _)| ext.is_empty() || ext.contains('/'))
        {
            return Err(bad(format!(
                "field extension `{ext}` is empty or holds a `/`"
            )));
        }
        if self.samples == u32::MAX {
            return Err(bad(format!(
                "is one sample past the {} a shard can hold",
                u32::MAX
            )));
        }
        // Each chunk stays within the limit every reader enforces.
        let sample_bytes: u64 = fields
            .iter()
            .map(|(_, data)| tar::entry_len(data.len()) as u64)
            .sum();
        let end_marker = 2 * tar::BLOCK as u64;
        if sample_bytes + end_marker > MAX_CHUNK_BYTES {
            return Err(bad(format!(
                "is {sample_bytes} bytes as tar entries, over the {MAX_CHUNK_BYTES}-byte chunk limit"
            )));
        }
        if self.compression.kind == CompressionKind::Zstd
            && self.block_samples > 0
            && (self.block.len() >= self.block_bytes
                || self.block.len() as u64 + sample_bytes + end_marker > MAX_CHUNK_BYTES)
        {
            self.flush_block(false)?;
        }
        let tar_err = |error| FormatError::Tar {
            shard: self.name.clone(),
            error,
        };
        for (ext, data) in fields {
            tar::append_entry(&mut self.block, &format!("{key}.{ext}"), data).map_err(tar_err)?;
            if !self.fields.contains(*ext) {
                self.fields.insert((*ext).to_owned());
            }
        }
        if self.compression.kind == CompressionKind::None {
            // Each sample is a chunk of its own, written out at once.
            self.chunk_offsets.push(self.written);
            self.chunk_crc32c.push(crc32c::crc32c(&self.block));
            let sample = std::mem::take(&mut self.block);
            self.emit(&sample)?;
            self.block = sample;
            self.block.clear();
        }
        self.block_samples += 1;
        self.samples += 1;
        Ok(())
    }

    /// Sends `bytes` to the sink, keeping the running length and checksum.
    fn emit(&mut self, bytes: &[u8]) -> Result<(), FormatError> {
        self.out
            .write_all(bytes)
            .map_err(|error| FormatError::Write {
                shard: self.name.clone(),
                offset: self.written,
                error,
            })?;
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn flush_block(&mut self, last: bool) -> Result<(), FormatError> {
        if last {
            tar::append_end(&mut self.block);
        }
        let frame = zstd::bulk::compress(&self.block, self.compression.level).map_err(|e| {
            FormatError::Shard {
                shard: self.name.clone(),
                reason: format!("zstd compression failed: {e}"),
            }
        })?;
        self.chunk_offsets.push(self.written);
        self.chunk_samples.push(self.block_samples);
        self.chunk_uncompressed_bytes.push(self.block.len() as u64);
        self.chunk_crc32c.push(crc32c::crc32c(&frame));
        self.emit(&frame)?;
        self.block.clear();
        self.block_samples = 0;
        Ok(())
    }

    /// Closes the archive, flushes the sink and returns it with the
    /// shard's manifest entry.
    pub fn finish_sink(mut self) -> Result<StreamedShard<W>, FormatError> {
        if self.samples == 0 {
            return Err(FormatError::Shard {
                shard: self.name,
                reason: "no samples were written".into(),
            });
        }
        match self.compression.kind {
            CompressionKind::None => {
                self.chunk_offsets.push(self.written);
                let mut end = Vec::new();
                tar::append_end(&mut end);
                self.emit(&end)?;
            }
            CompressionKind::Zstd => {
                self.flush_block(true)?;
                self.chunk_offsets.push(self.written);
            }
        }
        self.out.flush().map_err(|error| FormatError::Write {
            shard: self.name.clone(),
            offset: self.written,
            error,
        })?;
        let meta = ShardMeta {
            name: self.name,
            samples: self.samples,
            bytes: self.written,
            crc32c: self.crc,
            chunk_offsets: self.chunk_offsets,
            chunk_samples: self.chunk_samples,
            chunk_crc32c: self.chunk_crc32c,
            chunk_uncompressed_bytes: self.chunk_uncompressed_bytes,
        };
        Ok(StreamedShard {
            sink: self.out,
            meta,
            fields: self.fields,
        })
    }
}

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
    use super::*;
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
            prop_assert_eq!(writer.len() > 0, true);
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
