//! A token dataset: where its token shards live, its manifest, and each
//! shard's document index (a Megatron `.idx`), loaded when first asked
//! for. [`open_any`] opens whichever kind of dataset a URL holds.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OnceCell;
use tributary_common::manifest::{Manifest, MANIFEST_NAME};
use tributary_common::tokens::manifest::{
    is_token_manifest, TokenIndexRef, TokenManifest, TokenShard,
};
use tributary_common::tokens::{layout, megatron, DocIndex, SequenceSpec, TokenDtype};

use crate::dataset::{dataset_url, read_manifest, Dataset, MAX_MANIFEST_BYTES};
use crate::digest::sha256_hex;
use crate::error::{IoError, Result};
use crate::location::{Location, StoreOptions};

/// An opened token dataset. Clones share the loaded indexes.
#[derive(Debug, Clone)]
pub struct TokenDataset {
    pub location: Location,
    pub manifest: Arc<TokenManifest>,
    indexes: Arc<[OnceCell<Arc<DocIndex>>]>,
}

/// A dataset of either kind, as its manifest says.
#[derive(Debug, Clone)]
pub enum AnyDataset {
    /// Samples in tar shards (images, text, arrays...).
    Samples(Dataset),
    /// Documents of token ids.
    Tokens(TokenDataset),
}

impl AnyDataset {
    /// SHA-256 (hex) of the manifest's canonical JSON: what a job records
    /// of it, and a rank checks its own copy by
    /// ([`dataset_sha256`](crate::digest::dataset_sha256)).
    pub fn manifest_sha256(&self) -> String {
        let json = match self {
            Self::Samples(d) => d.manifest.to_json(),
            Self::Tokens(d) => d.manifest.to_json(),
        };
        sha256_hex(&json)
    }

    /// The dataset's URL, for messages.
    pub fn url(&self) -> String {
        match self {
            Self::Samples(d) => d.location.url_of(""),
            Self::Tokens(d) => d.location.url_of(""),
        }
    }
}

/// Opens the dataset at `url` (its directory, or its `manifest.json`),
/// whichever kind its manifest says it is.
pub async fn open_any(url: &str, options: &StoreOptions) -> Result<AnyDataset> {
    open_any_within(url, options, MAX_MANIFEST_BYTES).await
}

/// [`open_any`] with a manifest of at most `limit` bytes (a larger one is
/// refused before its body is read), parsed off the async runtime.
pub async fn open_any_within(url: &str, options: &StoreOptions, limit: u64) -> Result<AnyDataset> {
    let location = Location::open(dataset_url(url), options, false)?;
    let bytes = read_manifest(&location, limit).await?;
    tokio::task::spawn_blocking(move || parse_any(location, &bytes))
        .await
        .map_err(|e| IoError::Local {
            path: url.to_owned(),
            error: std::io::Error::other(format!("parsing the manifest failed: {e}")),
        })?
}

fn parse_any(location: Location, bytes: &[u8]) -> Result<AnyDataset> {
    let manifest_url = location.url_of(MANIFEST_NAME);
    if is_token_manifest(bytes) {
        let manifest = TokenManifest::from_json(bytes).map_err(|e| IoError::Tokens {
            url: manifest_url,
            reason: e.to_string(),
        })?;
        Ok(AnyDataset::Tokens(TokenDataset::new(
            location,
            Arc::new(manifest),
        )))
    } else {
        let manifest = Manifest::from_json(bytes).map_err(|error| IoError::Manifest {
            url: manifest_url,
            error,
        })?;
        Ok(AnyDataset::Samples(Dataset::new(
            location,
            Arc::new(manifest),
        )))
    }
}

impl TokenDataset {
    /// Opens the token dataset at `url`; an image dataset there is an
    /// error that says so.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        match open_any(url, options).await? {
            AnyDataset::Tokens(d) => Ok(d),
            AnyDataset::Samples(d) => Err(IoError::Tokens {
                url: d.location.url_of(MANIFEST_NAME),
                reason: "is a sample dataset, not a token dataset (pack text with \
                         `tributary pack CORPUS OUT --tokenizer T`)"
                    .into(),
            }),
        }
    }

    /// The token dataset of an already parsed `manifest` at `location`.
    pub fn new(location: Location, manifest: Arc<TokenManifest>) -> Self {
        let indexes = manifest.shards.iter().map(|_| OnceCell::new()).collect();
        Self {
            location,
            manifest,
            indexes,
        }
    }

    /// Shard `shard`'s document index: its `.idx` object read (within the
    /// size the manifest records), checked against the manifest's crc32c
    /// and totals, and decoded the first time any clone asks.
    ///
    /// # Panics
    ///
    /// If `shard` is not a shard of the manifest.
    pub async fn doc_index(&self, shard: usize) -> Result<Arc<DocIndex>> {
        let entry = &self.manifest.shards[shard];
        let index = self.indexes[shard]
            .get_or_try_init(|| async {
                let name = &entry.index.name;
                let url = self.location.url_of(name);
                let data = self.location.get_at_most(name, entry.index.bytes).await?;
                let bad = |reason: String| IoError::Tokens {
                    url: url.clone(),
                    reason,
                };
                if data.len() as u64 != entry.index.bytes {
                    return Err(bad(format!(
                        "is {} bytes, the manifest says {} (the dataset changed since it was \
                         indexed: index it again)",
                        data.len(),
                        entry.index.bytes
                    )));
                }
                let crc = crc32c::crc32c(&data);
                if crc != entry.index.crc32c {
                    return Err(bad(format!(
                        "crc32c {crc:08x}, the manifest says {:08x} (the index changed since \
                         the manifest was written: index the dataset again)",
                        entry.index.crc32c
                    )));
                }
                let expected = megatron::Expected {
                    dtype: self.manifest.dtype,
                    data_offset: entry.offset,
                    tokens: entry.tokens,
                    documents: entry.documents,
                };
                let file = entry.index.name.clone();
                let decode = move || megatron::decode_idx(&file, &data, &expected);
                let decoded = tokio::task::spawn_blocking(decode)
                    .await
                    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                decoded.map(Arc::new).map_err(|e| bad(e.to_string()))
            })
            .await?;
        Ok(Arc::clone(index))
    }

    /// The index of shard `shard` if already loaded.
    pub fn loaded_doc_index(&self, shard: usize) -> Option<Arc<DocIndex>> {
        self.indexes.get(shard)?.get().cloned()
    }

    /// Tokens `tokens` of shard `shard`'s stream, as bytes (little-endian
    /// ids of the manifest's dtype), read from the store with retries.
    ///
    /// # Panics
    ///
    /// If `shard` is not a shard of the manifest.
    pub async fn read_tokens(&self, shard: usize, tokens: Range<u64>) -> Result<Bytes> {
        let entry = &self.manifest.shards[shard];
        let width = self.manifest.dtype.width();
        let bytes = entry.offset + tokens.start * width..entry.offset + tokens.end * width;
        self.location.get_range(&entry.name, bytes).await
    }
}

