//! Indexing a foreign (WebDataset) tar shard as a stream of bytes: the
//! shard's manifest entry, one chunk per sample, built while the bytes go by,
//! so that a shard of any size is indexed in the memory of one read window
//! (plus its extension headers, at most [`MAX_EXTENSION_BYTES`] each).
//!
//! The archive dialects are those of [`crate::format::tar::TarReader`], and the
//! result is the one it gives on the whole buffer: a chunk runs from the
//! first header of a sample's first entry (extension headers included) to
//! the first header of the next sample; entries that belong to no sample
//! (directories, global headers, names without an extension) between two
//! samples join the earlier chunk; the last chunk ends with its last entry.

use std::collections::{BTreeSet, HashSet};

use super::tar::{self, TarError, BLOCK};
use crate::error::FormatError;
use crate::manifest::{ShardMeta, MAX_CHUNK_BYTES};
use crate::sample::{check_key, split_key};

/// The largest pax or GNU long-name extension payload accepted (1 MiB).
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;

/// Builds a shard's manifest entry from its bytes, fed in order in pieces of
/// any size.
#[derive(Debug)]
pub struct TarIndexer {
    name: String,
    /// Archive offset of the next byte fed.
    offset: u64,
    object_crc: u32,
    state: State,
    /// The header being read (fewer than 512 bytes until complete).
    header: Vec<u8>,
    /// The payload of the extension header being read, padding included.
    ext: Vec<u8>,
    /// Raw bytes of the extension headers in front of the coming entry: they
    /// belong to the entry's chunk, which is known only at its own header.
    pending: Vec<u8>,
    pending_start: Option<u64>,
    long_name: Option<String>,
    pax_size: Option<u64>,
    current: Option<Chunk>,
    chunk_offsets: Vec<u64>,
    chunk_crc32c: Vec<u32>,
    keys: HashSet<String>,
    fields: BTreeSet<String>,
}

#[derive(Debug)]
enum State {
    Header,
    /// Reading `total` bytes (payload plus padding) of an extension header.
    Extension {
        kind: u8,
        size: usize,
        total: usize,
        header_offset: u64,
    },
    /// Skipping `remaining` payload and padding bytes of an entry.
    Payload {
        remaining: u64,
        sample: bool,
    },
    /// After the end-of-archive marker.
    Done,
}

/// The sample being indexed.
#[derive(Debug)]
struct Chunk {
    key: String,
    start: u64,
    /// crc32c from `start` to the last byte fed.
    crc: u32,
    /// crc32c from `start` to the end of the sample's last entry, and that end.
    crc_at_end: u32,
    end: u64,
}

