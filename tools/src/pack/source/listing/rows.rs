//! The rows of a listing, read one at a time: CSV through [`CsvReader`]
//! with a header naming the columns, or JSONL objects.

use std::io::{BufRead, Read};
use std::path::Path;

use serde::Deserialize;

use super::csv::{CsvError, CsvReader};
use crate::error::{Result, ToolsError};

/// The largest record (one CSV record, one JSONL line).
pub const MAX_RECORD_BYTES: usize = 1 << 20;

/// One row of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The line the row starts on (1-based).
    pub line: usize,
    pub path: String,
    pub label: Option<String>,
    pub caption: Option<String>,
}

/// An error at line `line` of the listing `src`.
pub(crate) fn at(src: &Path, line: usize, reason: impl std::fmt::Display) -> ToolsError {
    ToolsError::Config(format!("{} line {line}: {reason}", src.display()))
}

/// Reads the rows of the listing `src` from `reader`.
#[derive(Debug)]
pub struct Rows<'a, R> {
    src: &'a Path,
    format: RowFormat<R>,
}

#[derive(Debug)]
enum RowFormat<R> {
    Csv {
        csv: CsvReader<R>,
        /// The columns of `path`, `label` and `caption`.
        columns: [Option<usize>; 3],
        path_column: usize,
        width: usize,
    },
    Jsonl {
        reader: R,
        /// Lines read so far.
        lines: usize,
    },
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

impl<'a, R: BufRead> Rows<'a, R> {
    /// The rows of a CSV listing, its header read (and checked) first.
    pub fn csv(src: &'a Path, reader: R) -> Result<Self> {
        let mut csv = CsvReader::new(reader, MAX_RECORD_BYTES, 3);
        let header = csv
            .next_record()
            .map_err(|error| bad_csv(src, &error))?
            .ok_or_else(|| {
                ToolsError::Config(format!("{}: empty, no header row", src.display()))
            })?;
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
        let format = RowFormat::Csv {
            csv,
            columns,
            path_column,
            width: header.fields.len(),
        };
        Ok(Self { src, format })
    }

    /// The rows of a JSONL listing.
    pub fn jsonl(src: &'a Path, reader: R) -> Self {
        let format = RowFormat::Jsonl { reader, lines: 0 };
        Self { src, format }
    }

    /// The reader the rows come from.
    pub fn get_ref(&self) -> &R {
        match &self.format {
            RowFormat::Csv { csv, .. } => csv.get_ref(),
            RowFormat::Jsonl { reader, .. } => reader,
        }
    }

    /// The next row, or `None` at the end.
    pub fn next_row(&mut self) -> Result<Option<Row>> {
        let src = self.src;
        match &mut self.format {
            RowFormat::Csv {
                csv,
                columns,
                path_column,
                width,
            } => {
                let Some(record) = csv.next_record().map_err(|error| bad_csv(src, &error))? else {
                    return Ok(None);
                };
                if record.fields.len() != *width {
                    return Err(at(
                        src,
                        record.line,
                        format!("{} fields, the header has {width}", record.fields.len()),
                    ));
                }
                let mut fields = record.fields.into_iter().map(Some).collect::<Vec<_>>();
                let mut take = |column: Option<usize>| column.and_then(|i| fields[i].take());
                Ok(Some(Row {
                    line: record.line,
                    path: take(Some(*path_column)).unwrap_or_default(),
                    label: take(columns[1]).filter(|label| !label.is_empty()),
                    caption: take(columns[2]),
                }))
            }
            RowFormat::Jsonl { reader, lines } => next_json_row(src, reader, lines),
        }
    }
}

impl<R: BufRead> Iterator for Rows<'_, R> {
    type Item = Result<Row>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

fn bad_csv(src: &Path, error: &CsvError) -> ToolsError {
    ToolsError::Config(format!("{}: {error}", src.display()))
}

/// The next row of a JSONL listing, blank lines skipped.
fn next_json_row(src: &Path, mut reader: impl BufRead, lines: &mut usize) -> Result<Option<Row>> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let number = *lines + 1;
        let n = (&mut reader)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| at(src, number, e))?;
        if n == 0 {
            return Ok(None);
        }
        *lines = number;
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
        return Ok(Some(Row {
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
        }));
    }
}
