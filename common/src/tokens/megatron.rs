//! Megatron `MMIDIDX` index files (`.idx`), read within bounds and
//! written.
//!
//! The layout (Megatron-Core `indexed_dataset.py`, `_IndexWriter`), all
//! little-endian:
//!
//! | bytes | what |
//! | --- | --- |
//! | 9 | magic `MMIDIDX\0\0` |
//! | 8 | version, `u64` = 1 |
//! | 1 | dtype code: 8 = uint16, 4 = int32 (our u32: ids below 2^31) |
//! | 8 | `sequence_count` (`n`) |
//! | 8 | `document_count` (`m`, the length of `document_indices`) |
//! | 4·n | `sequence_lengths`, `i32`, in tokens |
//! | 8·n | `sequence_pointers`, `i64`, byte offsets into the data object |
//! | 8·m | `document_indices`, `i64`: 0, ..., n |
//!
//! Each Megatron sequence is one of our documents (as Megatron-Core's
//! `GPTDataset` uses them); `document_indices` (which groups sequences into
//! documents) is checked but not otherwise used. The sequences must be
//! contiguous and in order from the data object's token offset:
//! `pointer[0] == offset`, `pointer[i + 1] == pointer[i] + len[i] · width`.
//!
//! Every count is bounded against the file's length before anything is
//! sized from it, so a hostile file costs at most its own size; a bad file
//! is an [`IdxError`] naming it and the byte offset of the bad entry.

use super::{DocIndex, TokenDtype};

/// The first 9 bytes of every `.idx`.
pub const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The version this build reads and writes.
pub const VERSION: u64 = 1;
/// Magic, version, dtype code and the two counts.
pub const HEADER_BYTES: u64 = 9 + 8 + 1 + 8 + 8;

/// A Megatron `.idx` that cannot be read: the file, the byte offset of the
/// bad entry, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: at byte {offset}: {reason}")]
pub struct IdxError {
    pub file: String,
    pub offset: u64,
    pub reason: String,
}

/// Megatron's dtype code for `dtype`.
pub fn dtype_code(dtype: TokenDtype) -> u8 {
    match dtype {
        TokenDtype::U16 => 8,
        TokenDtype::U32 => 4,
    }
}

/// The dtype of Megatron code `code`, or what the code is when we cannot
/// read it.
pub fn dtype_of_code(code: u8) -> Result<TokenDtype, String> {
    match code {
        8 => Ok(TokenDtype::U16),
        4 => Ok(TokenDtype::U32),
        _ => {
            let name = match code {
                1 => "uint8",
                2 => "int8",
                3 => "int16",
                5 => "int64",
                6 => "float64",
                7 => "float32",
                _ => "unknown",
            };
            Err(format!(
                "dtype code {code} ({name}) is not a token dtype this build reads (8 = uint16, 4 = int32)"
            ))
        }
    }
}

/// The smallest and largest `.idx` for `documents` sequences (the
/// `document_indices` may group sequences, so hold 2 to `documents + 1`
/// entries; we write `documents + 1`).
pub fn idx_bytes_bounds(documents: u64) -> (u64, u64) {
    let min = HEADER_BYTES
        .saturating_add(documents.saturating_mul(12))
        .saturating_add(8 * documents.min(1) + 8);
    let max = HEADER_BYTES
        .saturating_add(documents.saturating_mul(20))
        .saturating_add(documents.saturating_add(1).saturating_mul(8));
    (min, max)
}

/// Whether `bytes` starts like a Megatron index.
pub fn is_idx(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The `.idx` of documents `index` whose tokens start at byte
/// `data_offset` of the data object: one sequence per document,
/// `document_indices` `0..=n`.
///
/// # Panics
///
/// If a document is longer than `i32::MAX` tokens (Megatron's limit).
pub fn encode_idx(dtype: TokenDtype, index: &DocIndex, data_offset: u64) -> Vec<u8> {
    let n = index.documents();
    let mut out = Vec::with_capacity((HEADER_BYTES + 20 * n + 8) as usize);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(dtype_code(dtype));
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(n + 1).to_le_bytes());
    for d in 0..n {
        let len = i32::try_from(index.doc_len(d)).expect("a document of at most i32::MAX tokens");
        out.extend_from_slice(&len.to_le_bytes());
    }
    for &start in &index.offsets()[..n as usize] {
        let pointer = data_offset + start * dtype.width();
        out.extend_from_slice(&(pointer as i64).to_le_bytes());
    }
    for d in 0..=n {
        out.extend_from_slice(&(d as i64).to_le_bytes());
    }
    out
}

/// What an `.idx` said, read on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idx {
    pub dtype: TokenDtype,
    /// Each sequence as a document, in token offsets from `data_offset`.
    pub index: DocIndex,
}

/// What the reader of an `.idx` expects from the manifest that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub dtype: TokenDtype,
    /// Where the tokens start in the data object.
    pub data_offset: u64,
    pub tokens: u64,
    pub documents: u64,
}

