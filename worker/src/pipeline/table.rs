//! Parquet shards: a span's rows planned as reads of the projected
//! columns' pages (or whole column chunks, where a file has no offset
//! index) of each row group it touches, and a read's bytes decoded into
//! samples whose fields are the columns, by name, each value in the form
//! its field's decoder takes: an image's or a binary's bytes, a string's
//! UTF-8, an integer in decimal (a label), a float or boolean as JSON, a
//! list of numbers as an `.npy` array.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::Type as Physical;
use parquet::column::page::PageReader;
use parquet::column::reader::{get_column_reader, get_typed_column_reader, ColumnReader};
use parquet::data_type::{
    BoolType, ByteArrayType, DataType, DoubleType, FloatType, Int32Type, Int64Type,
};
use parquet::file::metadata::page_index::RowGroupPageIndex;
use parquet::file::properties::ReaderProperties;
use parquet::file::serialized_reader::{SerializedPageReader, SerializedRowGroupReader};
use parquet::record::reader::RowIter;
use parquet::schema::types::Type;
use tributary_common::manifest::ColumnKind;
use tributary_common::plan::span::Span;
use tributary_common::sample::{Field, Sample};
use tributary_io::parquet::schema::{read_plan, ColumnRead};
use tributary_io::parquet::{Footer, SparseFile};

/// The reads of one row group: which rows, which columns, which bytes.
#[derive(Debug, Clone)]
pub struct RowsRead {
    pub footer: Arc<Footer>,
    pub group: usize,
    /// The row group's first row in the file.
    pub first_row: u32,
    pub columns: Arc<[ColumnRead]>,
    /// The bytes to fetch, sorted, not overlapping.
    pub ranges: Vec<Range<u64>>,
}

impl PartialEq for RowsRead {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.footer, &other.footer)
            && self.group == other.group
            && self.ranges == other.ranges
            && self.columns == other.columns
    }
}
impl Eq for RowsRead {}

impl RowsRead {
    /// About the bytes this read's pages decompress to: its fetched bytes
    /// scaled by its columns' uncompressed to compressed ratio in the row
    /// group (as the footer records them; a footer that lies only changes
    /// how much of the byte budget the read waits for).
    pub fn uncompressed_bytes(&self) -> u64 {
        let group = self.footer.metadata.row_group(self.group);
        let leaves = self.columns.iter().flat_map(|c| {
            if c.nested.is_empty() {
                std::slice::from_ref(&c.leaf)
            } else {
                &c.nested[..]
            }
        });
        let (mut compressed, mut uncompressed) = (0u128, 0u128);
        for &leaf in leaves {
            let column = group.column(leaf);
            compressed += column.compressed_size().max(0) as u128;
            uncompressed += column.uncompressed_size().max(0) as u128;
        }
        let fetched: u128 = self
            .ranges
            .iter()
            .map(|r| u128::from(r.end - r.start))
            .sum();
        if compressed == 0 {
            return fetched.min(u128::from(u64::MAX)) as u64;
        }
        (fetched.saturating_mul(uncompressed) / compressed).min(u128::from(u64::MAX)) as u64
    }
}

/// How each of `columns` (name and kind, as the manifest lists them) is
/// read in the file `footer` describes.
pub fn column_reads(
    footer: &Footer,
    columns: &[(String, ColumnKind)],
) -> Result<Arc<[ColumnRead]>, String> {
    let schema = footer.metadata.file_metadata().schema_descr();
    columns
        .iter()
        .map(|(name, kind)| {
            let mut read = read_plan(schema, name, *kind == ColumnKind::Image)?;
            read.kind = *kind;
            Ok(read)
        })
        .collect()
}

