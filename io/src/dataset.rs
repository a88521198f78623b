//! A dataset: where its shards live and what its manifest says.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use tributary_common::manifest::{Manifest, MANIFEST_NAME};

use crate::cache::ShardCache;
use crate::error::{IoError, Result};
use crate::location::{Location, StoreOptions};

/// The largest manifest read: ImageNet's is a few MB. A store that claims
/// more is refused before a byte of the body is read.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// An opened dataset.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub location: Location,
    pub manifest: Arc<Manifest>,
    /// Where shard bytes are kept on local disk, if anywhere
    /// ([`Dataset::with_cache`]).
    pub cache: Option<Arc<ShardCache>>,
}

impl Dataset {
    /// Opens the dataset at `url` by reading its manifest.
    pub async fn open(url: &str, options: &StoreOptions) -> Result<Self> {
        Self::from_location(Location::open(url, options, false)?).await
    }

    /// Opens the dataset whose shards and manifest are at `location`.
    pub async fn from_location(location: Location) -> Result<Self> {
        let manifest_url = location.url_of(MANIFEST_NAME);
        let bytes = location
            .get_at_most(MANIFEST_NAME, MAX_MANIFEST_BYTES)
            .await.map_err(|e| match e {
            IoError::NotFound { url, .. } => IoError::NotFound {
                url,
                hint: " (no manifest: pack a dataset with `tributary pack`, or index WebDataset shards with `tributary index`)",
            },
            other => other,
        })?;
        let manifest = Manifest::from_json(&bytes).map_err(|error| IoError::Manifest {
            url: manifest_url,
            error,
        })?;
        Ok(Self {
            location,
            manifest: Arc::new(manifest),
            cache: None,
        })
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
