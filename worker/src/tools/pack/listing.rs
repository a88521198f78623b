//! Listings: a CSV or JSONL file naming one sample per row.
//!
//! - **CSV** (RFC 4180, see `pack::csv`): a header row naming the
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

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use super::csv::CsvReader;
use super::source::{io_err, FieldData, Source, SourceField, SourceFormat, SourceSample};
use crate::error::{Result, WorkerError};

/// The largest listing file (its rows, captions included, are held in
/// memory until the samples are packed).
pub const MAX_LISTING_BYTES: u64 = 1 << 30;
/// The largest record (one CSV record, one JSONL line).
pub const MAX_RECORD_BYTES: usize = 1 << 20;
/// The most classes a listing may name (integer labels: the largest label
/// plus one).
pub const MAX_LISTED_CLASSES: usize = 1 << 20;
/// The longest field extension taken from a listed file's name.
const MAX_EXT_BYTES: usize = 32;

/// One row of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The line the row starts on (1-based).
    pub line: usize,
    pub path: String,
    pub label: Option<String>,
    pub caption: Option<String>,
}

fn at(src: &Path, line: usize, reason: impl std::fmt::Display) -> WorkerError {
    WorkerError::Config(format!("{} line {line}: {reason}", src.display()))
}

/// Reads the listing `src` (CSV, or JSONL where the name ends in `.jsonl`
/// or `.ndjson`) and describes its samples.
pub fn scan_listing(src: &Path) -> Result<Source> {
    let meta = std::fs::metadata(src).map_err(|e| io_err(src, e))?;
    if !meta.is_file() {
        return Err(WorkerError::Config(format!(
            "{}: not a file, so not a listing",
            src.display()
        )));
    }
    if meta.len() > MAX_LISTING_BYTES {
        return Err(WorkerError::Config(format!(
            "{}: {} bytes, over the {MAX_LISTING_BYTES}-byte limit of a listing (split it)",
            src.display(),
            meta.len()
        )));
    }
    let file = std::fs::File::open(src).map_err(|e| io_err(src, e))?;
    let mut reader = BufReader::new(file.take(MAX_LISTING_BYTES + 1));
    let name = src.to_string_lossy().to_ascii_lowercase();
    let rows = if name.ends_with(".jsonl") || name.ends_with(".ndjson") {
        read_jsonl(src, &mut reader)?
    } else {
        read_csv(src, &mut reader)?
    };
    if reader.get_ref().limit() == 0 {
        return Err(WorkerError::Config(format!(
            "{}: grew over the {MAX_LISTING_BYTES}-byte limit of a listing while read",
            src.display()
        )));
    }
    if rows.is_empty() {
        return Err(WorkerError::Config(format!(
            "{}: a listing without rows, nothing to pack",
            src.display()
        )));
    }
    samples(src, &rows)
}

