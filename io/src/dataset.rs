//! A dataset: where its shards live, what its manifest says, and each
//! shard's chunk columns, loaded when first asked for.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::OnceCell;
use tributary_common::manifest::index as chunk_index;
use tributary_common::manifest::{Chunks, Manifest, ShardMeta, MANIFEST_NAME};

use crate::cache::{ShardCache, ShardObject};
use crate::error::{IoError, Result};
use crate::location::{Location, StoreOptions};
use crate::parquet::Footer;

/// The largest manifest read: ImageNet's is a few MB. A store that claims
/// more is refused before a byte of the body is read.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// Indexes larger than this are decoded off the async runtime (64 KiB:
/// about 8,000 chunks, some tens of microseconds of work).
const INLINE_DECODE_BYTES: usize = 64 << 10;

/// The dataset a URL names: the URL itself, or, for a manifest's own URL
/// (`s3://bucket/ds/manifest.json`, `ds/manifest.json`), its directory.
pub fn dataset_url(url: &str) -> &str {
    let trimmed = url.trim_end_matches('/');
    match trimmed.strip_suffix(MANIFEST_NAME) {
        Some("") => ".",
        Some(directory) if directory.ends_with('/') => {
            let directory = directory.trim_end_matches('/');
            // `file:///manifest.json`, `/manifest.json`: the root.
            if directory.is_empty() || directory.ends_with(':') {
                &trimmed[..trimmed.len() - MANIFEST_NAME.len()]
            } else {
                directory
            }
        }
        _ => url,
    }
}

/// The manifest's bytes at `location` (either kind of dataset), a
/// missing one explained.
pub(crate) async fn read_manifest(location: &Location, limit: u64) -> Result<Bytes> {
    location
        .get_at_most(MANIFEST_NAME, limit)
        .await
        .map_err(|e| match e {
            IoError::NotFound { url, .. } => IoError::NotFound {
                url,
                hint: " (no manifest: pass the dataset's directory, which holds manifest.json; \
                       pack a dataset with `tributary pack`, or index WebDataset shards or token \
                       files with `tributary index`)",
            },
            other => other,
        })
}

/// An opened dataset. Clones share the loaded indexes.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub location: Location,
    pub manifest: Arc<Manifest>,
    /// One cell per shard, filled with its decoded index the first time a
    /// version 2 manifest's shard is asked for; unused for version 1.
    indexes: Arc<[OnceCell<Arc<ShardMeta>>]>,
    /// One cell per shard of a Parquet dataset, filled with its footer the
    /// first time it is asked for ([`Dataset::footer`]).
    footers: Arc<[OnceCell<Arc<Footer>>]>,
    /// Where shard bytes are kept on local disk, if anywhere
    /// ([`Dataset::with_cache`]).
    pub cache: Option<Arc<ShardCache>>,
}

