//! The dataset manifest: one JSON object beside the shards that says what
//! every shard holds and where each of its chunks starts.
//!
//! A *chunk* is the unit a reader can start at and verify on its own: one
//! sample in an uncompressed shard, one zstd frame (a block of samples) in a
//! compressed one. `chunk_offsets` has one entry per chunk plus the end of the
//! last chunk; `chunk_crc32c` checks each chunk's stored bytes.
//!
//! ```json
//! {"format":"tributary","version":1,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "chunk_offsets":[0,3584],"chunk_samples":[2],"chunk_crc32c":[305419896]}]}
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::ManifestError;
use crate::sample::SampleId;

/// The manifest's object name beside the shards.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The `format` value of every manifest.
pub const FORMAT_NAME: &str = "tributary";
/// The manifest version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// How a dataset's shards are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompressionKind {
    /// Plain tar: any tar or WebDataset reader reads the shard as is.
    None,
    /// Concatenated independent zstd frames, each holding whole samples; the
    /// decompressed stream is a plain tar.
    Zstd,
}

impl CompressionKind {
    /// The manifest's name for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Zstd => "zstd",
        }
    }

    /// File-name suffix of shards of this kind.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::None => ".tar",
            Self::Zstd => ".tar.zst",
        }
    }
}

/// A compression choice for writing: kind plus zstd level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    pub kind: CompressionKind,
    pub level: i32,
}

impl Compression {
    pub const NONE: Self = Self {
        kind: CompressionKind::None,
        level: 0,
    };
    /// zstd at its default level (3).
    pub const ZSTD: Self = Self {
        kind: CompressionKind::Zstd,
        level: 3,
    };
}

impl FromStr for Compression {
    type Err = String;

    /// Parses `none`, `zstd` or `zstd:LEVEL` (1-22).
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            None if text == "none" => Ok(Self::NONE),
            None if text == "zstd" => Ok(Self::ZSTD),
            Some(("zstd", level)) => match level.parse::<i32>() {
                Ok(level @ 1..=22) => Ok(Self {
                    kind: CompressionKind::Zstd,
                    level,
                }),
                _ => Err(format!("zstd level `{level}` is not a number from 1 to 22")),
            },
            _ => Err(format!(
                "unknown compression `{text}` (expected none, zstd or zstd:LEVEL)"
            )),
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CompressionKind::None => f.write_str("none"),
            CompressionKind::Zstd => write!(f, "zstd:{}", self.level),
        }
    }
}

/// One shard's entry in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardMeta {
    /// Object name relative to the manifest's directory.
    pub name: String,
    /// Number of samples.
    pub samples: u32,
    /// Size of the object in bytes.
    pub bytes: u64,
    /// crc32c of the whole object.
    pub crc32c: u32,
    /// Start of each chunk, then the end of the last one.
    pub chunk_offsets: Vec<u64>,
    /// Samples per chunk; empty for uncompressed shards (one each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_samples: Vec<u32>,
    /// crc32c of each chunk's stored bytes.
    pub chunk_crc32c: Vec<u32>,
}

impl ShardMeta {
    /// Number of chunks.
    pub fn chunks(&self) -> usize {
        self.chunk_crc32c.len()
    }

    /// Samples in chunk `chunk`.
    pub fn samples_in_chunk(&self, chunk: usize) -> u32 {
        if self.chunk_samples.is_empty() {
            1
        } else {
            self.chunk_samples[chunk]
        }
    }
}

/// The manifest of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written by this build.
    pub version: u32,
    pub compression: CompressionKind,
    /// Every field extension present in the dataset, sorted.
    pub fields: Vec<String>,
    /// Class names; the `cls` field of a sample indexes this list.
    #[serde(default)]
    pub classes: Vec<String>,
    /// Total samples over all shards.
    pub samples: u64,
    /// Total bytes over all shards.
    pub bytes: u64,
    pub shards: Vec<ShardMeta>,
    /// First global sample id of each shard (prefix sums), plus the total.
    #[serde(skip)]
    starts: Vec<u64>,
}

