//! The documents of a Parquet file for `tributary pack --tokenizer`: one
//! row each, the text in a string column (`--text-field`), read a row group
//! at a time. Null texts are skipped.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;

use parquet::basic::Type as Physical;
use parquet::column::reader::ColumnReader;
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::file::serialized_reader::SerializedFileReader;

use crate::error::{Result, ToolsError};

/// The rows of one Parquet file's text column, a row group at a time.
pub struct ParquetRows {
    reader: SerializedFileReader<File>,
    column: usize,
    next_group: usize,
    /// `(row, text)` of the row group read last, not yet handed out.
    pending: VecDeque<(u64, String)>,
    /// The first row of the next row group.
    row: u64,
}

impl std::fmt::Debug for ParquetRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetRows")
            .field("column", &self.column)
            .field("next_group", &self.next_group)
            .finish_non_exhaustive()
    }
}

fn bad(path: &Path, reason: impl std::fmt::Display) -> ToolsError {
    ToolsError::Config(format!("{}: {reason}", path.display()))
}

impl ParquetRows {
    /// Opens `file` (at `path`) and finds its string column `field`.
    pub fn open(path: &Path, file: File, field: &str) -> Result<Self> {
        let reader = SerializedFileReader::new(file)
            .map_err(|e| bad(path, format!("not a readable Parquet file: {e}")))?;
        let schema = reader.metadata().file_metadata().schema_descr();
        let column = (0..schema.num_columns())
            .find(|&i| {
                let c = schema.column(i);
                c.path().parts() == [field] && c.physical_type() == Physical::BYTE_ARRAY
            })
            .ok_or_else(|| {
                let names: Vec<String> = (0..schema.num_columns())
                    .map(|i| schema.column(i).path().string())
                    .collect();
                bad(
                    path,
                    format!(
                        "no string column `{field}` (its columns: {}); name it with --text-field",
                        names.join(", ")
                    ),
                )
            })?;
        Ok(Self {
            reader,
            column,
            next_group: 0,
            pending: VecDeque::new(),
            row: 0,
        })
    }

    /// The next non-null text and its row (1-based), or `None` at the end.
    pub fn next(&mut self, path: &Path) -> Result<Option<(u64, String)>> {
        while self.pending.is_empty() {
            if self.next_group >= self.reader.num_row_groups() {
                return Ok(None);
            }
            let group = self
                .reader
                .get_row_group(self.next_group)
                .map_err(|e| bad(path, format!("row group {}: {e}", self.next_group)))?;
            let rows = group.metadata().num_rows().max(0) as usize;
            let texts = read_texts(group.as_ref(), self.column, rows)
                .map_err(|e| bad(path, format!("row group {}: {e}", self.next_group)))?;
            for (i, text) in texts.into_iter().enumerate() {
                if let Some(text) = text {
                    let text = String::from_utf8(text).map_err(|_| {
                        bad(
                            path,
                            format!("row {}: the text is not UTF-8", self.row + i as u64 + 1),
                        )
                    })?;
                    self.pending.push_back((self.row + i as u64 + 1, text));
                }
            }
            self.row += rows as u64;
            self.next_group += 1;
        }
        Ok(self.pending.pop_front())
    }
}

/// Column `column`'s `rows` values of a row group (`None`: null).
fn read_texts(
    group: &dyn RowGroupReader,
    column: usize,
    rows: usize,
) -> std::result::Result<Vec<Option<Vec<u8>>>, String> {
    let ColumnReader::ByteArrayColumnReader(mut reader) =
        group.get_column_reader(column).map_err(|e| e.to_string())?
    else {
        return Err("the text column is not binary".into());
    };
    let (mut values, mut def) = (Vec::new(), Vec::new());
    let mut got = 0;
    while got < rows {
        let (records, _, _) = reader
            .read_records(rows - got, Some(&mut def), None, &mut values)
            .map_err(|e| e.to_string())?;
        if records == 0 {
            break;
        }
        got += records;
    }
    if got != rows {
        return Err(format!("{got} rows where the footer promises {rows}"));
    }
    let max_def = group
        .metadata()
        .schema_descr()
        .column(column)
        .max_def_level();
    let mut values = values.into_iter();
    if max_def == 0 {
        return Ok(values.map(|v| Some(v.data().to_vec())).collect());
    }
    Ok(def
        .iter()
        .map(|&d| {
            if d == max_def {
                values.next().map(|v| v.data().to_vec())
            } else {
                None
            }
        })
        .collect())
}
