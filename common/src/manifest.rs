//! The dataset manifest: one JSON object beside the shards that says what
//! every shard holds and where each of its chunks starts.
//!
//! A *chunk* is the unit a reader can start at and verify on its own: one
//! sample in an uncompressed shard, one zstd frame (a block of samples) in a
//! compressed one. `chunk_offsets` has one entry per chunk plus the end of the
//! last chunk; `chunk_crc32c` checks each chunk's stored bytes. In a
//! compressed shard `chunk_uncompressed_bytes` records what each frame
//! decompresses to, and a reader decompresses no more than that (a zstd frame
//! of a few KB can expand to gigabytes).
//!
//! Every count, offset and size is checked against the others when a
//! manifest is parsed or built ([`Manifest::from_json`], [`Manifest::new`]),
//! before anything is sized from it: see [`MAX_CHUNK_BYTES`],
//! [`MIN_SAMPLE_BYTES`] and [`ShardMeta::chunk_limit`].
//!
//! ```json
//! {"format":"tributary","version":1,"compression":"zstd","fields":["cls","jpg"],
//!  "classes":["cat","dog"],"samples":2,"bytes":3584,
//!  "shards":[{"name":"shard-000000.tar.zst","samples":2,"bytes":3584,"crc32c":305419896,
//!             "chunk_offsets":[0,3584],"chunk_samples":[2],"chunk_crc32c":[305419896],
//!             "chunk_uncompressed_bytes":[4096]}]}
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::ManifestError;
use crate::manifest_check::validate_shard;
use crate::sample::SampleId;

/// The manifest's object name beside the shards.
pub const MANIFEST_NAME: &str = "manifest.json";
/// The `format` value of every manifest.
pub const FORMAT_NAME: &str = "tributary";
/// The manifest version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// The largest chunk, stored or decompressed: 1 GiB. A chunk is one sample
/// (uncompressed shards) or one zstd block of about 1 MiB plus at most one
/// sample, so only a sample of about a gigabyte reaches it.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;
/// The fewest bytes a sample takes in a tar stream: one 512-byte header. A
/// chunk of `n` bytes therefore holds at most `n / 512` samples.
pub const MIN_SAMPLE_BYTES: u64 = 512;
/// The decompression limit of a chunk of a manifest written before chunk
/// sizes were recorded is this many times its stored size...
pub const LEGACY_EXPANSION: u64 = 32;
/// ...but at least this much (64 MiB, far above the 1 MiB blocks `pack`
/// writes by default), and at most [`MAX_CHUNK_BYTES`].
pub const LEGACY_MIN_LIMIT: u64 = 64 << 20;
/// The longest shard name.
pub const MAX_NAME_BYTES: usize = 1024;

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
    /// Decompressed size of each chunk of a compressed shard; empty for
    /// uncompressed shards (a chunk's stored bytes are its bytes) and in
    /// manifests written before sizes were recorded (see
    /// [`ShardMeta::chunk_limit`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_uncompressed_bytes: Vec<u64>,
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

    /// Stored bytes of chunk `chunk`.
    pub fn chunk_stored_bytes(&self, chunk: usize) -> u64 {
        self.chunk_offsets[chunk + 1] - self.chunk_offsets[chunk]
    }

    /// The most bytes chunk `chunk` may decompress to: its recorded size, or
    /// for a manifest without recorded sizes [`LEGACY_EXPANSION`] times its
    /// stored size, within [`LEGACY_MIN_LIMIT`]..=[`MAX_CHUNK_BYTES`].
    pub fn chunk_limit(&self, chunk: usize) -> u64 {
        match self.chunk_uncompressed_bytes.get(chunk) {
            Some(&size) => size,
            None => legacy_limit(self.chunk_stored_bytes(chunk)),
        }
    }

    /// The exact decompressed size of chunk `chunk`, where recorded.
    pub fn chunk_uncompressed(&self, chunk: usize) -> Option<u64> {
        self.chunk_uncompressed_bytes.get(chunk).copied()
    }
}