impl TarIndexer {
    /// An indexer for the shard object `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            offset: 0,
            object_crc: 0,
            state: State::Header,
            header: Vec::with_capacity(BLOCK),
            ext: Vec::new(),
            pending: Vec::new(),
            pending_start: None,
            long_name: None,
            pax_size: None,
            current: None,
            chunk_offsets: Vec::new(),
            chunk_crc32c: Vec::new(),
            keys: HashSet::new(),
            fields: BTreeSet::new(),
        }
    }

    /// Bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn tar_err(&self, error: TarError) -> FormatError {
        FormatError::Tar {
            shard: self.name.clone(),
            error,
        }
    }

    fn sample_err(&self, key: &str, reason: String) -> FormatError {
        FormatError::BadSample {
            shard: self.name.clone(),
            key: key.to_owned(),
            reason,
        }
    }

    /// Feeds the next bytes of the archive.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), FormatError> {
        self.object_crc = crc32c::crc32c_append(self.object_crc, data);
        while !data.is_empty() {
            let taken = match self.state {
                State::Done => data.len(),
                State::Header => {
                    let n = (BLOCK - self.header.len()).min(data.len());
                    self.header.extend_from_slice(&data[..n]);
                    self.offset += n as u64;
                    if self.header.len() == BLOCK {
                        self.on_header()?;
                    }
                    data = &data[n..];
                    continue;
                }
                State::Extension {
                    kind,
                    size,
                    total,
                    header_offset,
                } => {
                    let n = (total - self.ext.len()).min(data.len());
                    self.ext.extend_from_slice(&data[..n]);
                    self.offset += n as u64;
                    if self.ext.len() == total {
                        self.on_extension(kind, size, header_offset)?;
                    }
                    data = &data[n..];
                    continue;
                }
                State::Payload { remaining, sample } => {
                    let n = remaining.min(data.len() as u64) as usize;
                    if let Some(current) = &mut self.current {
                        current.crc = crc32c::crc32c_append(current.crc, &data[..n]);
                    }
                    self.offset += n as u64;
                    let remaining = remaining - n as u64;
                    self.state = State::Payload { remaining, sample };
                    if remaining == 0 {
                        self.end_payload(sample);
                    }
                    n
                }
            };
            if matches!(self.state, State::Done) {
                self.offset += taken as u64;
            }
            data = &data[taken..];
        }
        Ok(())
    }

    fn end_payload(&mut self, sample: bool) {
        if sample {
            if let Some(current) = &mut self.current {
                current.crc_at_end = current.crc;
                current.end = self.offset;
            }
        }
        self.state = State::Header;
    }

    fn on_header(&mut self) -> Result<(), FormatError> {
        let header = std::mem::take(&mut self.header);
        let header_offset = self.offset - BLOCK as u64;
        if header.iter().all(|&b| b == 0) {
            if let Some(start) = self.pending_start {
                return Err(self.tar_err(orphan_extension(start)));
            }
            self.state = State::Done;
            return Ok(());
        }
        tar::verify_checksum(&header, header_offset).map_err(|e| self.tar_err(e))?;
        let size = match self.pax_size.take() {
            Some(size) => size,
            None => {
                tar::parse_size(&header[124..136], header_offset).map_err(|e| self.tar_err(e))?
            }
        };
        let padded = size.checked_next_multiple_of(BLOCK as u64).ok_or_else(|| {
            self.tar_err(TarError::BadHeader {
                offset: header_offset,
                reason: format!("entry size {size} overflows when padded"),
            })
        })?;
        match header[156] {
            kind @ (b'x' | b'L') => {
                if size > MAX_EXTENSION_BYTES {
                    return Err(self.tar_err(TarError::BadHeader {
                        offset: header_offset,
                        reason: format!(
                            "extension header of {size} bytes, over the {MAX_EXTENSION_BYTES}-byte limit"
                        ),
                    }));
                }
                self.pending_start.get_or_insert(header_offset);
                self.pending.extend_from_slice(&header);
                self.ext.clear();
                self.state = State::Extension {
                    kind,
                    size: size as usize,
                    total: padded as usize,
                    header_offset,
                };
                return Ok(());
            }
            b'0' | 0 | b'7' => {
                let name = match self.long_name.take() {
                    Some(name) => name,
                    None => {
                        tar::header_name(&header, header_offset).map_err(|e| self.tar_err(e))?
                    }
                };
                let start = self.pending_start.take().unwrap_or(header_offset);
                let sample = self.begin_entry(&name, start, &header, padded)?;
                self.state = State::Payload {
                    remaining: padded,
                    sample,
                };
            }
            // Global pax headers, directories, links, devices: not samples.
            _ => {
                self.pending_start = None;
                self.long_name = None;
                self.junk(&header);
                self.state = State::Payload {
                    remaining: padded,
                    sample: false,
                };
            }
        }
        if padded == 0 {
            let sample = matches!(self.state, State::Payload { sample: true, .. });
            self.end_payload(sample);
        }
        Ok(())
    }

    /// Bytes that belong to no sample: they join the chunk being built.
    fn junk(&mut self, header: &[u8]) {
        let pending = std::mem::take(&mut self.pending);
        if let Some(current) = &mut self.current {
            current.crc = crc32c::crc32c_append(current.crc, &pending);
            current.crc = crc32c::crc32c_append(current.crc, header);
        }
    }

    /// A regular file entry whose headers start at `start`. Returns whether
    /// it is part of a sample.
    fn begin_entry(
        &mut self,
        name: &str,
        start: u64,
        header: &[u8],
        padded: u64,
    ) -> Result<bool, FormatError> {
        let Some((key, ext)) = split_key(name) else {
            self.junk(header);
            return Ok(false);
        };
        let pending = std::mem::take(&mut self.pending);
        let same = self.current.as_ref().is_some_and(|c| c.key == key);
        if !same {
            check_key(key).map_err(|reason| self.sample_err(key, reason.into()))?;
            if !self.keys.insert(key.to_owned()) {
                return Err(self.sample_err(
                    key,
                    format!(
                        "appears again at byte {start} (a sample's files must be adjacent in the archive)"
                    ),
                ));
            }
            if self.chunk_crc32c.len() >= u32::MAX as usize {
                return Err(self.sample_err(
                    key,
                    format!("is past the {} samples a shard may hold", u32::MAX),
                ));
            }
            if let Some(done) = self.current.take() {
                self.chunk_crc32c.push(done.crc);
            }
            self.chunk_offsets.push(start);
            self.current = Some(Chunk {
                key: key.to_owned(),
                start,
                crc: 0,
                crc_at_end: 0,
                end: start,
            });
        }
        let current = self
            .current
            .as_mut()
            .expect("a sample was just started or continued");
        current.crc = crc32c::crc32c_append(current.crc, &pending);
        current.crc = crc32c::crc32c_append(current.crc, header);
        let end = self.offset.saturating_add(padded);
        if end - current.start > MAX_CHUNK_BYTES {
            let reason = format!(
                "runs from byte {} to {end}, over the {MAX_CHUNK_BYTES}-byte chunk limit",
                current.start
            );
            return Err(self.sample_err(key, reason));
        }
        self.fields.insert(ext.to_owned());
        Ok(true)
    }

    fn on_extension(
        &mut self,
        kind: u8,
        size: usize,
        header_offset: u64,
    ) -> Result<(), FormatError> {
        let ext = std::mem::take(&mut self.ext);
        let data = &ext[..size];
        let data_offset = header_offset + BLOCK as u64;
        if kind == b'x' {
            let records = tar::parse_pax(data, data_offset).map_err(|e| self.tar_err(e))?;
            for (key, value) in records {
                match key {
                    "path" => self.long_name = Some(value.to_owned()),
                    "size" => {
                        let size = value.parse().map_err(|_| {
                            self.tar_err(TarError::BadHeader {
                                offset: header_offset,
                                reason: format!("pax size `{value}` is not a number"),
                            })
                        })?;
                        self.pax_size = Some(size);
                    }
                    _ => {}
                }
            }
        } else {
            let name = tar::utf8(tar::cstr(data), header_offset).map_err(|e| self.tar_err(e))?;
            self.long_name = Some(name.to_owned());
        }
        self.pending.extend_from_slice(&ext);
        self.ext = ext;
        self.ext.clear();
        self.state = State::Header;
        Ok(())
    }

    /// Ends the archive: the shard's manifest entry and the field extensions
    /// seen.
    pub fn finish(mut self) -> Result<(ShardMeta, BTreeSet<String>), FormatError> {
        let truncated = |what: &'static str, need: usize, have: usize| TarError::Truncated {
            offset: self.offset - have as u64,
            what,
            need,
            have,
        };
        let error = match self.state {
            State::Done => None,
            State::Header if self.header.is_empty() => self.pending_start.map(orphan_extension),
            State::Header => Some(truncated("tar header", BLOCK, self.header.len())),
            State::Extension { total, .. } => {
                Some(truncated("extension header payload", total, self.ext.len()))
            }
            State::Payload { remaining, .. } => Some(TarError::Truncated {
                offset: self.offset,
                what: "entry payload",
                need: remaining.min(usize::MAX as u64) as usize,
                have: 0,
            }),
        };
        if let Some(error) = error {
            return Err(self.tar_err(error));
        }
        let Some(last) = self.current.take() else {
            return Err(FormatError::Shard {
                shard: self.name,
                reason: "holds no samples (no entries named KEY.EXT)".into(),
            });
        };
        self.chunk_crc32c.push(last.crc_at_end);
        self.chunk_offsets.push(last.end);
        let meta = ShardMeta {
            name: self.name,
            samples: self.chunk_crc32c.len() as u32,
            bytes: self.offset,
            crc32c: self.object_crc,
            chunk_offsets: self.chunk_offsets,
            chunk_samples: Vec::new(),
            chunk_crc32c: self.chunk_crc32c,
            chunk_uncompressed_bytes: Vec::new(),
        };
        Ok((meta, self.fields))
    }
}

