//! Parquet files read in place: a file's footer (and page index) read
//! with one ranged GET from its end, bounded against the file's size before
//! it sizes anything, and the byte ranges of the column chunks or pages a
//! read needs. Whole files are never downloaded.
//!
//! - [`Footer`]: a file's decoded, checked metadata, and where each column
//!   chunk (and page) lies.
//! - [`SparseFile`]: the ranges of a file a read fetched, served to the
//!   `parquet` crate's page readers as if they were the file.
//! - [`schema`]: which columns a file has and how each is read.
//! - [`index_file`]: a file's manifest entry from its tail.

pub mod schema;
mod sparse;

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::page_index::offset_index::PageLocation;
use tributary_common::manifest::table::{MAX_ROW_GROUPS, MAX_TAIL_BYTES, MIN_PARQUET_BYTES};
use tributary_common::manifest::{Chunks, RowGroups, ShardEntry};

use crate::error::{IoError, Result};
use crate::location::Location;

pub use sparse::SparseFile;

/// The most leaf columns a file may have.
pub const MAX_LEAVES: usize = 100_000;
/// The largest column chunk a read fetches at once (1 GiB).
pub const MAX_COLUMN_CHUNK_BYTES: u64 = 1 << 30;
/// What an index run reads first from a file's end: most footers fit.
const FIRST_TAIL_READ: u64 = 64 << 10;

/// A Parquet file's metadata, decoded from its tail and checked: every row
/// group's rows, and every column chunk's and page's bytes, lie inside the
/// file before its tail.
#[derive(Debug)]
pub struct Footer {
    pub metadata: ParquetMetaData,
    /// Where the tail (page indexes and footer) starts: data lies below.
    pub tail_start: u64,
    /// The file's size.
    pub size: u64,
}