/// How many document indexes a dataset reads at once to count its rows.
const INDEX_READS_IN_FLIGHT: usize = 16;

impl TokenDataset {
    /// Rows per shard for `sequence` (the plan's samples of a token job):
    /// from the manifest's totals, or for `bestfit` from every shard's
    /// document index, read a few at a time. A shard of more rows than a
    /// plan can count (2^32 - 1) is an error naming it.
    pub async fn shard_rows(&self, sequence: SequenceSpec) -> Result<Vec<u32>> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        let counts: Vec<u64> = stream::iter(0..self.manifest.shards.len())
            .map(|shard| async move {
                let entry = &self.manifest.shards[shard];
                match layout::rows_from_totals(sequence, entry.tokens, entry.documents) {
                    Some(rows) => Ok(rows),
                    None => {
                        // First-fit decreasing over the shard's documents:
                        // milliseconds of CPU, off the async runtime.
                        let index = self.doc_index(shard).await?;
                        Ok(tokio::task::spawn_blocking(move || {
                            layout::shard_rows(sequence, &index)
                        })
                        .await
                        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())))
                    }
                }
            })
            .buffered(INDEX_READS_IN_FLIGHT)
            .try_collect()
            .await?;
        counts
            .into_iter()
            .enumerate()
            .map(|(shard, rows)| {
                u32::try_from(rows).map_err(|_| IoError::Tokens {
                    url: self.location.url_of(&self.manifest.shards[shard].name),
                    reason: format!(
                        "holds {rows} rows of {} tokens, more than a plan counts in one shard \
                         (2^32 - 1): use a longer sequence_length or split the file",
                        sequence.length
                    ),
                })
            })
            .collect()
    }
}

/// Writes a token dataset at `location`: shard `i` holds the documents
/// `shards[i]` (token ids, each ending with its end-of-document id), as
/// `shard-NNNNNN.bin` and its Megatron `.idx`, then `manifest.json` (last,
/// so a reader never sees a manifest before its shards). Small datasets:
/// tests and examples; `tributary pack --tokenizer` streams large ones.
pub async fn write_token_dataset(
    location: &Location,
    shards: &[Vec<Vec<u32>>],
    dtype: TokenDtype,
    eos_id: Option<u32>,
    vocab_size: Option<u64>,
) -> Result<TokenManifest> {
    let mut entries = Vec::with_capacity(shards.len());
    for (i, docs) in shards.iter().enumerate() {
        let name = format!("shard-{i:06}.bin");
        let mut data = Vec::new();
        for &token in docs.iter().flatten() {
            match dtype {
                TokenDtype::U16 => data.extend_from_slice(&(token as u16).to_le_bytes()),
                TokenDtype::U32 => data.extend_from_slice(&token.to_le_bytes()),
            }
        }
        let index = DocIndex::from_lengths(docs.iter().map(|d| d.len() as u64));
        let idx = megatron::encode_idx(dtype, &index, 0);
        let index_name = format!("shard-{i:06}.idx");
        entries.push(TokenShard {
            name: name.clone(),
            bytes: data.len() as u64,
            offset: 0,
            tokens: index.tokens(),
            documents: index.documents(),
            index: TokenIndexRef {
                name: index_name.clone(),
                bytes: idx.len() as u64,
                crc32c: crc32c::crc32c(&idx),
            },
        });
        location.put(&name, Bytes::from(data)).await?;
        location.put(&index_name, Bytes::from(idx)).await?;
    }
    let manifest = TokenManifest::new(dtype, eos_id, vocab_size, None, entries).map_err(|e| {
        IoError::Tokens {
            url: location.url_of(MANIFEST_NAME),
            reason: e.to_string(),
        }
    })?;
    location
        .put(MANIFEST_NAME, Bytes::from(manifest.to_json()))
        .await?;
    Ok(manifest)
}
