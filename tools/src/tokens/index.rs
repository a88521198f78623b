//! `tributary index --tokens`: token files already in a store, read in
//! place, described by a token manifest written beside them.
//!
//! The objects under the location, in name order:
//! - a Megatron pair `X.bin` + `X.idx` (the `.idx` starting with the
//!   `MMIDIDX` magic): the `.idx` is read and checked against the `.bin`'s
//!   size, and the manifest names both; nothing is copied or rewritten;
//! - `X.npy` (1-D, `<u2`/`<i2`/`<u4`/`<i4`): its tokens from the end of its
//!   header on;
//! - any other `X.bin`: raw little-endian tokens of `--dtype`.
//!
//! A `.npy` or raw file has no document index: it is scanned once, as a
//! stream of range reads of [`SCAN_READ_BYTES`] (bounded memory whatever
//! its size), documents ending at each `--eos-id` (which stays at the end of
//! its document; tokens after the last one form a last document), and a
//! Megatron index of it is written beside it as `X.npy.idx` / `X.bin.idx`,
//! so that one reader serves every kind. Other objects (`.idx` files,
//! `manifest.json`) are not token data. A manifest already there is
//! replaced only with `force`.

use std::sync::Arc;

use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::manifest::MANIFEST_NAME;
use tributary_common::tokens::manifest::{TokenIndexRef, TokenManifest, TokenShard};
use tributary_common::tokens::megatron::{encode_idx, is_idx, read_idx, IdxError, MAGIC};
use tributary_common::tokens::{DocIndex, TokenDtype};
use tributary_io::Location;

use super::npy::{parse_npy_header, NpyHeader};
use crate::error::{Result, ToolsError};
use crate::progress::Progress;

/// The size of each range read of a file being scanned (8 MiB, a whole
/// number of tokens of either width); four files are read at once.
pub const SCAN_READ_BYTES: u64 = 8 << 20;
/// The largest Megatron `.idx` read (4 GiB: 200 M documents).
pub const MAX_IDX_BYTES: u64 = 4 << 30;

/// How `index --tokens` reads files without an index.
#[derive(Debug, Clone, Default)]
pub struct IndexTokensOptions {
    /// The dtype of raw `.bin` files (required when there are some).
    pub dtype: Option<TokenDtype>,
    /// The id that ends each document of `.npy` and raw files (required
    /// when there are some).
    pub eos_id: Option<u32>,
    /// Replace a manifest already there.
    pub force: bool,
}

/// What an index run found.
#[derive(Debug, Clone)]
pub struct IndexTokensSummary {
    pub shards: usize,
    pub documents: u64,
    pub tokens: u64,
    pub bytes: u64,
    pub dtype: TokenDtype,
    /// Megatron pairs read in place.
    pub megatron: usize,
    /// `.npy` and raw files scanned (an index written for each).
    pub scanned: usize,
    /// Scanned files whose last document has no end-of-document id.
    pub unterminated: usize,
}

/// What one object is.
#[derive(Debug, Clone)]
enum Kind {
    Megatron { idx: String },
    Npy,
    Raw,
}

/// Indexes the token files under `location`; writes `manifest.json`.
pub async fn index_tokens(
    location: &Location,
    options: &IndexTokensOptions,
    progress: Arc<dyn Progress>,
) -> Result<IndexTokensSummary> {
    let objects = location.list().await?;
    if !options.force && objects.iter().any(|(name, _)| name == MANIFEST_NAME) {
        return Err(ToolsError::Config(format!(
            "{} already exists (pass --force to replace it)",
            location.url_of(MANIFEST_NAME)
        )));
    }
    let sizes: std::collections::HashMap<&str, u64> =
        objects.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    let mut files = Vec::new();
    for (name, size) in &objects {
        let kind = if let Some(stem) = name.strip_suffix(".bin") {
            let idx = format!("{stem}.idx");
            if sizes.contains_key(idx.as_str()) && starts_with_magic(location, &idx).await? {
                Kind::Megatron { idx }
            } else {
                Kind::Raw
            }
        } else if name.ends_with(".npy") {
            Kind::Npy
        } else {
            continue;
        };
        files.push((name.clone(), *size, kind));
    }
    if files.is_empty() {
        return Err(ToolsError::Config(format!(
            "{}: no token files (Megatron .bin/.idx pairs, .npy or raw .bin files) to index",
            location.url
        )));
    }
    let needs_eos: Vec<&str> = files
        .iter()
        .filter(|(_, _, k)| !matches!(k, Kind::Megatron { .. }))
        .map(|(n, _, _)| n.as_str())
        .collect();
    if !needs_eos.is_empty() && options.eos_id.is_none() {
        return Err(ToolsError::Config(format!(
            "{} ({}) have no document index: pass --eos-id N, the id that ends each document",
            location.url_of(needs_eos[0]),
            needs_eos.len()
        )));
    }
    if let Some((name, _, _)) = files.iter().find(|(_, _, k)| matches!(k, Kind::Raw)) {
        if options.dtype.is_none() {
            return Err(ToolsError::Config(format!(
                "{} is a raw token file (no MMIDIDX {}.idx beside it): pass --dtype u16 or u32",
                location.url_of(name),
                name.trim_end_matches(".bin")
            )));
        }
    }
    progress.total(0, files.iter().map(|(_, size, _)| size).sum());
    let shards: Vec<Indexed> = stream::iter(files)
        .map(|(name, size, kind)| {
            let progress = Arc::clone(&progress);
            async move { index_file(location, name, size, kind, options, progress.as_ref()).await }
        })
        .buffered(4)
        .try_collect()
        .await?;
    let dtype = shards[0].dtype;
    if let Some(Indexed {
        shard,
        dtype: other,
        ..
    }) = shards.iter().find(|s| s.dtype != dtype)
    {
        return Err(ToolsError::Config(format!(
            "{} holds {other} tokens but {} holds {dtype}: a dataset has one dtype; index them apart or convert one",
            location.url_of(&shard.name),
            location.url_of(&shards[0].shard.name)
        )));
    }
    let scanned = shards.iter().filter(|s| s.scanned).count();
    let megatron = shards.len() - scanned;
    let unterminated = shards.iter().filter(|s| s.unterminated).count();
    let manifest = TokenManifest::new(
        dtype,
        options.eos_id,
        None,
        None,
        shards.into_iter().map(|s| s.shard).collect(),
    )
    .map_err(|error| {
        ToolsError::Config(format!(
            "{}: cannot describe these files: {error}",
            location.url
        ))
    })?;
    location
        .put(MANIFEST_NAME, manifest.to_json().into())
        .await?;
    Ok(IndexTokensSummary {
        shards: manifest.shards.len(),
        documents: manifest.documents,
        tokens: manifest.tokens,
        bytes: manifest.bytes,
        dtype,
        megatron,
        scanned,
        unterminated,
    })
}