impl Footer {
    /// Decodes and checks the metadata in `tail`, the last bytes of the
    /// file `url` of `size` bytes. Errors say what is wrong, and where.
    pub fn decode(url: &str, size: u64, tail: Bytes) -> Result<Self> {
        let bad = |reason: String| IoError::Parquet {
            url: url.to_owned(),
            reason,
        };
        let tail_start = size
            .checked_sub(tail.len() as u64)
            .ok_or_else(|| bad("the footer is longer than the file".into()))?;
        let file = SparseFile::new(size, vec![(tail_start, tail)]);
        // The `parquet` crate's decoder is third-party code fed hostile
        // bytes: a panic in it is a bad footer, not a dead process. The
        // offset indexes are read when the tail holds every one of them.
        let decoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let metadata = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Skip)
                .parse_and_finish(&file)?;
            let indexes_in_tail = metadata.row_groups().iter().all(|g| {
                g.columns().iter().all(|c| {
                    c.offset_index_offset()
                        .is_some_and(|offset| offset >= 0 && offset as u64 >= tail_start)
                })
            });
            if !indexes_in_tail {
                return Ok(metadata);
            }
            let mut reader = ParquetMetaDataReader::new_with_metadata(metadata)
                .with_column_index_policy(PageIndexPolicy::Skip)
                .with_offset_index_policy(PageIndexPolicy::Optional);
            reader.read_page_indexes(&file)?;
            reader.finish()
        }))
        .map_err(|_| bad("the footer does not decode (the decoder gave up)".into()))?
        .map_err(|e| bad(format!("the footer does not decode: {e}")))?;
        let footer = Self {
            metadata: decoded,
            tail_start,
            size,
        };
        footer.check().map_err(bad)?;
        Ok(footer)
    }

    /// Every count and offset bounded against the file.
    fn check(&self) -> std::result::Result<(), String> {
        let meta = &self.metadata;
        let leaves = meta.file_metadata().schema_descr().num_columns();
        if leaves == 0 || leaves > MAX_LEAVES {
            return Err(format!(
                "the schema has {leaves} leaf columns, outside 1..={MAX_LEAVES}"
            ));
        }
        let groups = meta.row_groups();
        if groups.len() > MAX_ROW_GROUPS {
            return Err(format!(
                "{} row groups, more than {MAX_ROW_GROUPS}",
                groups.len()
            ));
        }
        let mut total = 0u64;
        for (g, group) in groups.iter().enumerate() {
            let rows = u32::try_from(group.num_rows())
                .map_err(|_| format!("row group {g}: {} rows", group.num_rows()))?;
            total += u64::from(rows);
            if group.columns().len() != leaves {
                return Err(format!(
                    "row group {g}: {} column chunks, the schema has {leaves} columns",
                    group.columns().len()
                ));
            }
            for (c, column) in group.columns().iter().enumerate() {
                let at = || format!("row group {g}, column {}", column.column_path());
                // Where the `parquet` crate's readers start: the dictionary
                // page when there is one (`ColumnChunkMetaData::byte_range`).
                let data = column.data_page_offset();
                let start = column.dictionary_page_offset().unwrap_or(data);
                let len = column.compressed_size();
                if start < 4
                    || len <= 0
                    || len as u64 > MAX_COLUMN_CHUNK_BYTES
                    || (start as u64).saturating_add(len as u64) > self.tail_start
                    || data < start
                    || data as u64 >= start as u64 + len as u64
                {
                    return Err(format!(
                        "{}: its bytes {start}..+{len} are not inside the file's data (0..{})",
                        at(),
                        self.tail_start
                    ));
                }
                if let Some(pages) = self.pages(g, c) {
                    let end = start as u64 + len as u64;
                    let mut next_row = 0i64;
                    for (p, page) in pages.iter().enumerate() {
                        let page_end =
                            (page.offset as u64).saturating_add(page.compressed_page_size as u64);
                        if page.offset < start
                            || page.compressed_page_size <= 0
                            || page_end > end
                            || page.first_row_index < next_row
                            || page.first_row_index >= group.num_rows().max(1)
                            || (p == 0 && page.first_row_index != 0)
                        {
                            return Err(format!(
                                "{}: page {p} of its offset index lies outside the column chunk \
                                 or out of row order",
                                at()
                            ));
                        }
                        next_row = page.first_row_index + 1;
                    }
                }
            }
        }
        if total > u64::from(u32::MAX) {
            return Err(format!(
                "{total} rows: a file may hold at most {} rows",
                u32::MAX
            ));
        }
        Ok(())
    }

    /// The offset index of column `column` of row group `group`, if the
    /// file has one (and it was loaded).
    pub fn pages(&self, group: usize, column: usize) -> Option<&[PageLocation]> {
        let index = self.metadata.page_index()?.offset_index(group, column)?;
        let pages = index.page_locations();
        (!pages.is_empty()).then_some(pages.as_slice())
    }

    /// Rows of each row group.
    pub fn rows(&self) -> Vec<u32> {
        self.metadata
            .row_groups()
            .iter()
            .map(|g| g.num_rows() as u32)
            .collect()
    }

    /// The bytes of leaf column `column`'s whole column chunk in row group
    /// `group`.
    pub fn chunk_range(&self, group: usize, column: usize) -> Range<u64> {
        let (start, len) = self.metadata.row_group(group).column(column).byte_range();
        start..start + len
    }

    /// The bytes of leaf column `column` in row group `group` that rows
    /// `rows` (relative to the row group) need: its dictionary page and the
    /// pages that hold those rows where the file has an offset index, else
    /// the whole column chunk.
    pub fn ranges(&self, group: usize, column: usize, rows: Range<u32>) -> Vec<Range<u64>> {
        let whole = self.chunk_range(group, column);
        let start = whole.start;
        let Some(pages) = self.pages(group, column) else {
            return std::iter::once(whole).collect();
        };
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let first = pages[0].offset as u64;
        if first > start {
            ranges.push(start..first);
        }
        for (p, page) in pages.iter().enumerate() {
            let page_rows = page.first_row_index as u64
                ..pages
                    .get(p + 1)
                    .map_or(u64::MAX, |next| next.first_row_index as u64);
            if page_rows.start < u64::from(rows.end) && u64::from(rows.start) < page_rows.end {
                let range =
                    page.offset as u64..page.offset as u64 + page.compressed_page_size as u64;
                match ranges.last_mut() {
                    Some(last) if last.end == range.start => last.end = range.end,
                    _ => ranges.push(range),
                }
            }
        }
        ranges
    }
}

