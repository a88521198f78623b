//! The byte ranges of a file that a read fetched, served to the `parquet`
//! crate's readers as if they were the file. A request outside them is an
//! error (a read planned too narrowly), never a silent fetch.

use bytes::{Buf, Bytes};
use parquet::errors::{ParquetError, Result};
use parquet::file::reader::{ChunkReader, Length};

/// Ranges of one file, by their first byte.
#[derive(Debug, Clone)]
pub struct SparseFile {
    size: u64,
    /// `(first byte, bytes)`, sorted, not overlapping.
    parts: Vec<(u64, Bytes)>,
}

impl SparseFile {
    /// A file of `size` bytes of which `parts` are at hand.
    pub fn new(size: u64, mut parts: Vec<(u64, Bytes)>) -> Self {
        parts.sort_by_key(|(start, _)| *start);
        Self { size, parts }
    }

    /// The bytes from `start` to the end of the part holding it.
    fn from(&self, start: u64) -> Result<Bytes> {
        let i = self.parts.partition_point(|(first, _)| *first <= start);
        let (first, bytes) = i
            .checked_sub(1)
            .map(|i| &self.parts[i])
            .filter(|(first, bytes)| start < first + bytes.len() as u64)
            .ok_or_else(|| {
                ParquetError::General(format!("byte {start} of the file was not fetched"))
            })?;
        Ok(bytes.slice((start - first) as usize..))
    }
}

impl Length for SparseFile {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for SparseFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> Result<Self::T> {
        Ok(self.from(start)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes> {
        if length == 0 {
            return Ok(Bytes::new());
        }
        let rest = self.from(start)?;
        if rest.len() < length {
            return Err(ParquetError::General(format!(
                "bytes {start}..+{length} of the file were not fetched"
            )));
        }
        Ok(rest.slice(..length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_what_was_fetched_and_refuses_the_rest() {
        let file = SparseFile::new(
            100,
            vec![
                (50, Bytes::from_static(b"0123456789")),
                (10, Bytes::from_static(b"abc")),
            ],
        );
        assert_eq!(&file.get_bytes(11, 2).expect("fetched")[..], b"bc");
        assert_eq!(&file.get_bytes(55, 5).expect("fetched")[..], b"56789");
        assert!(file.get_bytes(55, 6).is_err());
        assert!(file.get_bytes(13, 1).is_err());
        assert!(file.get_bytes(0, 1).is_err());
        assert!(file.get_read(60).is_err());
        assert_eq!(file.len(), 100);
    }
}
