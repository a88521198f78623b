//! Listings: a CSV or JSONL file naming one sample per row.
//!
//! - **CSV** (RFC 4180, see `csv.rs`): a header row naming the
//!   columns, `path` and optionally `label` and `caption` in any order
//!   (`path,label` or `path,label,caption` say), then one row per sample
//!   with exactly as many fields. An empty `label` is no label; a `caption`
//!   column gives every sample a `txt` field, empty ones included.
//! - **JSONL** (`.jsonl`, `.ndjson`): one object per line,
//!   `{"path": "...", "label": "cat" | 3 | null, "caption": "..." | null}`;
//!   `label` and `caption` may be left out; other keys are refused. A
//!   missing, null or empty `label` is no label; a missing or null
//!   `caption` is no `txt` field.
//!
//! Blank lines are skipped. A relative `path` is resolved against the
//! listing's directory. The file becomes one field, named by its magic
//! bytes (`jpg`, `png`, `webp`) or else by its lowercased last extension
//! (`npy`, `json`, ...); the caption becomes the UTF-8 `txt` field; the
//! label a `cls` field holding the class index in decimal.
//!
//! **Classes.** Where every label is a non-negative integer written without
//! leading zeros (`0`, `7`, `999`), the label *is* the class index and the
//! manifest's classes are `"0"` to the largest label, so a split that lacks a
//! class keeps the same numbering as one that has it. Otherwise the classes
//! are the distinct labels sorted by their UTF-8 bytes (as ImageFolder sorts
//! its directories) and a label's index is its position in that list. No
//! labels: no classes and no `cls` fields.
//!
//! **Keys.** Row `i` (0-based, blank lines not counted) is sample
//! `{i:08}`, so keys are unique, valid and in listing order, and a file may
//! be listed more than once (one image with several captions).
//!
//! Bounds: the listing is at most [`MAX_LISTING_BYTES`], a record at most
//! [`MAX_RECORD_BYTES`], at most [`MAX_LISTED_CLASSES`] classes. Errors
//! name the listing and the line.
//!
//! **Streaming.** [`Listing::open`] reads the listing once for its labels
//! (the classes must be known before the first sample), keeping only the
//! distinct labels; each pass then reads it again, [`ROWS_AT_ONCE`] rows at
//! a time, their files checked and typed in parallel.
//!
//! ## Layout
//!
//! - `rows.rs`: [`Row`], and [`Rows`], the rows of a CSV or JSONL listing
//!   one at a time; `csv.rs`: the CSV record reader under it.
//! - `classes.rs`: [`classes`], the rule from labels to class indices.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read, Take};
use std::path::{Path, PathBuf};

mod classes;
mod csv;
mod rows;

use super::files::io_err;
use super::format::SourceFormat;
use super::sample::{FieldData, SourceField, SourceSample};
use super::stream::{Samples, Source};
use crate::error::{Result, ToolsError};

pub use classes::{classes, Labels, MAX_LISTED_CLASSES};
pub use rows::{Row, Rows, MAX_RECORD_BYTES};

use rows::at;

/// The largest listing file.
pub const MAX_LISTING_BYTES: u64 = 1 << 30;
/// Rows read (and their files checked) at a time by a pass.
pub const ROWS_AT_ONCE: usize = 1024;
/// The longest field extension taken from a listed file's name.
const MAX_EXT_BYTES: usize = 32;

/// A CSV or JSONL listing (see the [module docs](self)).
#[derive(Debug)]
pub struct Listing {
    src: PathBuf,
    jsonl: bool,
    classes: Vec<String>,
    /// Each label's class index.
    index: HashMap<String, u32>,
}

impl Listing {
    /// Reads the listing `src` (CSV, or JSONL where the name ends in
    /// `.jsonl` or `.ndjson`) once, for its classes.
    pub fn open(src: &Path) -> Result<Self> {
        let meta = std::fs::metadata(src).map_err(|e| io_err(src, e))?;
        if !meta.is_file() {
            return Err(ToolsError::Config(format!(
                "{}: not a file, so not a listing",
                src.display()
            )));
        }
        if meta.len() > MAX_LISTING_BYTES {
            return Err(ToolsError::Config(format!(
                "{}: {} bytes, over the {MAX_LISTING_BYTES}-byte limit of a listing (split it)",
                src.display(),
                meta.len()
            )));
        }
        let name = src.to_string_lossy().to_ascii_lowercase();
        let mut listing = Self {
            src: src.to_owned(),
            jsonl: name.ends_with(".jsonl") || name.ends_with(".ndjson"),
            classes: Vec::new(),
            index: HashMap::new(),
        };
        let mut labels = Labels::default();
        let mut count = 0usize;
        {
            let mut rows = listing.rows()?;
            while let Some(row) = rows.next_row()? {
                labels.add(&row);
                count += 1;
            }
            listing.check_size(&rows)?;
        }
        if count == 0 {
            return Err(ToolsError::Config(format!(
                "{}: a listing without rows, nothing to pack",
                src.display()
            )));
        }
        (listing.classes, listing.index) = labels.finish(src)?;
        Ok(listing)
    }

