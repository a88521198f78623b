//! Reading whole columns of a local Parquet file's row groups, for the
//! tools that pack from Parquet (`pack --tokenizer` from a text column,
//! `pack` from an image dataset): byte-array and integer columns, one
//! value per row (`None`: null).

use std::fs::File;
use std::path::Path;

use parquet::column::reader::{get_typed_column_reader, ColumnReader};
use parquet::data_type::{ByteArrayType, DataType, Int32Type, Int64Type};
use parquet::file::reader::RowGroupReader;
use parquet::file::serialized_reader::SerializedFileReader;

use crate::error::{Result, ToolsError};

/// An error about the Parquet file at `path`.
pub fn bad(path: &Path, reason: impl std::fmt::Display) -> ToolsError {
    ToolsError::Config(format!("{}: {reason}", path.display()))
}

/// The reader of `file`, the Parquet file at `path`: its footer read.
pub fn open_reader(path: &Path, file: File) -> Result<SerializedFileReader<File>> {
    SerializedFileReader::new(file)
        .map_err(|e| bad(path, format!("not a readable Parquet file: {e}")))
}

/// One row's value of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Bytes(Vec<u8>),
    Int(i64),
}

/// Leaf column `leaf`'s values of the `rows` rows of `group` (binary or
/// integer columns with one value a row). Errors say what is wrong.
pub fn read_values(
    group: &dyn RowGroupReader,
    leaf: usize,
    rows: usize,
) -> Result<Vec<Option<Value>>, String> {
    let max_def = group.metadata().schema_descr().column(leaf).max_def_level();
    let reader = group.get_column_reader(leaf).map_err(|e| e.to_string())?;
    match &reader {
        ColumnReader::ByteArrayColumnReader(_) => {
            typed::<ByteArrayType>(reader, rows, max_def, |v| Value::Bytes(v.data().to_vec()))
        }
        ColumnReader::Int32ColumnReader(_) => {
            typed::<Int32Type>(reader, rows, max_def, |v| Value::Int(i64::from(v)))
        }
        ColumnReader::Int64ColumnReader(_) => typed::<Int64Type>(reader, rows, max_def, Value::Int),
        _ => Err("only binary, string and integer columns are read here".into()),
    }
}

/// The `rows` values of a column of type `T`, each made a [`Value`] by
/// `wrap`; a row whose definition level is below `max_def` is null.
fn typed<T: DataType>(
    reader: ColumnReader,
    rows: usize,
    max_def: i16,
    wrap: impl Fn(T::T) -> Value,
) -> Result<Vec<Option<Value>>, String> {
    let mut reader = get_typed_column_reader::<T>(reader);
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
    let mut values = values.into_iter().map(wrap);
    if max_def == 0 {
        return Ok(values.map(Some).collect());
    }
    Ok(def
        .iter()
        .map(|&d| if d == max_def { values.next() } else { None })
        .collect())
}
