//! The dataset manifest: one JSON object beside the shards that says what
//! every shard holds and where each of its chunks starts.
//!
//! A *chunk* is the unit a reader can start at and verify on its own: one
//! sample in an uncompressed shard, one zstd frame (a block of samples) in a
//! compressed one. A shard's chunk columns ([`ShardMeta`]): `chunk_offsets`
//! has one entry per chunk plus the end of the last chunk; `chunk_crc32c`
//! checks each chunk's stored bytes. In a compressed shard
//! `chunk_uncompressed_bytes` records what each frame decompresses to, and a
//! reader decompresses no more than that (a zstd frame of a few KB can
//! expand to gigabytes).
//!
//! Two versions (docs/FORMAT.md): version 1 lists every shard's chunk
//! columns inline (about 20 bytes of JSON a sample, 25 MB for ImageNet,
//! parsed by every rank); version 2, written by default, keeps only each
//! shard's name, samples, size and checksum, and names a binary index
//! object per shard ([`index`]) that a rank reads only for the
//! shards it touches. [`ShardEntry::chunks`] says which.
//!
//! Every count, offset and size is checked against the others when a
//! manifest is parsed or built ([`Manifest::from_json`], [`Manifest::new`]),
//! or when an index is decoded ([`index::decode`]), before
//! anything is sized from it: see [`MAX_CHUNK_BYTES`], [`MIN_SAMPLE_BYTES`]
//! and [`ShardMeta::chunk_limit`].
//!
//! ```json
//! {"format":"tributary","version":1,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "chunk_offsets":[0,3584],"chunk_samples":[2],"chunk_crc32c":[305419896],
//!             "chunk_uncompressed_bytes":[4096]}]}
//! {"format":"tributary","version":2,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "index":{"name":"shard-000000.tar.zst.idx","bytes":17,"crc32c":2596996162}}]}
//! ```
//!
//! Its parts: the leaf types and bounds (`meta`), the checks of a shard's
//! chunk columns (`check`), a shard's entry (`entry`), the binary chunk
//! index of version 2 ([`index`]), and the JSON shape of both versions
//! (`wire`).

use crate::error::ManifestError;
use crate::sample::SampleId;

mod check;
mod entry;
pub mod index;
mod meta;
pub mod table;
mod wire;

pub(crate) use check::check_name;
use check::validate_shard;
use entry::validate_entry;
use index::IndexRef;
use wire::{WireManifest, WireShard};

pub use entry::{Chunks, ShardEntry};
pub use index::index_name;
pub use meta::{
    Compression, CompressionKind, ShardMeta, FORMAT_NAME, FORMAT_VERSION, LEGACY_EXPANSION,
    LEGACY_MIN_LIMIT, MANIFEST_NAME, MAX_CHUNK_BYTES, MAX_NAME_BYTES, MIN_SAMPLE_BYTES,
    VERSION_INDEXED, VERSION_INLINE,
};
pub use table::{ColumnKind, RowGroups, TableColumn, VERSION_PARQUET};

/// One index object to write beside the shards, before the manifest that
/// names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexObject {
    pub name: String,
    pub data: Vec<u8>,
}

/// The manifest of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`VERSION_INLINE`] or [`VERSION_INDEXED`].
    pub version: u32,
    pub compression: CompressionKind,
    /// Every field extension present in the dataset, sorted.
    pub fields: Vec<String>,
    /// Class names; the `cls` field of a sample indexes this list.
    pub classes: Vec<String>,
    /// A Parquet dataset's columns (version 3); empty for tar shards.
    pub columns: Vec<TableColumn>,
    /// Total samples over all shards.
    pub samples: u64,
    /// Total bytes over all shards.
    pub bytes: u64,
    pub shards: Vec<ShardEntry>,
    /// First global sample id of each shard (prefix sums), plus the total.
    starts: Vec<u64>,
}