async fn starts_with_magic(location: &Location, name: &str) -> Result<bool> {
    let head = location.get_range(name, 0..MAGIC.len() as u64).await;
    match head {
        Ok(head) => Ok(is_idx(&head)),
        // Shorter than the magic: not a Megatron index.
        Err(_) => Ok(false),
    }
}

/// One file indexed.
struct Indexed {
    shard: TokenShard,
    dtype: TokenDtype,
    /// A `.npy` or raw file, scanned (an index written for it).
    scanned: bool,
    /// Scanned, and its last document has no end-of-document id.
    unterminated: bool,
}

/// Indexes one file.
async fn index_file(
    location: &Location,
    name: String,
    size: u64,
    kind: Kind,
    options: &IndexTokensOptions,
    progress: &dyn Progress,
) -> Result<Indexed> {
    let url = location.url_of(&name);
    let (dtype, offset, signed) = match &kind {
        Kind::Megatron { idx } => {
            let bytes = location.get_at_most(idx, MAX_IDX_BYTES).await?;
            let idx_url = location.url_of(idx);
            let crc = crc32c::crc32c(&bytes);
            let idx_bytes = bytes.len() as u64;
            let read =
                tokio::task::spawn_blocking(move || read_idx(&idx_url, &bytes, 0, Some(size)))
                    .await
                    .map_err(|e| ToolsError::Stopped(format!("index reader panicked: {e}")))??;
            if options.dtype.is_some_and(|d| d != read.dtype) {
                return Err(ToolsError::Config(format!(
                    "{}: the index says {} tokens, --dtype says {}",
                    location.url_of(idx),
                    read.dtype,
                    options.dtype.map_or("", TokenDtype::as_str)
                )));
            }
            progress.advance(read.index.documents(), size);
            progress.tokens(read.index.tokens());
            let shard = entry(
                &name,
                size,
                0,
                &read.index,
                idx.clone(),
                idx_bytes,
                crc,
                &url,
            )?;
            return Ok(Indexed {
                shard,
                dtype: read.dtype,
                scanned: false,
                unterminated: false,
            });
        }
        Kind::Npy => {
            let header = npy_header(location, &name, size).await?;
            if options.dtype.is_some_and(|d| d != header.dtype) {
                return Err(ToolsError::Config(format!(
                    "{url}: its header says {} tokens, --dtype says {}",
                    header.dtype,
                    options.dtype.map_or("", TokenDtype::as_str)
                )));
            }
            (header.dtype, header.offset, header.signed)
        }
        Kind::Raw => {
            let dtype = options.dtype.expect("checked before");
            if !size.is_multiple_of(dtype.width()) {
                return Err(IdxError {
                    file: url,
                    offset: size - size % dtype.width(),
                    reason: format!("{size} bytes is not a whole number of {dtype} tokens"),
                }
                .into());
            }
            (dtype, 0, false)
        }
    };
    let eos = options.eos_id.expect("checked before");
    let mut scan = Scan::new(url.clone(), dtype, signed, eos, offset);
    let mut at = offset;
    while at < size {
        let range = at..size.min(at + SCAN_READ_BYTES);
        let data = location.get_range(&name, range.clone()).await?;
        if data.len() as u64 != range.end - range.start {
            return Err(ToolsError::Config(format!(
                "{url}: a read of bytes {}..{} returned {} bytes; the object changed while it was indexed",
                range.start,
                range.end,
                data.len()
            )));
        }
        let (before_docs, before) = (scan.lengths.len() as u64, scan.tokens);
        scan = tokio::task::spawn_blocking(move || scan.feed(&data).map(|()| scan))
            .await
            .map_err(|e| ToolsError::Stopped(format!("scanner panicked: {e}")))??;
        progress.advance(
            scan.lengths.len() as u64 - before_docs,
            range.end - range.start,
        );
        progress.tokens(scan.tokens - before);
        at = range.end;
    }
    let unterminated = scan.finish();
    if unterminated {
        tracing::warn!(%url, "the last document has no end-of-document id {eos}; it is indexed as a document all the same");
    }
    let index = DocIndex::from_lengths(scan.lengths);
    if index.documents() == 0 {
        return Err(ToolsError::Config(format!(
            "{url} holds no tokens; remove it or move it elsewhere"
        )));
    }
    let idx = encode_idx(dtype, &index, offset);
    let idx_name = format!("{name}.idx");
    let crc = crc32c::crc32c(&idx);
    let idx_bytes = idx.len() as u64;
    location.put(&idx_name, idx.into()).await?;
    let shard = entry(&name, size, offset, &index, idx_name, idx_bytes, crc, &url)?;
    Ok(Indexed {
        shard,
        dtype,
        scanned: true,
        unterminated,
    })
}