fn legacy_limit(stored: u64) -> u64 {
    stored
        .saturating_mul(LEGACY_EXPANSION)
        .clamp(LEGACY_MIN_LIMIT, MAX_CHUNK_BYTES)
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
            // Saturating: an overflow is then reported by `validate`.
            samples: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(u64::from(s.samples))),
            bytes: shards
                .iter()
                .fold(0u64, |sum, s| sum.saturating_add(s.bytes)),
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
            chunk_uncompressed_bytes: vec![],
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

    fn zstd_manifest_json(chunk_samples: u32, sizes: Option<u64>) -> String {
        let sizes = sizes.map_or(String::new(), |s| {
            format!(r#","chunk_uncompressed_bytes":[{s}]"#)
        });
        format!(
            r#"{{"format":"tributary","version":1,"compression":"zstd","fields":["jpg"],"samples":{chunk_samples},"bytes":3584,
               "shards":[{{"name":"s.tar.zst","samples":{chunk_samples},"bytes":3584,"crc32c":1,
               "chunk_offsets":[0,3584],"chunk_samples":[{chunk_samples}],"chunk_crc32c":[1]{sizes}}}]}}"#
        )
    }

    #[test]
    fn a_chunk_sample_count_no_chunk_can_hold_is_rejected_before_anything_is_allocated() {
        // The reproduction: read/bench sized a Vec from this count.
        let err = Manifest::from_json(zstd_manifest_json(u32::MAX, None).as_bytes())
            .expect_err("4294967295 samples in 3584 bytes");
        let text = err.to_string();
        assert!(text.contains("shards[0].chunk_samples"), "{text}");
        assert!(text.contains("4294967295"), "{text}");
        // With a recorded size, the samples must fit in it.
        let err = Manifest::from_json(zstd_manifest_json(9, Some(4096)).as_bytes())
            .expect_err("9 samples need at least 4608 bytes");
        assert!(
            err.to_string()
                .contains("shards[0].chunk_uncompressed_bytes"),
            "{err}"
        );
        let m = Manifest::from_json(zstd_manifest_json(8, Some(4096)).as_bytes()).expect("fits");
        assert_eq!(m.shards[0].chunk_limit(0), 4096);
        assert_eq!(m.shards[0].chunk_uncompressed(0), Some(4096));
        let err = Manifest::from_json(zstd_manifest_json(8, Some(MAX_CHUNK_BYTES + 1)).as_bytes())
            .expect_err("over the chunk limit");
        assert!(err.to_string().contains("chunk limit"), "{err}");
    }

    #[test]
    fn an_old_manifest_without_chunk_sizes_gets_a_bounded_limit() {
        let m = Manifest::from_json(zstd_manifest_json(2, None).as_bytes()).expect("old manifest");
        assert_eq!(m.shards[0].chunk_uncompressed(0), None);
        assert_eq!(m.shards[0].chunk_limit(0), LEGACY_MIN_LIMIT);
        assert!(!String::from_utf8_lossy(&m.to_json()).contains("chunk_uncompressed_bytes"));
        assert_eq!(legacy_limit(10 << 20), 320 << 20);
        assert_eq!(legacy_limit(u64::MAX), MAX_CHUNK_BYTES);
    }

    #[test]
    fn shard_sizes_whose_sum_overflows_are_an_error_not_a_panic() {
        let mut a = shard("a.tar", 1);
        a.bytes = u64::MAX / 2 + 1;
        let mut b = shard("b.tar", 1);
        b.bytes = u64::MAX / 2 + 1;
        let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![a, b])
            .expect_err("sum overflows");
        assert!(err.to_string().contains("shards[1].bytes"), "{err}");
    }

    #[test]
    fn counts_and_offsets_are_bounded_against_each_other() {
        let mut tiny = shard("a.tar", 2);
        tiny.chunk_offsets = vec![0, 100, 2048];
        let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![tiny])
            .expect_err("a 100-byte chunk cannot hold a sample");
        assert!(err.to_string().contains("shards[0].chunk_offsets"), "{err}");

        let mut huge = shard("a.tar", 1);
        huge.chunk_offsets = vec![0, MAX_CHUNK_BYTES + 1];
        huge.bytes = MAX_CHUNK_BYTES + 2;
        let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![huge])
            .expect_err("chunk over the limit");
        assert!(err.to_string().contains("chunk limit"), "{err}");

        let mut named = shard("a\u{1}.tar", 1);
        named.samples = 1;
        let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![named])
            .expect_err("control character in a name");
        assert!(err.to_string().contains("shards[0].name"), "{err}");

        let mut sized = shard("a.tar", 1);
        sized.chunk_uncompressed_bytes = vec![1024];
        let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![sized])
            .expect_err("sizes only for compressed shards");
        assert!(
            err.to_string()
                .contains("shards[0].chunk_uncompressed_bytes"),
            "{err}"
        );
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