/// The reads of `span` (rows of the file `footer` describes, whose row
/// groups start at `starts`), each rows `want` of the file: one per row
/// group it touches, or, where every column has an offset index, several
/// of about `max_read_bytes` each (a row group can be hundreds of MB: read
/// whole, it would delay the first batch and hold its bytes at once).
pub fn plan_rows(
    footer: &Arc<Footer>,
    starts: &[u32],
    columns: &Arc<[ColumnRead]>,
    span: &Span,
    max_read_bytes: u64,
) -> Vec<(Range<u32>, RowsRead)> {
    let mut reads = Vec::new();
    let first = starts
        .partition_point(|&s| s <= span.start)
        .saturating_sub(1);
    for group in first..starts.len().saturating_sub(1) {
        let (g0, g1) = (starts[group], starts[group + 1]);
        if g0 >= span.end {
            break;
        }
        let want = span.start.max(g0)..span.end.min(g1);
        if want.is_empty() {
            continue;
        }
        let whole = group_read(footer, columns, group, g0, want.clone());
        let bytes: u64 = whole.ranges.iter().map(|r| r.end - r.start).sum();
        let paged = columns
            .iter()
            .all(|c| c.nested.is_empty() && footer.pages(group, c.leaf).is_some());
        if !paged || bytes <= max_read_bytes.max(1) || want.len() < 2 {
            reads.push((want, whole));
            continue;
        }
        // Rows in parts of about `max_read_bytes`, cut where a page of the
        // largest column starts (so that none of its pages is fetched
        // twice); each part fetches the pages holding its rows.
        let largest = columns
            .iter()
            .max_by_key(|c| {
                footer
                    .ranges(group, c.leaf, want.start - g0..want.end - g0)
                    .iter()
                    .map(|r| r.end - r.start)
                    .sum::<u64>()
            })
            .map(|c| c.leaf);
        let pages = largest
            .and_then(|leaf| footer.pages(group, leaf))
            .unwrap_or(&[]);
        let mut at = want.start;
        let mut held = 0u64;
        for (p, page) in pages.iter().enumerate() {
            let first = g0 + page.first_row_index as u32;
            let end = pages
                .get(p + 1)
                .map_or(g1, |next| g0 + next.first_row_index as u32);
            if end <= want.start || first >= want.end {
                continue;
            }
            if first > at && held >= max_read_bytes {
                reads.push((at..first, group_read(footer, columns, group, g0, at..first)));
                at = first;
                held = 0;
            }
            held += page.compressed_page_size as u64;
        }
        reads.push((
            at..want.end,
            group_read(footer, columns, group, g0, at..want.end),
        ));
    }
    reads
}

/// The read of rows `rows` (of the file) of row group `group`, whose
/// first row is `g0`: the pages (or column chunks) of `columns` they need,
/// merged where they touch.
fn group_read(
    footer: &Arc<Footer>,
    columns: &Arc<[ColumnRead]>,
    group: usize,
    g0: u32,
    rows: Range<u32>,
) -> RowsRead {
    let relative = rows.start - g0..rows.end - g0;
    let mut ranges: Vec<Range<u64>> = columns
        .iter()
        .flat_map(|c| {
            if c.nested.is_empty() {
                footer.ranges(group, c.leaf, relative.clone())
            } else {
                // Nested values are assembled from whole column chunks.
                c.nested
                    .iter()
                    .map(|&leaf| footer.chunk_range(group, leaf))
                    .collect()
            }
        })
        .collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    RowsRead {
        footer: Arc::clone(footer),
        group,
        first_row: g0,
        columns: Arc::clone(columns),
        ranges: merged,
    }
}

/// The samples of rows `want` (of the file) from the fetched `parts` of
/// `read`: ids from `first_id`, keys `NAME#ROW`. Errors say which column
/// and row group, and why; a panic in the `parquet` crate's decoding (a
/// hostile page) is one of them.
pub fn read_rows(
    read: &RowsRead,
    parts: Vec<(u64, Bytes)>,
    want: Range<u32>,
    first_id: u64,
    name: &str,
) -> Result<Vec<Sample>, String> {
    let file = Arc::new(SparseFile::new(read.footer.size, parts));
    let skip = (want.start - read.first_row) as usize;
    let rows = want.len();
    let columns: Vec<Vec<Option<Bytes>>> = read
        .columns
        .iter()
        .map(|column| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                read_column(read, &file, column, skip, rows)
            }))
            .unwrap_or_else(|_| Err("the page decoder gave up".into()))
            .map_err(|e| format!("row group {}, column `{}`: {e}", read.group, column.name))
        })
        .collect::<Result<_, _>>()?;
    let mut samples = Vec::with_capacity(rows);
    for (i, row) in want.clone().enumerate() {
        let mut len = 0;
        for values in &columns {
            len += values[i].as_ref().map_or(0, Bytes::len);
        }
        // One allocation per sample, as the tar path's samples have.
        let mut buf = Vec::with_capacity(len);
        for values in &columns {
            if let Some(value) = &values[i] {
                buf.extend_from_slice(value);
            }
        }
        let buf = Bytes::from(buf);
        let mut at = 0;
        let fields = read
            .columns
            .iter()
            .zip(&columns)
            .filter_map(|(column, values)| {
                let value = values[i].as_ref()?;
                at += value.len();
                Some(Field {
                    ext: column.name.clone(),
                    data: buf.slice(at - value.len()..at),
                })
            })
            .collect();
        samples.push(Sample {
            id: first_id + u64::from(row),
            key: format!("{name}#{row}"),
            fields,
        });
    }
    Ok(samples)
}