#[allow(clippy::too_many_arguments, reason = "one entry's fields")]
fn entry(
    name: &str,
    size: u64,
    offset: u64,
    index: &DocIndex,
    idx_name: String,
    idx_bytes: u64,
    crc32c: u32,
    url: &str,
) -> Result<TokenShard> {
    if index.documents() > index.tokens() {
        return Err(ToolsError::Config(format!(
            "{url}: {} documents in {} tokens: empty documents cannot be indexed",
            index.documents(),
            index.tokens()
        )));
    }
    Ok(TokenShard {
        name: name.to_owned(),
        bytes: size,
        offset,
        tokens: index.tokens(),
        documents: index.documents(),
        index: TokenIndexRef {
            name: idx_name,
            bytes: idx_bytes,
            crc32c,
        },
    })
}

async fn npy_header(location: &Location, name: &str, size: u64) -> Result<NpyHeader> {
    let url = location.url_of(name);
    let mut want = super::npy::NPY_PREAMBLE_BYTES.min(size);
    for _ in 0..3 {
        let prefix = location.get_range(name, 0..want).await?;
        match parse_npy_header(&url, &prefix, size)? {
            Ok(header) => return Ok(header),
            Err(more) if more > want => want = more,
            Err(_) => break,
        }
    }
    Err(IdxError {
        file: url,
        offset: 0,
        reason: "the .npy header could not be read whole".into(),
    }
    .into())
}

/// The document lengths of a token stream split at `eos`.
struct Scan {
    url: String,
    dtype: TokenDtype,
    signed: bool,
    eos: u32,
    /// Byte offset of the next token in the file.
    at: u64,
    tokens: u64,
    /// Tokens of the document being read.
    current: u64,
    lengths: Vec<u64>,
}

impl Scan {
    fn new(url: String, dtype: TokenDtype, signed: bool, eos: u32, offset: u64) -> Self {
        Self {
            url,
            dtype,
            signed,
            eos,
            at: offset,
            tokens: 0,
            current: 0,
            lengths: Vec::new(),
        }
    }

    /// Reads `data`, a whole number of tokens.
    fn feed(&mut self, data: &[u8]) -> Result<(), IdxError> {
        let width = self.dtype.width() as usize;
        let sign = match self.dtype {
            TokenDtype::U16 => 1u32 << 15,
            TokenDtype::U32 => 1u32 << 31,
        };
        for (i, token) in data.chunks_exact(width).enumerate() {
            let id = match self.dtype {
                TokenDtype::U16 => u32::from(u16::from_le_bytes([token[0], token[1]])),
                TokenDtype::U32 => u32::from_le_bytes([token[0], token[1], token[2], token[3]]),
            };
            if self.signed && id & sign != 0 {
                return Err(IdxError {
                    file: self.url.clone(),
                    offset: self.at + (i * width) as u64,
                    reason: "a negative token id".into(),
                });
            }
            self.current += 1;
            if id == self.eos {
                self.lengths.push(self.current);
                self.current = 0;
            }
        }
        self.tokens += (data.len() / width) as u64;
        self.at += data.len() as u64;
        Ok(())
    }

    /// Ends the stream; whether a last document had no end-of-document id.
    fn finish(&mut self) -> bool {
        if self.current == 0 {
            return false;
        }
        self.lengths.push(self.current);
        self.current = 0;
        true
    }
}
