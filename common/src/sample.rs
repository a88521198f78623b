//! Samples in the WebDataset convention: consecutive tar entries that share a
//! key (the path up to the first `.` of the file name) form one sample, and
//! the rest of the name (`jpg`, `cls`, `seg.png`, ...) names a field.

use bytes::Bytes;

use crate::tar::TarEntry;

/// A sample's position in a dataset: the index of its shard in the manifest
/// and its index inside that shard. Global sample ids are derived from it by
/// the manifest (see [`crate::manifest::Manifest::sample_id`]).
pub type SampleId = u64;

/// One field of a sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Extension without the leading dot, e.g. `jpg`.
    pub ext: String,
    /// The field's bytes, sharing the buffer they were read from.
    pub data: Bytes,
}

/// A sample as read from a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Dataset-wide id, stable across runs: the basis of augmentation seeds.
    pub id: SampleId,
    /// The WebDataset key, e.g. `n01440764/000123`.
    pub key: String,
    /// Fields in archive order.
    pub fields: Vec<Field>,
}

impl Sample {
    /// The bytes of field `ext`, if present.
    pub fn field(&self, ext: &str) -> Option<&Bytes> {
        self.fields.iter().find(|f| f.ext == ext).map(|f| &f.data)
    }

    /// Total payload bytes of all fields.
    pub fn payload_bytes(&self) -> usize {
        self.fields.iter().map(|f| f.data.len()).sum()
    }
}

/// Splits a tar path into WebDataset `(key, extension)`.
///
/// Returns `None` for names without an extension (not part of any sample).
pub fn split_key(name: &str) -> Option<(&str, &str)> {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    let dot = name[base_start..].find('.')? + base_start;
    let (key, ext) = (&name[..dot], &name[dot + 1..]);
    (!ext.is_empty() && dot > base_start).then_some((key, ext))
}

/// Whether `key` can be written as a WebDataset key (no `.` in its last
/// component, not empty, no empty path components).
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && key.split('/').all(|part| !part.is_empty())
        && !key.rsplit('/').next().unwrap_or("").contains('.')
}

/// A sample's entries as found in an archive, before its bytes are attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    pub key: String,
    /// Offset of the sample's first header.
    pub start: u64,
    /// Offset one past the sample's last entry.
    pub end: u64,
    /// `(extension, payload range in the buffer)` per field.
    pub fields: Vec<(String, std::ops::Range<usize>)>,
}

/// Groups consecutive entries with equal keys into samples. Entries without
/// an extension are skipped.
pub fn group_entries(entries: impl IntoIterator<Item = TarEntry>) -> Vec<RawSample> {
    let mut samples: Vec<RawSample> = Vec::new();
    for entry in entries {
        let Some((key, ext)) = split_key(&entry.name) else {
            continue;
        };
        match samples.last_mut() {
            Some(last) if last.key == key => {
                last.end = entry.end;
                last.fields.push((ext.to_owned(), entry.data));
            }
            _ => samples.push(RawSample {
                key: key.to_owned(),
                start: entry.start,
                end: entry.end,
                fields: vec![(ext.to_owned(), entry.data)],
            }),
        }
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("a/b.c/d.seg.png"), Some(("a/b.c/d", "seg.png")));
        assert_eq!(split_key("x.jpg"), Some(("x", "jpg")));
        assert_eq!(split_key("dir/noext"), None);
        assert_eq!(split_key("dir/.hidden"), None);
        assert!(valid_key("cat/0001"));
        assert!(!valid_key("cat/0.1"));
        assert!(!valid_key("cat//1"));
        assert!(!valid_key(""));
    }
}
