//! Version 3 manifests: Parquet files read where they are. A shard is one
//! Parquet file and its chunks are the file's row groups; the manifest
//! records each file's size, the rows of each row group, how many bytes at
//! the file's end hold its footer (and page indexes), their crc32c, and the
//! ETag the store gave when it was indexed, so that a file replaced under
//! a job is an error that names it. Which columns the files have, and how
//! each becomes a batch column, is the manifest's `columns`.
//!
//! ```json
//! {"format":"tributary","version":3,"compression":"none","fields":["image","label"],
//!  "columns":[{"name":"image","kind":"image","type":"struct<bytes: binary, path: string>"},
//!             {"name":"label","kind":"label","type":"int64"}],
//!  "classes":["cat","dog"],"samples":300,"bytes":123456,
//!  "shards":[{"name":"data/train-00000-of-00001.parquet","samples":300,"bytes":123456,
//!             "crc32c":305419896,"tail_bytes":2048,"row_groups":[100,100,100],"etag":"\"9b2…\""}]}
//! ```

use serde::{Deserialize, Serialize};

/// Version 3: every shard is a Parquet file, read in place.
pub const VERSION_PARQUET: u32 = 3;
/// The most bytes a Parquet file's tail (footer and page indexes) may
/// take: 64 MiB, hundreds of thousands of column chunks.
pub const MAX_TAIL_BYTES: u64 = 64 << 20;
/// The most row groups one file may have.
pub const MAX_ROW_GROUPS: usize = 1 << 20;
/// The most columns a table may list.
pub const MAX_COLUMNS: usize = 4096;
/// The longest ETag kept.
pub const MAX_ETAG_BYTES: usize = 256;
/// The smallest Parquet file: `PAR1`, a footer length and `PAR1` again.
pub const MIN_PARQUET_BYTES: u64 = 12;

/// How a Parquet file's row groups are laid out, as far as planning and
/// reading need to know before the footer is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowGroups {
    /// Rows of each row group, in file order (their sum is the shard's
    /// samples).
    pub rows: Vec<u32>,
    /// Bytes at the end of the file that hold its footer and page indexes;
    /// the shard entry's crc32c is theirs.
    pub tail_bytes: u64,
    /// The store's ETag of the file when it was indexed, if it gave one.
    pub etag: Option<String>,
}

impl RowGroups {
    /// The first row of each row group, plus the total.
    pub fn starts(&self) -> Vec<u32> {
        let mut starts = Vec::with_capacity(self.rows.len() + 1);
        let mut at = 0u32;
        starts.push(0);
        for rows in &self.rows {
            at = at.saturating_add(*rows);
            starts.push(at);
        }
        starts
    }

    /// Checks the row groups against the shard's samples and size. Errors
    /// are `(field, reason)`.
    pub(super) fn validate(&self, samples: u32, bytes: u64) -> Result<(), (String, String)> {
        if self.rows.is_empty() || self.rows.len() > MAX_ROW_GROUPS {
            return Err((
                "row_groups".into(),
                format!(
                    "has {} entries, outside 1..={MAX_ROW_GROUPS}",
                    self.rows.len()
                ),
            ));
        }
        let sum = self
            .rows
            .iter()
            .try_fold(0u32, |sum, rows| sum.checked_add(*rows));
        if sum != Some(samples) {
            return Err((
                "row_groups".into(),
                format!("add up to {sum:?} rows, but the shard holds {samples} samples"),
            ));
        }
        if bytes < MIN_PARQUET_BYTES {
            return Err((
                "bytes".into(),
                format!("is {bytes}, below the {MIN_PARQUET_BYTES} bytes of an empty Parquet file"),
            ));
        }
        if self.tail_bytes < 8 || self.tail_bytes > bytes.min(MAX_TAIL_BYTES) {
            return Err((
                "tail_bytes".into(),
                format!(
                    "is {}, outside 8..={} (the file's size, at most {MAX_TAIL_BYTES})",
                    self.tail_bytes,
                    bytes.min(MAX_TAIL_BYTES)
                ),
            ));
        }
        if let Some(etag) = &self.etag {
            if etag.len() > MAX_ETAG_BYTES || etag.chars().any(char::is_control) {
                return Err((
                    "etag".into(),
                    format!("is longer than {MAX_ETAG_BYTES} bytes or holds control characters"),
                ));
            }
        }
        Ok(())
    }
}

/// How a column's values become a batch's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// Encoded images: a binary column that names an image, or a Hugging
    /// Face `Image` struct (`{bytes, path}`, read from `bytes`).
    Image,
    /// Integers: int64 labels.
    Label,
    /// UTF-8 strings.
    Text,
    /// Other binary values, as they are.
    Bytes,
    /// Lists of numbers: one array per row.
    Array,
    /// Anything else (floats, booleans, nested values): JSON-like values.
    Json,
}

impl ColumnKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Image => "image",
            Self::Label => "label",
            Self::Text => "text",
            Self::Bytes => "bytes",
            Self::Array => "array",
            Self::Json => "json",
        }
    }
}

/// One column of a Parquet dataset: its name (a top-level column, or a
/// path into a struct such as `image.bytes`), how it is read, and its
/// Parquet type for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableColumn {
    pub name: String,
    pub kind: ColumnKind,
    #[serde(rename = "type")]
    pub parquet_type: String,
}

/// Checks a table's columns: a few, named, none twice.
pub(super) fn validate_columns(columns: &[TableColumn]) -> Result<(), (String, String)> {
    if columns.is_empty() || columns.len() > MAX_COLUMNS {
        return Err((
            "columns".into(),
            format!("has {} entries, outside 1..={MAX_COLUMNS}", columns.len()),
        ));
    }
    for (i, column) in columns.iter().enumerate() {
        if column.name.is_empty()
            || column.name.len() > 256
            || column.name.chars().any(char::is_control)
            || column.parquet_type.len() > 4096
        {
            return Err((
                format!("columns[{i}].name"),
                format!(
                    "{:?} is empty, too long or holds control characters",
                    column.name
                ),
            ));
        }
        if columns[..i].iter().any(|c| c.name == column.name) {
            return Err((
                format!("columns[{i}].name"),
                format!("{:?} is listed twice", column.name),
            ));
        }
    }
    Ok(())
}
