//! Reading whole columns of a local Parquet file's row groups, for the
//! tools that pack from Parquet (`pack --tokenizer` from a text column,
//! `pack` from an image dataset): byte-array and integer columns, one
//! value per row (`None`: null).

use parquet::column::reader::ColumnReader;
use parquet::file::reader::RowGroupReader;

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
    match group.get_column_reader(leaf).map_err(|e| e.to_string())? {
        ColumnReader::ByteArrayColumnReader(mut reader) => {
            let mut values = Vec::new();
            let def = read_all(
                rows,
                |def, values_out: &mut Vec<_>| {
                    reader.read_records(rows, Some(def), None, values_out)
                },
                &mut values,
            )?;
            Ok(spread(
                &def,
                max_def,
                values.into_iter().map(|v| Value::Bytes(v.data().to_vec())),
            ))
        }
        ColumnReader::Int32ColumnReader(mut reader) => {
            let mut values = Vec::new();
            let def = read_all(
                rows,
                |def, values_out: &mut Vec<_>| {
                    reader.read_records(rows, Some(def), None, values_out)
                },
                &mut values,
            )?;
            Ok(spread(
                &def,
                max_def,
                values.into_iter().map(|v| Value::Int(i64::from(v))),
            ))
        }
        ColumnReader::Int64ColumnReader(mut reader) => {
            let mut values = Vec::new();
            let def = read_all(
                rows,
                |def, values_out: &mut Vec<_>| {
                    reader.read_records(rows, Some(def), None, values_out)
                },
                &mut values,
            )?;
            Ok(spread(&def, max_def, values.into_iter().map(Value::Int)))
        }
        _ => Err("only binary, string and integer columns are read here".into()),
    }
}

/// Reads `rows` records with `read` (which appends levels and values),
/// returning the definition levels.
fn read_all<T>(
    rows: usize,
    mut read: impl FnMut(&mut Vec<i16>, &mut Vec<T>) -> parquet::errors::Result<(usize, usize, usize)>,
    values: &mut Vec<T>,
) -> Result<Vec<i16>, String> {
    let mut def = Vec::new();
    let mut got = 0;
    while got < rows {
        let (records, _, _) = read(&mut def, values).map_err(|e| e.to_string())?;
        if records == 0 {
            break;
        }
        got += records;
    }
    if got != rows {
        return Err(format!("{got} rows where the footer promises {rows}"));
    }
    Ok(def)
}

/// The values in their rows: a row whose level is below `max_def` is null.
fn spread(def: &[i16], max_def: i16, values: impl Iterator<Item = Value>) -> Vec<Option<Value>> {
    let mut values = values;
    if max_def == 0 {
        return values.map(Some).collect();
    }
    def.iter()
        .map(|&d| if d == max_def { values.next() } else { None })
        .collect()
}