impl Manifest {
    /// Builds a manifest from shard entries, computing the totals.
    pub fn new(
        compression: CompressionKind,
        fields: Vec<String>,
        classes: Vec<String>,
        shards: Vec<ShardMeta>,
    ) -> Result<Self, ManifestError> {
        let mut manifest = Self {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            compression,
            fields,
            classes,
            samples: shards.iter().map(|s| u64::from(s.samples)).sum(),
            bytes: shards.iter().map(|s| s.bytes).sum(),
            shards,
            starts: Vec::new(),
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses and validates manifest JSON. Errors name the offending field
    /// path, e.g. `shards[3].chunk_offsets`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let mut manifest: Self = serde_path_to_error::deserialize(de).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
            ManifestError::Parse { path, message }
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Serialises the manifest (compact: offset arrays can be long).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).expect("a manifest always serialises");
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
        if self.version != FORMAT_VERSION {
            return Err(ManifestError::Version {
                found: self.version,
                supported: FORMAT_VERSION,
            });
        }
        if self.shards.is_empty() {
            return Err(invalid("shards".into(), "lists no shards".into()));
        }
        let mut starts = Vec::with_capacity(self.shards.len() + 1);
        let (mut samples, mut bytes) = (0u64, 0u64);
        for (i, shard) in self.shards.iter().enumerate() {
            starts.push(samples);
            validate_shard(shard, self.compression)
                .map_err(|(field, reason)| invalid(format!("shards[{i}].{field}"), reason))?;
            samples += u64::from(shard.samples);
            bytes += shard.bytes;
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

fn validate_shard(shard: &ShardMeta, compression: CompressionKind) -> Result<(), (String, String)> {
    let err = |field: &str, reason: String| Err((field.to_owned(), reason));
    let chunks = shard.chunk_crc32c.len();
    if shard.name.is_empty() || shard.name.starts_with('/') || shard.name.contains("..") {
        return err(
            "name",
            format!("`{}` is not a relative object name", shard.name),
        );
    }
    if shard.samples == 0 {
        return err("samples", "is 0: empty shards are not allowed".into());
    }
    if shard.chunk_offsets.len() != chunks + 1 {
        return err(
            "chunk_offsets",
            format!(
                "has {} entries, expected {} (one per chunk plus the end)",
                shard.chunk_offsets.len(),
                chunks + 1
            ),
        );
    }
    if let Some(i) = shard.chunk_offsets.windows(2).position(|w| w[0] >= w[1]) {
        return err(
            "chunk_offsets",
            format!("entry {} is not below entry {}", i, i + 1),
        );
    }
    if shard.chunk_offsets[chunks] > shard.bytes {
        return err(
            "chunk_offsets",
            format!(
                "ends at {}, past the shard's {} bytes",
                shard.chunk_offsets[chunks], shard.bytes
            ),
        );
    }
    let counted: u64 = match compression {
        CompressionKind::None if !shard.chunk_samples.is_empty() => {
            return err(
                "chunk_samples",
                "must be absent for uncompressed shards".into(),
            )
        }
        CompressionKind::None => chunks as u64,
        CompressionKind::Zstd => {
            if shard.chunk_samples.len() != chunks {
                return err(
                    "chunk_samples",
                    format!(
                        "has {} entries for {chunks} chunks",
                        shard.chunk_samples.len()
                    ),
                );
            }
            if shard.chunk_samples.contains(&0) {
                return err("chunk_samples", "holds an empty chunk".into());
            }
            shard.chunk_samples.iter().map(|&n| u64::from(n)).sum()
        }
    };
    if counted != u64::from(shard.samples) {
        return err(
            "samples",
            format!("is {}, but the chunks hold {counted}", shard.samples),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(name: &str, samples: u32) -> ShardMeta {
        ShardMeta {
            name: name.into(),
            samples,
            bytes: u64::from(samples) * 1024 + 1024,
            crc32c: 1,
            chunk_offsets: (0..=u64::from(samples)).map(|i| i * 1024).collect(),
            chunk_samples: vec![],
            chunk_crc32c: vec![0; samples as usize],
        }
    }

    #[test]
    fn ids_and_locations_agree() {
        let m = Manifest::new(
            CompressionKind::None,
            vec!["jpg".into()],
            vec![],
            vec![shard("a.tar", 3), shard("b.tar", 5)],
        )
        .expect("valid");
        assert_eq!(m.samples, 8);
        assert_eq!(m.sample_id(1, 2), 5);
        assert_eq!(m.locate(5), Some((1, 2)));
        assert_eq!(m.locate(2), Some((0, 2)));
        assert_eq!(m.locate(8), None);
        let back = Manifest::from_json(&m.to_json()).expect("round trip");
        assert_eq!(back, m);
    }

    #[test]
    fn errors_name_the_field() {
        let m = Manifest::new(
            CompressionKind::None,
            vec![],
            vec![],
            vec![shard("a.tar", 2)],
        )
        .expect("valid");
        let mut json: serde_json::Value = serde_json::from_slice(&m.to_json()).expect("json");
        json["shards"][0]
            .as_object_mut()
            .expect("object")
            .remove("chunk_crc32c");
        let err = Manifest::from_json(json.to_string().as_bytes()).expect_err("missing field");
        assert!(err.to_string().contains("shards[0]"), "{err}");
        assert!(err.to_string().contains("chunk_crc32c"), "{err}");

        json["compression"] = "lz4".into();
        let err = Manifest::from_json(json.to_string().as_bytes()).expect_err("bad compression");
        assert!(err.to_string().contains("compression"), "{err}");
        assert!(err.to_string().contains("lz4"), "{err}");

        let mut bad = m.clone();
        bad.shards[0].chunk_offsets[1] = 0;
        let err = Manifest::from_json(&bad.to_json()).expect_err("offsets not increasing");
        assert!(err.to_string().contains("shards[0].chunk_offsets"), "{err}");
    }

    #[test]
    fn compression_parses() {
        assert_eq!("none".parse(), Ok(Compression::NONE));
        assert_eq!("zstd".parse(), Ok(Compression::ZSTD));
        assert_eq!("zstd:19".parse::<Compression>().map(|c| c.level), Ok(19));
        assert!("zstd:99".parse::<Compression>().is_err());
        assert!("lz4".parse::<Compression>().is_err());
    }
}
