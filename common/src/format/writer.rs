//! [`ShardWriter`]: one shard's bytes and manifest entry, streamed into any
//! [`Write`] sink as samples are pushed (see [`crate::format::shard`] for the
//! format).

use std::collections::BTreeSet;
use std::io::Write;

use super::shard::DEFAULT_BLOCK_BYTES;
use super::tar;
use crate::error::FormatError;
use crate::manifest::{Compression, CompressionKind, ShardMeta, MAX_CHUNK_BYTES};
use crate::sample::check_key;

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