impl Manifest {
    /// Builds a version 1 manifest, every shard's chunk columns inline,
    /// computing the totals.
    pub fn new(
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardMeta>,
    ) -> Result<Self, ManifestError> {
        let shards = shards.into_iter().map(ShardEntry::inline_from).collect();
        Self::from_entries(VERSION_INLINE, compression, fields, classes, shards)
    }

    /// Builds a version 2 manifest and the index objects it names: shard
    /// `s`'s columns go to `index_name(&s.name)` (see [`index_name`]). The
    /// index objects are to be written before the manifest.
    pub fn new_indexed(
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardMeta>,
        index_name: impl Fn(&str) -> String,
    ) -> Result<(Self, Vec<IndexObject>), ManifestError> {
        // Each shard's columns pass the version 1 checks first, so that no
        // index is written that a reader would refuse.
        for (i, shard) in shards.iter().enumerate() {
            validate_shard(shard, compression).map_err(|(field, reason)| {
                ManifestError::Invalid {
                    field: format!("shards[{i}].{field}"),
                    reason,
                }
            })?;
        }
        let mut indexes = Vec::with_capacity(shards.len());
        let entries = shards
            .into_iter()
            .map(|meta| {
                let data = index::encode(&meta);
                let index = IndexRef::of(index_name(&meta.name), &data);
                indexes.push(IndexObject {
                    name: index.name.clone(),
                    data,
                });
                ShardEntry {
                    name: meta.name,
                    samples: meta.samples,
                    bytes: meta.bytes,
                    crc32c: meta.crc32c,
                    chunks: Chunks::Index(index),
                }
            })
            .collect();
        let manifest = Self::from_entries(VERSION_INDEXED, compression, fields, classes, entries)?;
        Ok((manifest, indexes))
    }

    /// Builds a version 3 manifest: Parquet files read in place, each
    /// shard's entry holding its row groups ([`Chunks::RowGroups`]).
    pub fn new_table(
        columns: Vec<TableColumn>,
        classes: Vec<String>,
        shards: Vec<ShardEntry>,
    ) -> Result<Self, ManifestError> {
        let fields = columns.iter().map(|c| c.name.clone()).collect();
        let mut manifest = Self::from_entries_unchecked(
            VERSION_PARQUET,
            CompressionKind::None,
            fields,
            classes,
            shards,
        );
        manifest.columns = columns;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Whether the shards are Parquet files (version 3).
    pub fn is_table(&self) -> bool {
        self.version == VERSION_PARQUET
    }

    /// The column named `name` of a Parquet dataset.
    pub fn column(&self, name: &str) -> Option<&TableColumn> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }

    /// A manifest from its parts, not yet validated.
    #[allow(clippy::too_many_arguments)]
    fn from_parts(
        format: String,
        version: u32,
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        samples: u64,
        bytes: u64,
        shards: Vec<ShardEntry>,
    ) -> Self {
        Self {
            format,
            version,
            compression,
            fields,
            classes,
            columns: Vec::new(),
            samples,
            bytes,
            shards,
            starts: Vec::new(),
        }
    }

    fn from_entries(
        version: u32,
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardEntry>,
    ) -> Result<Self, ManifestError> {
        let mut manifest =
            Self::from_entries_unchecked(version, compression, fields, classes, shards);
        manifest.validate()?;
        Ok(manifest)
    }