/// Column `column`'s values of `rows` rows after the first `skip` of row
/// group `read.group`, one per row (`None`: null), each encoded for its
/// kind.
fn read_column(
    read: &RowsRead,
    file: &Arc<SparseFile>,
    column: &ColumnRead,
    skip: usize,
    rows: usize,
) -> Result<Vec<Option<Bytes>>, String> {
    if !column.nested.is_empty() {
        return read_nested(read, file, column, skip, rows);
    }
    let footer = &read.footer;
    let group = footer.metadata.row_group(read.group);
    let chunk = group.column(column.leaf);
    let pages = footer.pages(read.group, column.leaf).map(<[_]>::to_vec);
    let page_reader: Box<dyn PageReader> = Box::new(
        SerializedPageReader::new(Arc::clone(file), chunk, group.num_rows() as usize, pages)
            .map_err(|e| e.to_string())?,
    );
    let descr = footer
        .metadata
        .file_metadata()
        .schema_descr()
        .column(column.leaf);
    let (max_def, max_rep) = (descr.max_def_level(), descr.max_rep_level());
    let reader = get_column_reader(descr, page_reader);
    let shape = Shape {
        skip,
        rows,
        max_def,
        max_rep,
    };
    match column.physical {
        Physical::BYTE_ARRAY => {
            shape.values::<ByteArrayType>(reader, |v| Bytes::copy_from_slice(v.data()))
        }
        Physical::INT32 if column.list => shape.arrays::<Int32Type>(reader, "<i4"),
        Physical::INT64 if column.list => shape.arrays::<Int64Type>(reader, "<i8"),
        Physical::FLOAT if column.list => shape.arrays::<FloatType>(reader, "<f4"),
        Physical::DOUBLE if column.list => shape.arrays::<DoubleType>(reader, "<f8"),
        Physical::INT32 => shape.values::<Int32Type>(reader, |v| Bytes::from(v.to_string())),
        Physical::INT64 => shape.values::<Int64Type>(reader, |v| Bytes::from(v.to_string())),
        Physical::FLOAT => shape.values::<FloatType>(reader, |v| json(f64::from(*v))),
        Physical::DOUBLE => shape.values::<DoubleType>(reader, |v| json(*v)),
        Physical::BOOLEAN => shape.values::<BoolType>(reader, |v| json(*v)),
        other => Err(format!("values of physical type {other} are not read yet")),
    }
}