/// Reads and checks the tail of Parquet file `name` of `size` bytes: its
/// footer, and its offset indexes where it has them (they usually lie just
/// before the footer). Returns the tail's bytes and the footer.
async fn read_tail(location: &Location, name: &str, size: u64) -> Result<(Bytes, Footer)> {
    let url = location.url_of(name);
    let bad = |reason: String| IoError::Parquet {
        url: url.clone(),
        reason,
    };
    if size < MIN_PARQUET_BYTES {
        return Err(bad(format!(
            "is {size} bytes, too small to be a Parquet file (at least {MIN_PARQUET_BYTES})"
        )));
    }
    let first = size.min(FIRST_TAIL_READ);
    let mut tail = location.get_range(name, size - first..size).await?;
    let end = &tail[tail.len() - 8..];
    if &end[4..] != b"PAR1" {
        return Err(bad(
            "does not end in `PAR1`: not a Parquet file, or a truncated one (write it again)"
                .into(),
        ));
    }
    let footer_len = u64::from(u32::from_le_bytes(end[..4].try_into().expect("4 bytes")));
    let footer_bytes = footer_len + 8;
    if footer_bytes > size - 4 || footer_bytes > MAX_TAIL_BYTES {
        return Err(bad(format!(
            "its footer claims {footer_len} bytes, more than the file ({size} bytes) or the \
             {MAX_TAIL_BYTES}-byte limit: a truncated or damaged file"
        )));
    }
    if footer_bytes > tail.len() as u64 {
        tail = location.get_range(name, size - footer_bytes..size).await?;
    } else {
        tail = tail.slice(tail.len() - footer_bytes as usize..);
    }
    let footer = decode_blocking(&url, size, tail.clone()).await?;
    // The offset indexes, when every one lies between the data and the
    // footer: the tail grows to take them in.
    let footer_start = size - footer_bytes;
    let mut index_start = footer_start;
    for group in footer.metadata.row_groups() {
        for column in group.columns() {
            if let (Some(offset), Some(len)) =
                (column.offset_index_offset(), column.offset_index_length())
            {
                let end = offset.saturating_add(i64::from(len));
                if offset < 4 || len <= 0 || end as u64 > footer_start {
                    return Err(bad(format!(
                        "the offset index of column {} lies outside the file",
                        column.column_path()
                    )));
                }
                index_start = index_start.min(offset as u64);
            }
        }
    }
    if index_start == footer_start || size - index_start > MAX_TAIL_BYTES {
        return Ok((tail, footer));
    }
    let before = location.get_range(name, index_start..footer_start).await?;
    let mut whole = Vec::with_capacity((size - index_start) as usize);
    whole.extend_from_slice(&before);
    whole.extend_from_slice(&tail);
    let tail = Bytes::from(whole);
    let footer = decode_blocking(&url, size, tail.clone()).await?;
    Ok((tail, footer))
}

/// [`Footer::decode`] off the async runtime.
pub async fn decode_blocking(url: &str, size: u64, tail: Bytes) -> Result<Footer> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || Footer::decode(&url, size, tail))
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// The manifest entry of Parquet file `name` of `size` bytes (with the
/// store's `etag`), from its tail alone, and its footer. An empty file
/// (no rows) is an error the caller may skip.
pub async fn index_file(
    location: &Location,
    name: &str,
    size: u64,
    etag: Option<String>,
) -> Result<(ShardEntry, Footer)> {
    let (tail, footer) = read_tail(location, name, size).await?;
    let rows = footer.rows();
    let samples: u64 = rows.iter().map(|r| u64::from(*r)).sum();
    let entry = ShardEntry {
        name: name.to_owned(),
        samples: samples as u32,
        bytes: size,
        crc32c: crc32c::crc32c(&tail),
        chunks: Chunks::RowGroups(Arc::new(RowGroups {
            rows,
            tail_bytes: tail.len() as u64,
            etag,
        })),
    };
    Ok((entry, footer))
}

/// Checks the tail of a file as read now against its manifest entry: the
/// same bytes (crc32c) as when it was indexed, or the file changed.
pub fn check_tail(url: &str, entry: &ShardEntry, tail: &[u8]) -> Result<()> {
    let crc = crc32c::crc32c(tail);
    if crc != entry.crc32c {
        return Err(IoError::Parquet {
            url: url.to_owned(),
            reason: format!(
                "changed since it was indexed: the crc32c of its last {} bytes is {crc:08x}, \
                 the manifest says {:08x}; index the dataset again (`tributary index`)",
                tail.len(),
                entry.crc32c
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