/// The rows of a CSV listing.
pub fn read_csv(src: &Path, reader: impl BufRead) -> Result<Vec<Row>> {
    let mut csv = CsvReader::new(reader, MAX_RECORD_BYTES, 3);
    let bad =
        |error: super::csv::CsvError| WorkerError::Config(format!("{}: {error}", src.display()));
    let header = csv
        .next_record()
        .map_err(bad)?
        .ok_or_else(|| WorkerError::Config(format!("{}: empty, no header row", src.display())))?;
    let mut columns: [Option<usize>; 3] = [None; 3];
    for (i, name) in header.fields.iter().enumerate() {
        let name = name.trim_start_matches('\u{feff}').trim();
        let slot = match name.to_ascii_lowercase().as_str() {
            "path" => 0,
            "label" => 1,
            "caption" => 2,
            _ => {
                return Err(at(
                    src,
                    header.line,
                    format!(
                        "unknown column `{name}` in the header (expected path, label, caption)"
                    ),
                ))
            }
        };
        if columns[slot].replace(i).is_some() {
            return Err(at(
                src,
                header.line,
                format!("column `{name}` twice in the header"),
            ));
        }
    }
    let Some(path_column) = columns[0] else {
        return Err(at(
            src,
            header.line,
            "the header has no `path` column (expected path,label[,caption])",
        ));
    };
    let mut rows = Vec::new();
    while let Some(record) = csv.next_record().map_err(bad)? {
        if record.fields.len() != header.fields.len() {
            return Err(at(
                src,
                record.line,
                format!(
                    "{} fields, the header has {}",
                    record.fields.len(),
                    header.fields.len()
                ),
            ));
        }
        let mut fields = record.fields.into_iter().map(Some).collect::<Vec<_>>();
        let mut take = |column: Option<usize>| column.and_then(|i| fields[i].take());
        rows.push(Row {
            line: record.line,
            path: take(Some(path_column)).unwrap_or_default(),
            label: take(columns[1]).filter(|label| !label.is_empty()),
            caption: take(columns[2]),
        });
    }
    Ok(rows)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonRow {
    path: String,
    #[serde(default)]
    label: Option<JsonLabel>,
    #[serde(default)]
    caption: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum JsonLabel {
    Index(u64),
    Name(String),
}

/// The rows of a JSONL listing.
pub fn read_jsonl(src: &Path, mut reader: impl BufRead) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        let n = (&mut reader)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| at(src, number, e))?;
        if n == 0 {
            break;
        }
        if line.len() > MAX_RECORD_BYTES {
            return Err(at(
                src,
                number,
                format!("longer than {MAX_RECORD_BYTES} bytes"),
            ));
        }
        let text = std::str::from_utf8(&line).map_err(|_| at(src, number, "not UTF-8"))?;
        let text = text.trim_start_matches('\u{feff}').trim();
        if text.is_empty() {
            continue;
        }
        let row: JsonRow = serde_json::from_str(text).map_err(|e| {
            // Its line is always 1: the position that helps is the column.
            let reason = e.to_string().replace(" at line 1 column ", " at column ");
            at(src, number, format!("not a listing object ({reason})"))
        })?;
        rows.push(Row {
            line: number,
            path: row.path,
            label: row
                .label
                .map(|label| match label {
                    JsonLabel::Index(index) => index.to_string(),
                    JsonLabel::Name(name) => name,
                })
                .filter(|label| !label.is_empty()),
            caption: row.caption,
        });
    }
    Ok(rows)
}

/// A label that is a class index: digits without a leading zero.
fn integer_label(label: &str) -> Option<u64> {
    let canonical = label == "0"
        || (!label.starts_with('0')
            && !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_digit()));
    canonical.then(|| label.parse().ok()).flatten()
}

/// The classes of `rows` and each label's index (see the module docs).
pub fn classes(src: &Path, rows: &[Row]) -> Result<(Vec<String>, HashMap<String, u32>)> {
    let names: BTreeSet<&str> = rows.iter().filter_map(|r| r.label.as_deref()).collect();
    if names.iter().all(|name| integer_label(name).is_some()) {
        let mut index = HashMap::new();
        for row in rows {
            let Some(label) = &row.label else { continue };
            let value = integer_label(label).unwrap_or(u64::MAX);
            if value >= MAX_LISTED_CLASSES as u64 {
                return Err(at(
                    src,
                    row.line,
                    format!(
                        "integer label {label} is a class index, at most {}",
                        MAX_LISTED_CLASSES - 1
                    ),
                ));
            }
            index.insert(label.clone(), value as u32);
        }
        let count = index.values().max().map_or(0, |max| *max as usize + 1);
        return Ok(((0..count).map(|i| i.to_string()).collect(), index));
    }
    if names.len() > MAX_LISTED_CLASSES {
        return Err(WorkerError::Config(format!(
            "{}: {} distinct labels, over the limit of {MAX_LISTED_CLASSES} classes",
            src.display(),
            names.len()
        )));
    }
    let index = names
        .iter()
        .enumerate()
        .map(|(i, name)| ((*name).to_owned(), i as u32))
        .collect();
    Ok((names.into_iter().map(str::to_owned).collect(), index))
}

/// The field extension of the file at `path`: by its magic bytes where it
/// is a JPEG, PNG or WebP image, else its lowercased last extension.
pub fn file_ext(path: &Path) -> std::result::Result<String, String> {
    let mut head = [0u8; 12];
    let mut file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
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

/// The samples of `rows`, files checked and typed in parallel.
fn samples(src: &Path, rows: &[Row]) -> Result<Source> {
    use rayon::prelude::*;
    let (classes, index) = classes(src, rows)?;
    let base = src.parent().unwrap_or(Path::new(""));
    let samples = rows
        .par_iter()
        .enumerate()
        .map(|(i, row)| {
            let bad = |reason: String| at(src, row.line, reason);
            if row.path.is_empty() {
                return Err(bad("an empty path".into()));
            }
            let path = base.join(&row.path);
            let meta =
                std::fs::metadata(&path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
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
                let class = index
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
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Source {
        format: SourceFormat::Listing,
        classes,
        samples,
        skipped: 0,
    })
}