impl Dataset {
    /// Opens the dataset at `url` by reading its manifest. The manifest's
    /// own URL (`.../manifest.json`) names its directory's dataset.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        Self::from_location(Location::open(dataset_url(url), options, false)?).await
    }

    /// Opens the dataset whose shards and manifest are at `location`. Reads
    /// the manifest only: shard indexes are read by [`Dataset::shard_meta`].
    pub async fn from_location(location: Location) -> Result<Self> {
        let manifest_url = location.url_of(MANIFEST_NAME);
        let bytes = read_manifest(&location, MAX_MANIFEST_BYTES).await?;
        let manifest = Manifest::from_json(&bytes).map_err(|error| IoError::Manifest {
            url: manifest_url,
            error,
        })?;
        Ok(Self::new(location, Arc::new(manifest)))
    }

    /// The dataset of an already parsed `manifest` at `location`.
    pub fn new(location: Location, manifest: Arc<Manifest>) -> Self {
        let indexes = manifest.shards.iter().map(|_| OnceCell::new()).collect();
        let footers = manifest.shards.iter().map(|_| OnceCell::new()).collect();
        Self {
            location,
            manifest,
            indexes,
            footers,
            cache: None,
        }
    }

    /// Shard `shard`'s full entry, every chunk's offset and checksum: the
    /// manifest's own for version 1; for version 2 its index object, read
    /// (within the size the manifest records), checked against the
    /// manifest's crc32c, decoded and validated the first time any clone
    /// asks. Concurrent callers share one read; a failed read is retried by
    /// the next caller.
    ///
    /// # Panics
    ///
    /// If `shard` is not a shard of the manifest.
    pub async fn shard_meta(&self, shard: usize) -> Result<Arc<ShardMeta>> {
        let entry = &self.manifest.shards[shard];
        let index = match &entry.chunks {
            Chunks::Inline(meta) => return Ok(Arc::clone(meta)),
            Chunks::Index(index) => index,
            Chunks::RowGroups(_) => {
                return Err(IoError::Parquet {
                    url: self.location.url_of(&entry.name),
                    reason: "is a Parquet file: it has row groups, not tar chunks".into(),
                })
            }
        };
        let cell = &self.indexes[shard];
        let meta = cell
            .get_or_try_init(|| async {
                // Through the shard cache too: a later epoch (or process)
                // reads no object of the dataset from the store.
                let data = match &self.cache {
                    Some(cache) => {
                        let object = ShardObject {
                            name: &index.name,
                            bytes: index.bytes,
                            crc32c: index.crc32c,
                            checked_from: 0,
                        };
                        cache
                            .read_range(&self.location, object, 0..index.bytes)
                            .await?
                    }
                    None => self.location.get_at_most(&index.name, index.bytes).await?,
                };
                let small = data.len() <= INLINE_DECODE_BYTES;
                let url = self.location.url_of(&index.name);
                let (entry, index) = (entry.clone(), index.clone());
                let compression = self.manifest.compression;
                let decode = move || {
                    chunk_index::decode(&data, &index, entry.summary(), compression).map(Arc::new)
                };
                let decoded = if small {
                    decode()
                } else {
                    tokio::task::spawn_blocking(decode)
                        .await
                        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
                };
                decoded.map_err(|error| IoError::Index { url, error })
            })
            .await?;
        Ok(Arc::clone(meta))
    }

    /// Parquet shard `shard`'s footer: its tail read (through the cache
    /// when there is one), checked against the manifest's crc32c and row
    /// groups, decoded and bounded ([`Footer::decode`]) the first time any
    /// clone asks. Concurrent callers share one read.
    ///
    /// # Panics
    ///
    /// If `shard` is not a shard of the manifest.
    pub async fn footer(&self, shard: usize) -> Result<Arc<Footer>> {
        let entry = &self.manifest.shards[shard];
        let url = self.location.url_of(&entry.name);
        let Some(groups) = entry.row_groups() else {
            return Err(IoError::Parquet {
                url,
                reason: "is a tar shard, not a Parquet file".into(),
            });
        };
        let footer = self.footers[shard]
            .get_or_try_init(|| async {
                let tail = self
                    .read_range(shard, entry.bytes - groups.tail_bytes..entry.bytes)
                    .await?;
                crate::parquet::check_tail(&url, entry, &tail)?;
                let footer = crate::parquet::decode_blocking(&url, entry.bytes, tail).await?;
                if footer.rows() != groups.rows {
                    return Err(IoError::Parquet {
                        url: url.clone(),
                        reason: "its row groups are not those its manifest lists; index the \
                                 dataset again (`tributary index`)"
                            .into(),
                    });
                }
                Ok(Arc::new(footer))
            })
            .await?;
        Ok(Arc::clone(footer))
    }

    /// Shard `shard`'s full entry if it is at hand without a read: inline
    /// (version 1) or already loaded by [`Dataset::shard_meta`].
    pub fn loaded_shard_meta(&self, shard: usize) -> Option<Arc<ShardMeta>> {
        match &self.manifest.shards.get(shard)?.chunks {
            Chunks::Inline(meta) => Some(Arc::clone(meta)),
            Chunks::Index(_) => self.indexes[shard].get().cloned(),
            Chunks::RowGroups(_) => None,
        }
    }

    /// The same dataset reading its shards through `cache` (several
    /// datasets may share one).
    pub fn with_cache(self, cache: Option<Arc<ShardCache>>) -> Self {
        Self { cache, ..self }
    }

    /// Bytes `range` of shard number `shard`: from the cache when it holds
    /// the shard, otherwise from the store (with retries and resumption:
    /// [`Location::get_range`]).
    ///
    /// # Panics
    ///
    /// If `shard` is not a shard of the manifest.
    pub async fn read_range(&self, shard: usize, range: Range<u64>) -> Result<Bytes> {
        let meta = &self.manifest.shards[shard];
        match &self.cache {
            Some(cache) => cache.read_range(&self.location, meta, range).await,
            None => self.location.get_range(&meta.name, range).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_json_url_names_its_directory_locally_and_on_object_stores() {
        assert_eq!(
            dataset_url("s3://bucket/ds/manifest.json"),
            "s3://bucket/ds"
        );
        assert_eq!(dataset_url("gs://b/ds/manifest.json/"), "gs://b/ds");
        assert_eq!(dataset_url("/data/ds/manifest.json"), "/data/ds");
        assert_eq!(dataset_url("ds//manifest.json"), "ds");
        assert_eq!(dataset_url("manifest.json"), ".");
        assert_eq!(dataset_url("/manifest.json"), "/");
        assert_eq!(dataset_url("file:///manifest.json"), "file:///");
        assert_eq!(dataset_url("s3://bucket/ds"), "s3://bucket/ds");
        assert_eq!(
            dataset_url("s3://bucket/my-manifest.json"),
            "s3://bucket/my-manifest.json"
        );
    }

    #[tokio::test]
    async fn a_dataset_url_through_a_local_file_is_not_found_at_once_not_retried() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("shard-00000.tar");
        std::fs::write(&file, b"not a directory").expect("write");
        let url = file.to_str().expect("utf-8").to_owned();
        // A retried error would wait an hour before its second attempt.
        let options = StoreOptions {
            retry: crate::RetryPolicy {
                first_backoff: std::time::Duration::from_secs(3600),
                ..crate::RetryPolicy::default()
            },
            ..StoreOptions::default()
        };
        let error = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            Dataset::open(&url, &options),
        )
        .await
        .expect("answered at once, not after retries")
        .expect_err("a file is no dataset");
        assert!(error.is_not_found(), "{error}");
        let message = error.to_string();
        assert!(
            message.contains(&format!("{url}/manifest.json")),
            "{message}"
        );
        assert!(
            message.contains("pass the dataset's directory"),
            "{message}"
        );
    }
}
