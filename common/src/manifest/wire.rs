//! The manifest as JSON: one shape for both versions, every column
//! optional, each shard turned into a [`ShardEntry`] only when it has what
//! its version requires (version 1: the chunk columns; version 2: an
//! `index` and no columns). The manifest converts itself from and to this
//! shape (`Manifest::from_json`, `Manifest::to_json`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::entry::{Chunks, ShardEntry};
use super::index::IndexRef;
use super::meta::{CompressionKind, ShardMeta, VERSION_INLINE};
use super::table::{RowGroups, TableColumn, VERSION_PARQUET};

#[derive(Serialize, Deserialize)]
pub(super) struct WireManifest {
    pub(super) format: String,
    pub(super) version: u32,
    pub(super) compression: CompressionKind,
    pub(super) fields: Vec<String>,
    #[serde(default)]
    pub(super) classes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) columns: Vec<TableColumn>,
    pub(super) samples: u64,
    pub(super) bytes: u64,
    pub(super) shards: Vec<WireShard>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct WireShard {
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tail_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    row_groups: Option<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    etag: Option<String>,
}

impl WireShard {
    /// The entry, if the shard has what manifest version `version` needs.
    pub(super) fn into_entry(self, version: u32) -> Result<ShardEntry, (String, String)> {
        let table_fields = self.tail_bytes.is_some() || self.row_groups.is_some();
        if table_fields != (version == VERSION_PARQUET) || self.etag.is_some() && !table_fields {
            return Err((
                "row_groups".into(),
                format!(
                    "with tail_bytes (and etag) is what a version {VERSION_PARQUET} (Parquet) \
                     manifest lists, and only it"
                ),
            ));
        }
        let chunks = if version == VERSION_PARQUET {
            if self.index.is_some() || self.chunk_offsets.is_some() {
                return Err((
                    "index".into(),
                    "is a tar shard's field, in a Parquet manifest".into(),
                ));
            }
            let missing = |field: &str| (field.to_owned(), "is missing".to_owned());
            Chunks::RowGroups(Arc::new(RowGroups {
                rows: self.row_groups.ok_or_else(|| missing("row_groups"))?,
                tail_bytes: self.tail_bytes.ok_or_else(|| missing("tail_bytes"))?,
                etag: self.etag,
            }))
        } else if version == VERSION_INLINE {
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
            tail_bytes: None,
            row_groups: None,
            etag: None,
        };
        match &s.chunks {
            Chunks::Inline(meta) => {
                wire.chunk_offsets = Some(meta.chunk_offsets.clone());
                wire.chunk_samples = meta.chunk_samples.clone();
                wire.chunk_crc32c = Some(meta.chunk_crc32c.clone());
                wire.chunk_uncompressed_bytes = meta.chunk_uncompressed_bytes.clone();
            }
            Chunks::Index(index) => wire.index = Some(index.clone()),
            Chunks::RowGroups(groups) => {
                wire.tail_bytes = Some(groups.tail_bytes);
                wire.row_groups = Some(groups.rows.clone());
                wire.etag = groups.etag.clone();
            }
        }
        wire
    }
}
