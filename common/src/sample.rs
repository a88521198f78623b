//! Samples in the WebDataset convention: consecutive tar entries that share a
//! key (the path up to the first `.` of the file name) form one sample, and
//! the rest of the name (`jpg`, `cls`, `seg.png`, ...) names a field.

use bytes::Bytes;

use crate::format::tar::TarEntry;

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

/// The class label of a sample: its `cls` field as a decimal integer, `None`
/// where it has none. Where the manifest lists `classes` names (`classes >
/// 0`) the label must index them; the error says why not.
pub fn parse_label(sample: &Sample, classes: usize) -> Result<Option<i64>, String> {
    let Some(cls) = sample.field("cls") else {
        return Ok(None);
    };
    let label: i64 = std::str::from_utf8(cls)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "`cls` field {:?} is not an integer",
                String::from_utf8_lossy(&cls[..cls.len().min(64)])
            )
        })?;
    if classes > 0 && !usize::try_from(label).is_ok_and(|index| index < classes) {
        return Err(format!(
            "`cls` {label} is not a class of the manifest (it lists {classes}: 0 to {})",
            classes - 1
        ));
    }
    Ok(Some(label))
}

/// Checks the labels of `samples` of shard `shard` against a manifest's
/// `classes` names (no check where it lists none).
pub fn check_labels(
    shard: &str,
    samples: &[Sample],
    classes: usize,
) -> Result<(), crate::error::FormatError> {
    if classes == 0 {
        return Ok(());
    }
    for sample in samples {
        parse_label(sample, classes).map_err(|reason| crate::error::FormatError::BadSample {
            shard: shard.to_owned(),
            key: sample.key.clone(),
            reason,
        })?;
    }
    Ok(())
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

/// Checks that `key` is a WebDataset key Tributary writes and indexes: not
/// empty, relative, no empty path components, no `.` in its last component,
/// no control characters. The one check shared by `pack` (through
/// [`crate::format::shard::ShardWriter::push`]) and `index`; the error says why.
pub fn check_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() || key.starts_with('/') || key.split('/').any(str::is_empty) {
        return Err("not a valid WebDataset key (empty, absolute or with an empty path component)");
    }
    if key.rsplit('/').next().unwrap_or("").contains('.') {
        return Err("not a valid WebDataset key (a `.` in the file name)");
    }
    if key.chars().any(char::is_control) {
        return Err("not a valid WebDataset key (it holds a control character)");
    }
    Ok(())
}

/// Whether `key` passes [`check_key`].
pub fn valid_key(key: &str) -> bool {
    check_key(key).is_ok()
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
        assert!(!valid_key("cat/a\nb"));
        assert!(!valid_key("cat/\u{7f}x"));
        assert!(!valid_key("/abs"));
    }

    fn with_cls(cls: &[u8]) -> Sample {
        Sample {
            id: 7,
            key: "k/1".into(),
            fields: vec![Field {
                ext: "cls".into(),
                data: Bytes::copy_from_slice(cls),
            }],
        }
    }

    #[test]
    fn a_label_past_the_manifest_classes_is_an_error_naming_shard_and_key() {
        assert_eq!(parse_label(&with_cls(b"4"), 5), Ok(Some(4)));
        assert_eq!(
            parse_label(&with_cls(b"9"), 0),
            Ok(Some(9)),
            "no classes: no check"
        );
        assert!(parse_label(&with_cls(b"5"), 5).is_err());
        assert!(parse_label(&with_cls(b"-1"), 5).is_err());
        assert!(parse_label(&with_cls(b"x"), 0).is_err());
        let err = check_labels("s-01.tar", &[with_cls(b"1"), with_cls(b"5")], 5)
            .expect_err("5 is past 5 classes");
        let text = err.to_string();
        assert!(text.contains("s-01.tar") && text.contains("k/1"), "{text}");
        assert!(text.contains("`cls` 5"), "{text}");
    }
}