/// A nested column's values of `rows` rows after the first `skip`, each
/// as JSON (`None`: null), assembled by the `parquet` crate's record
/// reader from the column's whole column chunks.
fn read_nested(
    read: &RowsRead,
    file: &Arc<SparseFile>,
    column: &ColumnRead,
    skip: usize,
    rows: usize,
) -> Result<Vec<Option<Bytes>>, String> {
    let footer = &read.footer;
    let metadata = footer.metadata.row_group(read.group);
    let props = Arc::new(ReaderProperties::builder().build());
    let reader = SerializedRowGroupReader::new(
        Arc::clone(file),
        metadata,
        RowGroupPageIndex::new(read.group, None),
        props,
    )
    .map_err(|e| e.to_string())?;
    let field = footer
        .metadata
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .iter()
        .find(|f| f.name() == column.name)
        .ok_or_else(|| format!("no column `{}`", column.name))?;
    let projection = Type::group_type_builder("schema")
        .with_fields(vec![Arc::clone(field)])
        .build()
        .map_err(|e| e.to_string())?;
    let values = RowIter::from_row_group(Some(projection), &reader)
        .map_err(|e| e.to_string())?
        .skip(skip)
        .take(rows)
        .map(|row| {
            let row = row.map_err(|e| e.to_string())?;
            let value = row
                .get_column_iter()
                .next()
                .map_or(serde_json::Value::Null, |(_, field)| field.to_json_value());
            Ok((!value.is_null()).then(|| json(value)))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if values.len() != rows {
        return Err(format!(
            "has {} rows where its footer promises {}",
            values.len() + skip,
            rows + skip
        ));
    }
    Ok(values)
}

fn json<T: serde::Serialize>(value: T) -> Bytes {
    Bytes::from(serde_json::to_vec(&value).unwrap_or_else(|_| b"null".to_vec()))
}

/// Which rows of a column chunk are read, and its levels.
struct Shape {
    skip: usize,
    rows: usize,
    max_def: i16,
    max_rep: i16,
}

impl Shape {
    /// The levels and non-null values of the rows.
    fn read<T: DataType>(&self, reader: ColumnReader) -> Result<Levels<T::T>, String> {
        let mut reader = get_typed_column_reader::<T>(reader);
        let skipped = reader.skip_records(self.skip).map_err(|e| e.to_string())?;
        if skipped != self.skip {
            return Err(format!(
                "has {skipped} rows before the read, {} expected",
                self.skip
            ));
        }
        let (mut values, mut def, mut rep) = (Vec::new(), Vec::new(), Vec::new());
        let mut got = 0;
        while got < self.rows {
            let (records, _, _) = reader
                .read_records(self.rows - got, Some(&mut def), Some(&mut rep), &mut values)
                .map_err(|e| e.to_string())?;
            if records == 0 {
                break;
            }
            got += records;
        }
        if got != self.rows {
            return Err(format!(
                "has {got} rows where its footer promises {}",
                self.rows
            ));
        }
        Ok(Levels { values, def, rep })
    }

    /// One value per row (`None`: null), encoded by `encode`.
    fn values<T: DataType>(
        &self,
        reader: ColumnReader,
        encode: impl Fn(&T::T) -> Bytes,
    ) -> Result<Vec<Option<Bytes>>, String> {
        let levels = self.read::<T>(reader)?;
        if self.max_def == 0 {
            return Ok(levels.values.iter().map(|v| Some(encode(v))).collect());
        }
        let mut values = levels.values.iter();
        levels
            .def
            .iter()
            .map(|&d| {
                if d == self.max_def {
                    values
                        .next()
                        .map(|v| Some(encode(v)))
                        .ok_or_else(|| "has fewer values than its levels say".to_owned())
                } else {
                    Ok(None)
                }
            })
            .collect()
    }

    /// One `.npy` array of `descr` per row (an empty one for a null or
    /// empty list; null elements are left out).
    fn arrays<T: DataType>(
        &self,
        reader: ColumnReader,
        descr: &str,
    ) -> Result<Vec<Option<Bytes>>, String>
    where
        T::T: Copy + ToLe,
    {
        let levels = self.read::<T>(reader)?;
        let mut rows: Vec<Vec<T::T>> = Vec::with_capacity(self.rows);
        let mut values = levels.values.iter();
        for (i, &d) in levels.def.iter().enumerate() {
            if levels.rep.get(i).copied().unwrap_or(0) == 0 {
                rows.push(Vec::new());
            }
            if d == self.max_def {
                let value = values
                    .next()
                    .ok_or_else(|| "has fewer values than its levels say".to_owned())?;
                rows.last_mut()
                    .ok_or_else(|| "starts inside a list".to_owned())?
                    .push(*value);
            }
        }
        debug_assert!(self.max_rep == 1);
        Ok(rows.iter().map(|row| Some(npy(descr, row))).collect())
    }
}

struct Levels<T> {
    values: Vec<T>,
    def: Vec<i16>,
    rep: Vec<i16>,
}

/// Numbers in little-endian bytes.
pub trait ToLe {
    fn extend_le(&self, out: &mut Vec<u8>);
}

macro_rules! to_le {
    ($($t:ty),*) => {$(
        impl ToLe for $t {
            fn extend_le(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
to_le!(i32, i64, f32, f64);

/// A one-dimensional `.npy` (version 1.0) of `values`.
fn npy<T: ToLe>(descr: &str, values: &[T]) -> Bytes {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
        values.len()
    );
    // Magic, version, header length, then the header padded with spaces
    // and ending in a newline so that the data starts 64-byte aligned.
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + (64 - unpadded % 64) % 64;
    let mut out = Vec::with_capacity(10 + header_len + size_of_val(values));
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    for value in values {
        value.extend_le(&mut out);
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests;
