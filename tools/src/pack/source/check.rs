//! What every source must give, checked sample by sample as it streams: at
//! least one sample, valid and unique keys, 1 to [`MAX_FIELDS`] fields per
//! sample with distinct extensions in sorted order, and samples that fit a
//! shard chunk.

use std::collections::HashSet;
use std::path::Path;

use tributary_common::format::tar;
use tributary_common::manifest::MAX_CHUNK_BYTES;
use tributary_common::sample::check_key;

use super::format::SourceFormat;
use super::sample::SourceSample;
use crate::error::{Result, ToolsError};

/// The most fields one sample may have.
pub const MAX_FIELDS: usize = 1024;

/// Checks the samples of one pass over a source, in order. It remembers
/// each key (to refuse a key seen twice), nothing else of a sample.
#[derive(Debug)]
pub struct Checker<'a> {
    src: &'a Path,
    format: SourceFormat,
    keys: HashSet<String>,
}

impl<'a> Checker<'a> {
    /// A checker of the samples of `src`, read as `format`.
    pub fn new(src: &'a Path, format: SourceFormat) -> Self {
        Self {
            src,
            format,
            keys: HashSet::new(),
        }
    }

    /// Checks the next sample.
    pub fn sample(&mut self, sample: &SourceSample) -> Result<()> {
        check_sample(self.src, sample)?;
        if !self.keys.insert(sample.key.clone()) {
            return Err(ToolsError::Config(format!(
                "{}: two samples have key `{}`",
                self.src.display(),
                sample.key
            )));
        }
        Ok(())
    }

    /// Checks the end of the pass: it gave at least one sample.
    pub fn finish(self) -> Result<()> {
        if self.keys.is_empty() {
            return Err(ToolsError::Config(format!(
                "{}: no samples to pack ({} source)",
                self.src.display(),
                self.format
            )));
        }
        Ok(())
    }
}

/// Checks one sample of `src` on its own: its key, its fields and its size.
pub fn check_sample(src: &Path, sample: &SourceSample) -> Result<()> {
    let limit = MAX_CHUNK_BYTES - 2 * tar::BLOCK as u64;
    let bad = |reason: String| {
        ToolsError::Config(format!(
            "{}: sample `{}` {reason}",
            src.display(),
            sample.key
        ))
    };
    check_key(&sample.key).map_err(|reason| bad(format!("has a key that is {reason}")))?;
    if sample.fields.is_empty() || sample.fields.len() > MAX_FIELDS {
        return Err(bad(format!(
            "has {} fields (1 to {MAX_FIELDS} allowed)",
            sample.fields.len()
        )));
    }
    if let Some(field) = sample
        .fields
        .iter()
        .find(|f| f.ext.is_empty() || f.ext.contains('/') || f.ext.chars().any(char::is_control))
    {
        return Err(bad(format!(
            "has field `{}` ({}): an extension must be non-empty, without `/` or control characters",
            field.ext.escape_debug(),
            field.origin()
        )));
    }
    if let Some(pair) = sample.fields.windows(2).find(|w| w[0].ext >= w[1].ext) {
        return Err(bad(format!(
            "has fields `{}` and `{}` out of order or twice",
            pair[0].ext, pair[1].ext
        )));
    }
    if sample.tar_bytes() > limit {
        return Err(bad(format!(
            "is {} bytes as tar entries, over the {limit}-byte limit of one sample",
            sample.tar_bytes()
        )));
    }
    Ok(())
}