    /// A manifest of `shards`, its totals computed, not yet validated.
    fn from_entries_unchecked(
        version: u32,
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardEntry>,
    ) -> Self {
        Self {
            format: FORMAT_NAME.to_owned(),
            version,
            compression,
            fields,
            classes,
            columns: Vec::new(),
            // Saturating: an overflow is then reported by `validate`.
            samples: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(u64::from(s.samples))),
            bytes: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(s.bytes)),
            shards,
            starts: Vec::new(),
        }
    }

    /// Parses and validates manifest JSON of either version. Errors name
    /// the offending field path, e.g. `shards[3].chunk_offsets`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let wire: WireManifest = serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            ManifestError::Parse { path, message }
        })?;
        let mut manifest = wire.into_manifest()?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Serialises the manifest (compact: offset arrays can be long).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out =
            serde_json::to_vec(&WireManifest::from(self)).expect("a manifest always serialises");
        out.push(b'\n');
        out
    }

    /// First global sample id of shard `shard`.
    pub fn shard_start(&self, shard: usize) -> SampleId {
        self.starts[shard]
    }

    /// Global id of sample `index` of shard `shard`.
    pub fn sample_id(&self, shard: usize, index: u32) -> SampleId {
        self.starts[shard] + u64::from(index)
    }

    /// `(shard, index)` of a global sample id.
    pub fn locate(&self, id: SampleId) -> Option<(usize, u32)> {
        if id >= self.samples {
            return None;
        }
        let shard = self.starts.partition_point(|&start| start <= id) - 1;
        Some((shard, (id - self.starts[shard]) as u32))
    }

    fn validate(&mut self) -> Result<(), ManifestError> {
        let invalid = |field: String, reason: String| ManifestError::Invalid { field, reason };
        if self.format != FORMAT_NAME {
            return Err(invalid(
                "format".into(),
                format!("is `{}`, expected `{FORMAT_NAME}`", self.format),
            ));
        }
        if !(VERSION_INLINE..=VERSION_PARQUET).contains(&self.version) {
            return Err(ManifestError::Version {
                found: self.version,
                supported: VERSION_PARQUET,
            });
        }
        if self.is_table() {
            table::validate_columns(&self.columns)
                .map_err(|(field, reason)| invalid(field, reason))?;
            if self.compression != CompressionKind::None {
                return Err(invalid(
                    "compression".into(),
                    "must be `none` for Parquet files (they compress their own pages)".into(),
                ));
            }
        } else if !self.columns.is_empty() {
            return Err(invalid(
                "columns".into(),
                format!("is for Parquet datasets (version {VERSION_PARQUET}) only"),
            ));
        }
        if self.shards.is_empty() {
            return Err(invalid("shards".into(), "lists no shards".into()));
        }
        let mut starts = Vec::with_capacity(self.shards.len() + 1);
        let (mut samples, mut bytes) = (0u64, 0u64);
        for (i, shard) in self.shards.iter().enumerate() {
            starts.push(samples);
            validate_entry(shard, self.compression)
                .map_err(|(field, reason)| invalid(format!("shards[{i}].{field}"), reason))?;
            samples = samples
                .checked_add(u64::from(shard.samples))
                .ok_or_else(|| {
                    invalid(
                        "samples".into(),
                        "the shards' sample counts overflow".into(),
                    )
                })?;
            bytes = bytes.checked_add(shard.bytes).ok_or_else(|| {
                invalid(
                    format!("shards[{i}].bytes"),
                    format!("{} overflows the sum of shard sizes", shard.bytes),
                )
            })?;
        }
        starts.push(samples);
        if samples != self.samples {
            return Err(invalid(
                "samples".into(),
                format!("is {}, but the shards hold {samples}", self.samples),
            ));
        }
        if bytes != self.bytes {
            return Err(invalid(
                "bytes".into(),
                format!("is {}, but the shards hold {bytes}", self.bytes),
            ));
        }
        self.starts = starts;
        Ok(())
    }
}

impl WireManifest {
    /// The manifest, each shard checked for the fields its version needs;
    /// [`Manifest::validate`] then checks every number.
    fn into_manifest(self) -> Result<Manifest, ManifestError> {
        let version = self.version;
        if !(VERSION_INLINE..=VERSION_PARQUET).contains(&version) {
            return Err(ManifestError::Version {
                found: version,
                supported: VERSION_PARQUET,
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
        let mut manifest = Manifest::from_parts(
            self.format,
            version,
            self.compression,
            self.fields,
            self.classes,
            self.samples,
            self.bytes,
            shards,
        );
        manifest.columns = self.columns;
        Ok(manifest)
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
            columns: m.columns.clone(),
            samples: m.samples,
            bytes: m.bytes,
            shards: m.shards.iter().map(WireShard::from).collect(),
        }
    }
}

#[cfg(test)]
mod tests;
