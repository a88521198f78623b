//! Writing a dataset's manifest, the one way `pack` and `index` both do:
//! for a version 2 manifest every shard's index object first, then the
//! manifest, last, in a single PUT. A run that fails before that PUT
//! leaves whatever manifest was there (and the objects it names) whole.

use std::str::FromStr;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use tributary_common::manifest::{
    index_name, CompressionKind, Manifest, ShardMeta, MANIFEST_NAME, VERSION_INDEXED,
    VERSION_INLINE,
};

use crate::error::{IoError, Result};
use crate::location::Location;

/// Index objects uploaded at once.
const INDEX_UPLOADS_IN_FLIGHT: usize = 16;

/// Which manifest version to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ManifestVersion {
    /// Version 1: chunk columns inline, for readers older than version 2.
    Inline,
    /// Version 2 (the default): a binary index object per shard.
    #[default]
    Indexed,
}

impl ManifestVersion {
    /// The manifest's `version` number.
    pub fn number(self) -> u32 {
        match self {
            Self::Inline => VERSION_INLINE,
            Self::Indexed => VERSION_INDEXED,
        }
    }
}

impl FromStr for ManifestVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "1" => Ok(Self::Inline),
            "2" => Ok(Self::Indexed),
            _ => Err(format!("manifest version `{text}` is not 1 or 2")),
        }
    }
}

/// What a manifest says, before it is written.
#[derive(Debug, Clone)]
pub struct ManifestDraft {
    pub compression: CompressionKind,
    pub fields: Vec<String>,
    pub classes: Vec<String>,
    /// In the dataset's order.
    pub shards: Vec<ShardMeta>,
}

/// Writes `draft` to `location` as `version`: for version 2, each shard's
/// index object (`<shard>.idx`, or `<shard>.<tag>.idx` with `index_tag`, so
/// that a rewrite never changes an object the old manifest names), then
/// `manifest.json`. Returns the manifest written.
pub async fn write_manifest(
    location: &Location,
    draft: ManifestDraft,
    version: ManifestVersion,
    index_tag: Option<&str>,
) -> Result<Manifest> {
    let url = location.url_of(MANIFEST_NAME);
    let invalid = |error| IoError::Manifest {
        url: url.clone(),
        error,
    };
    let ManifestDraft {
        compression,
        fields,
        classes,
        shards,
    } = draft;
    let manifest = match version {
        ManifestVersion::Inline => {
            Manifest::new(compression, fields, classes, shards).map_err(invalid)?
        }
        ManifestVersion::Indexed => {
            let name = |shard: &str| match index_tag {
                None => index_name(shard),
                Some(tag) => index_name(&format!("{shard}.{tag}")),
            };
            let (manifest, indexes) =
                Manifest::new_indexed(compression, fields, classes, shards, name)
                    .map_err(invalid)?;
            stream::iter(indexes)
                .map(
                    |index| async move { location.put(&index.name, Bytes::from(index.data)).await },
                )
                .buffer_unordered(INDEX_UPLOADS_IN_FLIGHT)
                .try_collect::<()>()
                .await?;
            manifest
        }
    };
    location
        .put(MANIFEST_NAME, Bytes::from(manifest.to_json()))
        .await?;
    Ok(manifest)
}

/// Every object `manifest` names: its shards and their index objects. What
/// a rewrite deletes of the old dataset, once the new manifest is in place.
pub fn objects_named(manifest: &Manifest) -> Vec<String> {
    manifest
        .shards
        .iter()
        .flat_map(|s| {
            std::iter::once(s.name.clone()).chain(s.index().map(|index| index.name.clone()))
        })
        .collect()
}
