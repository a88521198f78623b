//! The manifest as JSON: one shape for both versions, every column
//! optional, turned into a [`Manifest`] only when each shard has what its
//! version requires (version 1: the chunk columns; version 2: an `index`
//! and no columns).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::chunk_index::IndexRef;
use crate::error::ManifestError;
use crate::manifest::{
    Chunks, CompressionKind, Manifest, ShardEntry, ShardMeta, VERSION_INDEXED, VERSION_INLINE,
};

#[derive(Serialize, Deserialize)]
pub(crate) struct WireManifest {
    format: String,
    version: u32,
    compression: CompressionKind,
    fields: Vec<String>,
    #[serde(default)]
    classes: Vec<String>,
    samples: u64,
    bytes: u64,
    shards: Vec<WireShard>,
}

#[derive(Serialize, Deserialize)]
struct WireShard {
    name: String,
    samples: u32,
    bytes: u64,
    crc32c: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chunk_offsets: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    chunk_samples: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chunk_crc32c: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    chunk_uncompressed_bytes: Vec<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    index: Option<IndexRef>,
}

impl WireManifest {
    /// The manifest, each shard checked for the fields its version needs;
    /// [`Manifest::validate`] then checks every number.
    pub(crate) fn into_manifest(self) -> Result<Manifest, ManifestError> {
        let version = self.version;
        if !(VERSION_INLINE..=VERSION_INDEXED).contains(&version) {
            return Err(ManifestError::Version {
                found: version,
                supported: VERSION_INDEXED,
            });
        }
        let shards = self
            .shards
            .into_iter()
            .enumerate()
            .map(|(i, shard)| {
                shard
                    .into_entry(version)
                    .map_err(|(field, reason)| ManifestError::Invalid {
                        field: format!("shards[{i}].{field}"),
                        reason,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Manifest::from_parts(
            self.format,
            version,
            self.compression,
            self.fields,
            self.classes,
            self.samples,
            self.bytes,
            shards,
        ))
    }
}

impl WireShard {
    fn into_entry(self, version: u32) -> Result<ShardEntry, (String, String)> {
        let chunks = if version == VERSION_INLINE {
            if self.index.is_some() {
                return Err((
                    "index".into(),
                    "is a version 2 field, in a version 1 manifest".into(),
                ));
            }
            let missing = |field: &str| {
                (
                    field.to_owned(),
                    "is missing: a version 1 manifest lists every chunk".to_owned(),
                )
            };
            Chunks::Inline(Arc::new(ShardMeta {
                name: self.name.clone(),
                samples: self.samples,
                bytes: self.bytes,
                crc32c: self.crc32c,
                chunk_offsets: self.chunk_offsets.ok_or_else(|| missing("chunk_offsets"))?,
                chunk_samples: self.chunk_samples,
                chunk_crc32c: self.chunk_crc32c.ok_or_else(|| missing("chunk_crc32c"))?,
                chunk_uncompressed_bytes: self.chunk_uncompressed_bytes,
            }))
        } else {
            let inline = [
                ("chunk_offsets", self.chunk_offsets.is_some()),
                ("chunk_samples", !self.chunk_samples.is_empty()),
                ("chunk_crc32c", self.chunk_crc32c.is_some()),
                (
                    "chunk_uncompressed_bytes",
                    !self.chunk_uncompressed_bytes.is_empty(),
                ),
            ];
            if let Some((field, _)) = inline.iter().find(|(_, present)| *present) {
                return Err((
                    (*field).to_owned(),
                    "must be absent in a version 2 manifest (the shard's index holds it)".into(),
                ));
            }
            Chunks::Index(self.index.ok_or_else(|| {
                (
                    "index".to_owned(),
                    "is missing: a version 2 manifest names each shard's index".to_owned(),
                )
            })?)
        };
        Ok(ShardEntry {
            name: self.name,
            samples: self.samples,
            bytes: self.bytes,
            crc32c: self.crc32c,
            chunks,
        })
    }
}

impl From<&Manifest> for WireManifest {
    fn from(m: &Manifest) -> Self {
        Self {
            format: m.format.clone(),
            version: m.version,
            compression: m.compression,
            fields: m.fields.clone(),
            classes: m.classes.clone(),
            samples: m.samples,
            bytes: m.bytes,
            shards: m.shards.iter().map(WireShard::from).collect(),
        }
    }
}

impl From<&ShardEntry> for WireShard {
    fn from(s: &ShardEntry) -> Self {
        let mut wire = Self {
            name: s.name.clone(),
            samples: s.samples,
            bytes: s.bytes,
            crc32c: s.crc32c,
            chunk_offsets: None,
            chunk_samples: Vec::new(),
            chunk_crc32c: None,
            chunk_uncompressed_bytes: Vec::new(),
            index: None,
        };
        match &s.chunks {
            Chunks::Inline(meta) => {
                wire.chunk_offsets = Some(meta.chunk_offsets.clone());
                wire.chunk_samples = meta.chunk_samples.clone();
                wire.chunk_crc32c = Some(meta.chunk_crc32c.clone());
                wire.chunk_uncompressed_bytes = meta.chunk_uncompressed_bytes.clone();
            }
            Chunks::Index(index) => wire.index = Some(index.clone()),
        }
        wire
    }
}
