//! A dataset: where its shards live and what its manifest says.

use std::sync::Arc;

use tributary_common::manifest::{Manifest, MANIFEST_NAME};

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
        })
    }
}
