//! The documents of a Parquet file for `tributary pack --tokenizer`: one
//! row each, the text in a string column (`--text-field`), read a row group
//! at a time. Null texts are skipped.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;

use parquet::basic::Type as Physical;
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;

use crate::error::Result;
use crate::table::rows::{bad, open_reader, read_values, Value};

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

impl ParquetRows {
    /// Opens `file` (at `path`) and finds its string column `field`.
    pub fn open(path: &Path, file: File, field: &str) -> Result<Self> {
        let reader = open_reader(path, file)?;
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
            let texts = read_values(group.as_ref(), self.column, rows)
                .map_err(|e| bad(path, format!("row group {}: {e}", self.next_group)))?;
            for (i, text) in texts.into_iter().enumerate() {
                if let Some(Value::Bytes(text)) = text {
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
