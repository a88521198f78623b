//! A Parquet source: the rows of `.parquet` files (a file, or a directory's
//! files in name order) packed as samples into tar shards. Each row is a
//! sample keyed `FILE/ROW` (the file's name without `.parquet`, dots made
//! `_`; the row 0-based, 9 digits); its columns become fields by kind:
//!
//! | column | field |
//! |---|---|
//! | image (a Hugging Face `Image` struct, or an image-named binary) | `jpg`, `png` or `webp`, by the bytes |
//! | integer (a label) | `cls` (a `ClassLabel`'s names are the classes) |
//! | string | `txt` |
//! | other binary | `bin` |
//!
//! A second column of a kind is `NAME.EXT`. Lists, floats and nested
//! columns are left out (and named in the warning). A null is a field the
//! sample lacks.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use tributary_common::manifest::ColumnKind;
use tributary_io::parquet::schema::{self, ColumnRead};

use super::files::{io_err, sorted_entries};
use super::format::SourceFormat;
use super::sample::{SourceField, SourceSample};
use super::stream::{Samples, Source};
use crate::error::Result;
use crate::table::rows::{bad, open_reader, read_values, Value};

/// Parquet files whose rows are packed.
#[derive(Debug)]
pub struct ParquetFiles {
    files: Vec<PathBuf>,
    /// The columns packed, with their fields' extensions.
    columns: Vec<(ColumnRead, String)>,
    classes: Vec<String>,
    /// Columns left out, `name (type)`.
    pub left_out: Vec<String>,
}

fn open_file(path: &Path) -> Result<SerializedFileReader<File>> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    open_reader(path, file)
}

impl ParquetFiles {
    /// `src`: a `.parquet` file, or a directory of them (walked in name
    /// order). The first file's columns say what is packed.
    pub fn open(src: &Path) -> Result<Self> {
        let mut files = Vec::new();
        collect(src, &mut files)?;
        let first = files.first().ok_or_else(|| bad(src, "no .parquet files"))?;
        let reader = open_file(first)?;
        let metadata = reader.metadata().file_metadata();
        let (table, classes) =
            schema::columns(metadata.schema_descr(), metadata.key_value_metadata());
        let mut columns = Vec::new();
        let mut left_out = Vec::new();
        let mut used = std::collections::HashSet::new();
        for column in &table {
            let ext = match column.kind {
                ColumnKind::Image => "jpg",
                ColumnKind::Label => "cls",
                ColumnKind::Text => "txt",
                ColumnKind::Bytes => "bin",
                ColumnKind::Array | ColumnKind::Json => {
                    left_out.push(format!("{} ({})", column.name, column.parquet_type));
                    continue;
                }
            };
            let read = schema::read_plan(
                metadata.schema_descr(),
                &column.name,
                column.kind == ColumnKind::Image,
            )
            .map_err(|e| bad(first, e))?;
            // The first column of a kind takes the plain extension.
            let ext = if used.insert(ext) {
                ext.to_owned()
            } else {
                format!("{}.{ext}", column.name.replace('.', "_"))
            };
            columns.push((read, ext));
        }
        if !left_out.is_empty() {
            tracing::warn!(
                src = %src.display(),
                "columns left out (lists, floats and nested values have no tar field): {}",
                left_out.join(", ")
            );
        }
        if columns.is_empty() {
            return Err(bad(
                first,
                "no column to pack (images, integers, strings or binary)",
            ));
        }
        Ok(Self {
            files,
            columns,
            classes,
            left_out,
        })
    }

    /// File `f` opened, and the leaf of each packed column in it.
    fn open_nth(&self, f: usize) -> Result<(SerializedFileReader<File>, Vec<usize>)> {
        let path = &self.files[f];
        let reader = open_file(path)?;
        let descr = reader.metadata().file_metadata().schema_descr_ptr();
        let leaves = self
            .columns
            .iter()
            .map(|(read, _)| {
                schema::read_plan(&descr, &read.name, read.kind == ColumnKind::Image)
                    .map(|r| r.leaf)
                    .map_err(|e| bad(path, format!("{e} (the first file has it)")))
            })
            .collect::<Result<_>>()?;
        Ok((reader, leaves))
    }