/// Decodes the `.idx` `bytes` (of `file`, for errors) of a shard the
/// manifest describes as `expected`; its documents in token offsets.
pub fn decode_idx(file: &str, bytes: &[u8], expected: &Expected) -> Result<DocIndex, IdxError> {
    let err = |offset: u64, reason: String| IdxError {
        file: file.to_owned(),
        offset,
        reason,
    };
    let idx = read_idx(file, bytes, expected.data_offset, None)?;
    if idx.dtype != expected.dtype {
        return Err(err(
            17,
            format!(
                "dtype is {}, the manifest says {}",
                idx.dtype, expected.dtype
            ),
        ));
    }
    if idx.index.documents() != expected.documents {
        return Err(err(
            18,
            format!(
                "holds {} documents, the manifest says {}",
                idx.index.documents(),
                expected.documents
            ),
        ));
    }
    if idx.index.tokens() != expected.tokens {
        return Err(err(
            HEADER_BYTES,
            format!(
                "its sequences hold {} tokens, the manifest says {}",
                idx.index.tokens(),
                expected.tokens
            ),
        ));
    }
    Ok(idx.index)
}

/// Reads the `.idx` `bytes` of `file` whose data object's tokens start at
/// `data_offset` and, when given, is `data_bytes` long (its sequences must
/// end inside it). Every count is bounded by `bytes.len()` before it sizes
/// anything.
pub fn read_idx(
    file: &str,
    bytes: &[u8],
    data_offset: u64,
    data_bytes: Option<u64>,
) -> Result<Idx, IdxError> {
    let err = |offset: u64, reason: String| IdxError {
        file: file.to_owned(),
        offset,
        reason,
    };
    let len = bytes.len() as u64;
    if len < HEADER_BYTES {
        return Err(err(
            0,
            format!("is {len} bytes, shorter than the {HEADER_BYTES}-byte MMIDIDX header"),
        ));
    }
    if !is_idx(bytes) {
        return Err(err(
            0,
            "does not start with the MMIDIDX magic: not a Megatron index".into(),
        ));
    }
    let version = u64_at(bytes, 9);
    if version != VERSION {
        return Err(err(
            9,
            format!("version {version}, this build reads version {VERSION}"),
        ));
    }
    let dtype = dtype_of_code(bytes[17]).map_err(|reason| err(17, reason))?;
    let n = u64_at(bytes, 18);
    let m = u64_at(bytes, 26);
    let body = len - HEADER_BYTES;
    if n > body / 12 {
        return Err(err(
            18,
            format!("sequence_count {n} needs more than the file's {len} bytes"),
        ));
    }
    let after_sequences = body - 12 * n;
    if m > after_sequences / 8 {
        return Err(err(
            26,
            format!("document_count {m} needs more than the file's {len} bytes"),
        ));
    }
    let expected_len = HEADER_BYTES + 12 * n + 8 * m;
    if expected_len != len {
        return Err(err(
            expected_len.min(len),
            format!(
                "is {len} bytes, but {n} sequences and {m} document indices take {expected_len}"
            ),
        ));
    }
    let lengths_at = HEADER_BYTES;
    let pointers_at = lengths_at + 4 * n;
    let docs_at = pointers_at + 8 * n;
    let width = dtype.width();
    let mut offsets = Vec::with_capacity(n as usize + 1);
    offsets.push(0u64);
    let mut tokens = 0u64;
    for i in 0..n {
        let at = lengths_at + 4 * i;
        let seq_len = i32::from_le_bytes(
            bytes[at as usize..at as usize + 4]
                .try_into()
                .expect("4 bytes"),
        );
        let Ok(seq_len) = u64::try_from(seq_len) else {
            return Err(err(
                at,
                format!("sequence {i} has a negative length {seq_len}"),
            ));
        };
        let p_at = pointers_at + 8 * i;
        let pointer = i64::from_le_bytes(
            bytes[p_at as usize..p_at as usize + 8]
                .try_into()
                .expect("8 bytes"),
        );
        // tokens <= n * i32::MAX < 2^63 / 4: no overflow below.
        let want = data_offset.checked_add(tokens * width);
        if u64::try_from(pointer).ok() != want {
            let what = if i == 0 {
                format!("the data's token offset {data_offset}")
            } else {
                format!("where sequence {} ends", i - 1)
            };
            return Err(err(
                p_at,
                format!(
                    "sequence {i} starts at byte {pointer}, not at {what} ({}): sequences must be contiguous and in order",
                    want.map_or("past 2^64".into(), |w| w.to_string())
                ),
            ));
        }
        tokens += seq_len;
        offsets.push(tokens);
    }
    let end = data_offset.checked_add(tokens * width);
    if let Some(data_bytes) = data_bytes {
        if end.is_none_or(|end| end > data_bytes) {
            return Err(err(
                lengths_at,
                format!(
                    "its sequences hold {tokens} {dtype} tokens from byte {data_offset}, past the data object's {data_bytes} bytes"
                ),
            ));
        }
    }
    let mut previous = 0u64;
    for j in 0..m {
        let at = docs_at + 8 * j;
        let value = i64::from_le_bytes(
            bytes[at as usize..at as usize + 8]
                .try_into()
                .expect("8 bytes"),
        );
        let ok = u64::try_from(value)
            .is_ok_and(|v| v >= previous && v <= n && (j != 0 || v == 0) && (j + 1 != m || v == n));
        if !ok {
            return Err(err(
                at,
                format!(
                    "document_indices[{j}] is {value}: they must run from 0 to the sequence count {n}, never decreasing"
                ),
            ));
        }
        previous = value as u64;
    }
    if m == 0 {
        return Err(err(
            26,
            "document_count is 0: document_indices must hold at least 0".into(),
        ));
    }
    let index = DocIndex::new(offsets).expect("offsets from 0, never decreasing");
    Ok(Idx { dtype, index })
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
#[path = "megatron_tests.rs"]
mod tests;
