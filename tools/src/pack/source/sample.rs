//! A sample to pack, described by where each field's bytes come from: what
//! every [`Source`](super::Source) yields, whatever it reads.

use std::io::Read;
use std::path::PathBuf;

use tributary_common::format::tar;
use tributary_common::manifest::MAX_CHUNK_BYTES;

use super::files::io_err;
use crate::error::{Result, ToolsError};

/// Where a field's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldData {
    /// A file, read when its shard is built.
    File(PathBuf),
    /// Bytes known at scan time (a class index, a caption).
    Inline(Vec<u8>),
}

/// One field of a sample to pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceField {
    /// The WebDataset extension, e.g. `jpg`, `cls`, `seg.png`.
    pub ext: String,
    pub data: FieldData,
    /// The size of the bytes, as scanned.
    pub size: u64,
}

impl SourceField {
    pub fn inline(ext: &str, bytes: Vec<u8>) -> Self {
        Self {
            ext: ext.to_owned(),
            size: bytes.len() as u64,
            data: FieldData::Inline(bytes),
        }
    }

    /// Where the field comes from, for errors.
    pub fn origin(&self) -> String {
        match &self.data {
            FieldData::File(path) => path.display().to_string(),
            FieldData::Inline(_) => format!("field `{}`", self.ext),
        }
    }
}

/// One sample to pack: its key and its fields in sorted extension order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSample {
    pub key: String,
    pub fields: Vec<SourceField>,
}

impl SourceSample {
    /// Payload bytes of all fields, as scanned.
    pub fn bytes(&self) -> u64 {
        self.fields.iter().map(|f| f.size).sum()
    }

    /// Bytes the sample takes as tar entries, as scanned.
    pub fn tar_bytes(&self) -> u64 {
        self.fields
            .iter()
            .map(|f| tar::entry_len(usize::try_from(f.size).unwrap_or(usize::MAX)) as u64)
            .fold(0, u64::saturating_add)
    }
}

/// Reads field `field` whole, refusing more than [`MAX_CHUNK_BYTES`] (a
/// file that grew since it was scanned cannot size an allocation).
pub fn read_field(field: &SourceField) -> Result<std::borrow::Cow<'_, [u8]>> {
    match &field.data {
        FieldData::Inline(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        FieldData::File(path) => {
            let file = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
            let mut data =
                Vec::with_capacity(usize::try_from(field.size.min(MAX_CHUNK_BYTES)).unwrap_or(0));
            file.take(MAX_CHUNK_BYTES + 1)
                .read_to_end(&mut data)
                .map_err(|e| io_err(path, e))?;
            if data.len() as u64 > MAX_CHUNK_BYTES {
                return Err(ToolsError::Config(format!(
                    "{}: over the {MAX_CHUNK_BYTES}-byte limit of one sample",
                    path.display()
                )));
            }
            Ok(std::borrow::Cow::Owned(data))
        }
    }
}