fn orphan_extension(start: u64) -> TarError {
    TarError::Truncated {
        offset: start,
        what: "extension header without its entry",
        need: BLOCK,
        have: 0,
    }
}

/// Indexes a whole foreign tar archive held in memory: one chunk per sample.
/// Returns the entry and the field extensions seen.
pub fn index_tar(name: &str, data: &[u8]) -> Result<(ShardMeta, BTreeSet<String>), FormatError> {
    let mut indexer = TarIndexer::new(name);
    indexer.feed(data)?;
    indexer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::shard::ShardWriter;
    use crate::manifest::Compression;
    use proptest::prelude::*;

    fn shard(sizes: &[usize]) -> (Vec<u8>, ShardMeta) {
        let mut writer = ShardWriter::new("s.tar", Compression::NONE);
        for (i, &size) in sizes.iter().enumerate() {
            let data = vec![i as u8; size];
            writer
                .push(&format!("k/{i}"), &[("cls", b"1"), ("jpg", &data)])
                .expect("push");
        }
        let shard = writer.finish().expect("finish");
        (shard.data, shard.meta)
    }

    /// A pax header naming the next entry, as Python's tarfile writes it.
    fn pax(out: &mut Vec<u8>, path: &str) {
        let body = format!(" path={path}\n");
        let mut len = body.len() + 1;
        while format!("{len}{body}").len() != len {
            len += 1;
        }
        let at = out.len();
        tar::append_entry(out, "PaxHeader", format!("{len}{body}").as_bytes()).expect("pax");
        let header = &mut out[at..at + BLOCK];
        header[156] = b'x';
        header[148..156].fill(b' ');
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    }

    fn feed_in_pieces(
        data: &[u8],
        cuts: &[usize],
    ) -> Result<(ShardMeta, BTreeSet<String>), FormatError> {
        let mut cuts: Vec<usize> = cuts.iter().map(|&c| c % (data.len() + 1)).collect();
        cuts.sort_unstable();
        let mut indexer = TarIndexer::new("s.tar");
        let mut at = 0;
        for cut in cuts.into_iter().chain([data.len()]) {
            indexer.feed(&data[at..cut])?;
            at = cut;
        }
        indexer.finish()
    }

    proptest! {
        #[test]
        fn any_split_of_the_stream_gives_the_writer_s_entry(
            sizes in prop::collection::vec(0usize..3000, 1..12),
            cuts in prop::collection::vec(any::<usize>(), 0..20),
        ) {
            let (data, meta) = shard(&sizes);
            let (indexed, fields) = feed_in_pieces(&data, &cuts).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(indexed, meta);
            prop_assert_eq!(fields.into_iter().collect::<Vec<_>>(), vec!["cls".to_owned(), "jpg".to_owned()]);
        }

        #[test]
        fn a_cut_archive_is_an_error_wherever_it_is_cut(
            sizes in prop::collection::vec(1usize..3000, 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let (data, _) = shard(&sizes);
            // Cut inside an entry (not on a 512-byte boundary).
            let at = cut.index(data.len() - 1024);
            prop_assume!(at % BLOCK != 0);
            prop_assert!(index_tar("s.tar", &data[..at]).is_err());
        }
    }

    #[test]
    fn extension_headers_and_junk_join_the_right_chunks() {
        let mut data = Vec::new();
        pax(&mut data, "a/very/long/name/1.jpg");
        tar::append_entry(&mut data, "ignored", b"one").expect("entry");
        tar::append_entry(&mut data, "a/very/long/name/1.cls", b"3").expect("entry");
        tar::append_entry(&mut data, "README", b"not a sample").expect("entry");
        let second = data.len() as u64;
        pax(&mut data, "b/2.jpg");
        tar::append_entry(&mut data, "x", b"two").expect("entry");
        let end = data.len() as u64;
        tar::append_entry(&mut data, "TRAILER", b"junk after the last sample").expect("entry");
        tar::append_end(&mut data);
        let (meta, _) = index_tar("s.tar", &data).expect("index");
        assert_eq!(meta.chunk_offsets, vec![0, second, end]);
        assert_eq!(
            meta.chunk_crc32c[0],
            crc32c::crc32c(&data[..second as usize])
        );
        assert_eq!(
            meta.chunk_crc32c[1],
            crc32c::crc32c(&data[second as usize..end as usize])
        );
        for step in [1, 7, 512, 513] {
            let cuts: Vec<usize> = (step..data.len()).step_by(step).collect();
            assert_eq!(feed_in_pieces(&data, &cuts).expect("pieces").0, meta);
        }
        // The same archive read whole by the reader the fetch path uses.
        let range = crate::format::shard::chunk_range(&meta, 0..2);
        let mut out = Vec::new();
        crate::format::shard::decode_chunks(
            &meta,
            crate::manifest::CompressionKind::None,
            &range,
            &bytes::Bytes::copy_from_slice(
                &data[range.bytes.start as usize..range.bytes.end as usize],
            ),
            0,
            0..2,
            &mut out,
        )
        .expect("decode");
        assert_eq!(out[0].key, "a/very/long/name/1");
        assert_eq!(out[1].key, "b/2");
    }

    #[test]
    fn an_extension_header_past_the_limit_is_refused_before_it_is_buffered() {
        let mut data = Vec::new();
        tar::append_entry(&mut data, "PaxHeader", b"").expect("pax");
        data[156] = b'x';
        // Claim a 2 GiB payload in the size field.
        data[124..136].copy_from_slice(b"20000000000\0");
        data[148..156].fill(b' ');
        let sum: u32 = data[..BLOCK].iter().map(|&b| u32::from(b)).sum();
        data[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        let err = index_tar("s.tar", &data).expect_err("too big");
        assert!(err.to_string().contains("extension header"), "{err}");
    }
}