    /// The rows of the listing, from the first.
    fn rows(&self) -> Result<Rows<'_, BufReader<Take<File>>>> {
        let file = File::open(&self.src).map_err(|e| io_err(&self.src, e))?;
        let reader = BufReader::new(file.take(MAX_LISTING_BYTES + 1));
        if self.jsonl {
            Ok(Rows::jsonl(&self.src, reader))
        } else {
            Rows::csv(&self.src, reader)
        }
    }

    /// Refuses a listing that grew over the limit while `rows` read it.
    fn check_size(&self, rows: &Rows<'_, BufReader<Take<File>>>) -> Result<()> {
        if rows.get_ref().get_ref().limit() == 0 {
            return Err(ToolsError::Config(format!(
                "{}: grew over the {MAX_LISTING_BYTES}-byte limit of a listing while read",
                self.src.display()
            )));
        }
        Ok(())
    }

    /// The samples of `rows`, the first of them row `first` (0-based),
    /// files checked and typed in parallel; the first error in row order.
    fn samples_of(&self, first: usize, rows: &[Row]) -> Result<Vec<SourceSample>> {
        use rayon::prelude::*;
        rows.par_iter()
            .enumerate()
            .map(|(i, row)| self.sample(first + i, row))
            .collect::<Vec<_>>()
            .into_iter()
            .collect()
    }

    /// Sample `i`, from `row`.
    fn sample(&self, i: usize, row: &Row) -> Result<SourceSample> {
        let src = &self.src;
        let base = src.parent().unwrap_or(Path::new(""));
        let bad = |reason: String| at(src, row.line, reason);
        if row.path.is_empty() {
            return Err(bad("an empty path".into()));
        }
        let path = base.join(&row.path);
        let meta = std::fs::metadata(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if !meta.is_file() {
            return Err(bad(format!("{}: not a file", path.display())));
        }
        let ext = file_ext(&path).map_err(bad)?;
        let mut fields = Vec::with_capacity(3);
        if let Some(label) = &row.label {
            if ext == "cls" {
                return Err(bad(format!(
                    "{}: a `cls` file and a label would both be field `cls`",
                    path.display()
                )));
            }
            let class = self
                .index
                .get(label)
                .ok_or_else(|| bad(format!("label `{label}` has no class")))?;
            fields.push(SourceField::inline("cls", class.to_string().into_bytes()));
        }
        if let Some(caption) = &row.caption {
            if ext == "txt" {
                return Err(bad(format!(
                    "{}: a `txt` file and a caption would both be field `txt`",
                    path.display()
                )));
            }
            fields.push(SourceField::inline("txt", caption.clone().into_bytes()));
        }
        fields.push(SourceField {
            ext,
            data: FieldData::File(path),
            size: meta.len(),
        });
        fields.sort_by(|a, b| a.ext.cmp(&b.ext));
        Ok(SourceSample {
            key: format!("{i:08}"),
            fields,
        })
    }
}

impl Source for Listing {
    fn format(&self) -> SourceFormat {
        SourceFormat::Listing
    }

    fn classes(&self) -> &[String] {
        &self.classes
    }

    fn samples(&self) -> Samples<'_> {
        match self.rows() {
            Ok(rows) => Box::new(Pass {
                listing: self,
                rows,
                next: 0,
                pending: Vec::new().into_iter(),
                done: false,
            }),
            Err(error) => Box::new(std::iter::once(Err(error))),
        }
    }
}

/// One pass over a listing, [`ROWS_AT_ONCE`] rows at a time.
struct Pass<'a> {
    listing: &'a Listing,
    rows: Rows<'a, BufReader<Take<File>>>,
    /// The index of the next row read.
    next: usize,
    /// Samples of the rows read, not yet yielded.
    pending: std::vec::IntoIter<SourceSample>,
    done: bool,
}

impl Pass<'_> {
    /// The samples of the next rows (none at the end).
    fn read(&mut self) -> Result<Vec<SourceSample>> {
        let mut rows = Vec::with_capacity(ROWS_AT_ONCE);
        while rows.len() < ROWS_AT_ONCE {
            match self.rows.next_row()? {
                Some(row) => rows.push(row),
                None => {
                    self.done = true;
                    self.listing.check_size(&self.rows)?;
                    break;
                }
            }
        }
        let first = self.next;
        self.next += rows.len();
        self.listing.samples_of(first, &rows)
    }
}

impl Iterator for Pass<'_> {
    type Item = Result<SourceSample>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(sample) = self.pending.next() {
                return Some(Ok(sample));
            }
            if self.done {
                return None;
            }
            match self.read() {
                Ok(samples) => self.pending = samples.into_iter(),
                Err(error) => {
                    self.done = true;
                    return Some(Err(error));
                }
            }
        }
    }
}

/// The field extension of the file at `path`: by its magic bytes where it
/// is a JPEG, PNG or WebP image, else its lowercased last extension.
pub fn file_ext(path: &Path) -> std::result::Result<String, String> {
    let mut head = [0u8; 12];
    let mut file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut len = 0;
    while len < head.len() {
        match file.read(&mut head[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    let head = &head[..len];
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Ok("jpg".into());
    }
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Ok("png".into());
    }
    if head.len() == 12 && head.starts_with(b"RIFF") && &head[8..] == b"WEBP" {
        return Ok("webp".into());
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name.rsplit_once('.') {
        Some((stem, ext))
            if !stem.is_empty()
                && !ext.is_empty()
                && ext.len() <= MAX_EXT_BYTES
                && ext
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(ext.to_ascii_lowercase())
        }
        _ => Err(format!(
            "{}: not a JPEG, PNG or WebP image, and without an extension of up to {MAX_EXT_BYTES} \
             letters, digits, `_` or `-` to name its field",
            path.display()
        )),
    }
}