    /// The samples of row group `g` of file `f`, whose first row is `row`.
    fn group_samples(
        &self,
        f: usize,
        reader: &SerializedFileReader<File>,
        leaves: &[usize],
        g: usize,
        row: u64,
    ) -> Result<Vec<SourceSample>> {
        let path = &self.files[f];
        let stem = path
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_end_matches(".parquet")
                    .replace('.', "_")
            })
            .unwrap_or_default();
        let group = reader
            .get_row_group(g)
            .map_err(|e| bad(path, format!("row group {g}: {e}")))?;
        let rows = group.metadata().num_rows().max(0) as usize;
        let mut columns = Vec::with_capacity(self.columns.len());
        for ((read, ext), &leaf) in self.columns.iter().zip(leaves) {
            let values = read_values(group.as_ref(), leaf, rows)
                .map_err(|e| bad(path, format!("row group {g}, column `{}`: {e}", read.name)))?;
            columns.push((values, ext));
        }
        Ok((0..rows)
            .map(|i| {
                let mut fields: Vec<SourceField> = columns
                    .iter_mut()
                    .filter_map(|(values, ext)| {
                        Some(match values[i].take()? {
                            Value::Int(n) => SourceField::inline(ext, n.to_string().into_bytes()),
                            Value::Bytes(bytes) if ext.as_str() == "jpg" => {
                                SourceField::inline(image_ext(&bytes), bytes)
                            }
                            Value::Bytes(bytes) => SourceField::inline(ext, bytes),
                        })
                    })
                    .collect();
                fields.sort_by(|a, b| a.ext.cmp(&b.ext));
                SourceSample {
                    key: format!("{stem}/{:09}", row + i as u64),
                    fields,
                }
            })
            .collect())
    }
}

/// The file a pass is reading: its index, reader, leaves, next row group
/// and that row group's first row.
type OpenFile = (usize, SerializedFileReader<File>, Vec<usize>, usize, u64);

/// A pass over the rows of every file, a row group in memory at a time.
struct Rows<'a> {
    source: &'a ParquetFiles,
    next_file: usize,
    open: Option<OpenFile>,
    pending: std::collections::VecDeque<SourceSample>,
    failed: bool,
}

impl Iterator for Rows<'_> {
    type Item = Result<SourceSample>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(sample) = self.pending.pop_front() {
                return Some(Ok(sample));
            }
            if self.failed {
                return None;
            }
            match self.open.as_mut() {
                Some((f, reader, leaves, g, row)) if *g < reader.num_row_groups() => {
                    match self.source.group_samples(*f, reader, leaves, *g, *row) {
                        Ok(samples) => {
                            *g += 1;
                            *row += samples.len() as u64;
                            self.pending.extend(samples);
                        }
                        Err(error) => {
                            self.failed = true;
                            return Some(Err(error));
                        }
                    }
                }
                _ => {
                    let f = self.next_file;
                    if f >= self.source.files.len() {
                        return None;
                    }
                    self.next_file += 1;
                    match self.source.open_nth(f) {
                        Ok((reader, leaves)) => self.open = Some((f, reader, leaves, 0, 0)),
                        Err(error) => {
                            self.failed = true;
                            return Some(Err(error));
                        }
                    }
                }
            }
        }
    }
}

/// The extension an encoded image's bytes call for.
fn image_ext(bytes: &[u8]) -> &'static str {
    if bytes.starts_with(b"\x89PNG") {
        "png"
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        "webp"
    } else {
        "jpg"
    }
}

fn collect(src: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::metadata(src).map_err(|e| io_err(src, e))?;
    if meta.is_file() {
        files.push(src.to_owned());
        return Ok(());
    }
    for (_, path, meta) in sorted_entries(src)? {
        if meta.is_dir() {
            collect(&path, files)?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            files.push(path);
        }
    }
    Ok(())
}

impl Source for ParquetFiles {
    fn format(&self) -> SourceFormat {
        SourceFormat::Parquet
    }

    fn classes(&self) -> &[String] {
        &self.classes
    }

    fn samples(&self) -> Samples<'_> {
        Box::new(Rows {
            source: self,
            next_file: 0,
            open: None,
            pending: std::collections::VecDeque::new(),
            failed: false,
        })
    }
}
