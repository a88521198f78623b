//! Rows into a batch's columns: `input_ids`, `labels`, `position_ids`,
//! `document_ids`, and on request `attention_mask` and `cu_seqlens`.
//!
//! A [`Row`] is what the pipeline carries for one row of
//! [`layout::row_pieces`](super::layout::row_pieces): its token ids (u32
//! little-endian) and the lengths of its pieces, in order: a worker makes
//! them from the bytes it read with [`row_from_reads`] ([`encode_row`] from
//! ids at hand). [`build`] turns a batch of rows into row-major `B × L` arrays of int64
//! or int32 ([`IdType`]), little-endian, as a memory copy into arrays sized
//! once.
//!
//! # Columns per packing
//!
//! - **`concat`**: a row is `L + 1` tokens. `input_ids` are tokens `0..L`,
//!   `labels` tokens `1..=L` (the shift by one; a document's last token is
//!   labelled with the next document's first, as in Megatron). No padding
//!   and no `attention_mask`.
//! - **`bestfit`** and **`none`**: a row is at most `L` tokens. `input_ids`
//!   are the tokens, then `pad_id` up to `L`. `labels[i]` is `tokens[i+1]`
//!   when `i + 1` is in the same piece, else `-100` (the last token of each
//!   piece, and all padding), so no token is trained to predict another
//!   document. `attention_mask` is 1 on tokens and 0 on padding.
//!
//! # Conventions
//!
//! - `position_ids` count from 0 at the start of each piece of the row: a
//!   document starting inside the row starts at 0, and under `concat` the
//!   row's first piece (usually a document continued from the row before)
//!   also counts from 0 at the row start. Padding has position 0.
//! - `document_ids` is the index of the piece within its row (0, 1, 2,
//!   ...), so tokens with equal ids in a row may attend to each other
//!   (document masking); padding is `-1`. They are row-local: they say
//!   where documents change, not which document of the dataset it is.
//! - `cu_seqlens` (int32, 1-D, `varlen` attention over the flattened
//!   `B × L` batch): per row its pieces clipped to the row's `L` input
//!   positions (a `concat` row's last token is only a label), then the
//!   row's padding as one more segment; cumulative, from 0 to `B · L`.
//!
//! A `none` row of an empty document, or a batch of only padding, has no
//! label that is not `-100`: a mean loss over it divides by zero.

use std::ops::Range;
use std::str::FromStr;

use super::layout::Piece;
use super::{Packing, SequenceSpec, TokenDtype};

#[cfg(test)]
mod tests;

/// The integer type of the id columns (`input_ids`, `labels`,
/// `position_ids`, `document_ids`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IdType {
    #[default]
    I64,
    I32,
}

impl IdType {
    /// Bytes per value.
    pub fn width(self) -> usize {
        match self {
            Self::I64 => 8,
            Self::I32 => 4,
        }
    }

    /// The numpy / torch name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::I64 => "int64",
            Self::I32 => "int32",
        }
    }
}

impl FromStr for IdType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "int64" | "i64" => Ok(Self::I64),
            "int32" | "i32" => Ok(Self::I32),
            _ => Err(format!(
                "unknown id type `{text}` (expected int64 or int32)"
            )),
        }
    }
}

/// How rows become a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowsSpec {
    pub sequence: SequenceSpec,
    pub ids: IdType,
    /// Whether to build `cu_seqlens`.
    pub cu_seqlens: bool,
    /// The id `input_ids` are padded with (bestfit, none).
    pub pad_id: u32,
}

/// One row as the pipeline carries it (a sample's two fields): tokens as
/// u32 little-endian bytes, and the lengths of its pieces (u32
/// little-endian bytes), in order, summing to the token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row<'a> {
    pub tokens: &'a [u8],
    pub segments: &'a [u8],
}

/// The two fields of a [`Row`]: `tokens` and `segments` as u32
/// little-endian bytes.
pub fn encode_row(tokens: &[u32], segments: &[u32]) -> (Vec<u8>, Vec<u8>) {
    let bytes = |values: &[u32]| values.iter().flat_map(|v| v.to_le_bytes()).collect();
    (bytes(tokens), bytes(segments))
}

/// A token range a row needs that the reads given do not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tokens {start}..{end} (document {doc}) are not in the bytes read{why}; read the ranges \
     layout::reads gives for the row's pieces"
)]
pub struct Unread {
    pub doc: u64,
    pub start: u64,
    pub end: u64,
    /// What was wrong with the read that should hold them, if one should.
    pub why: String,
}

/// The two fields of the [`Row`] made of `pieces` (one row's, in order),
/// their tokens taken from `reads`: token ranges of the shard, sorted by
/// start and not overlapping (as [`layout::reads`](super::layout::reads)
/// gives them), each with its bytes, little-endian ids of `dtype`.
pub fn row_from_reads(
    pieces: &[Piece],
    reads: &[(Range<u64>, &[u8])],
    dtype: TokenDtype,
) -> Result<(Vec<u8>, Vec<u8>), Unread> {
    let width = dtype.width();
    let count: u64 = pieces.iter().map(Piece::len).sum();
    let mut tokens = Vec::with_capacity(count as usize * 4);
    let mut segments = Vec::with_capacity(pieces.len() * 4);
    for piece in pieces {
        let unread = |why: String| Unread {
            doc: piece.doc,
            start: piece.start,
            end: piece.end,
            why,
        };
        let at = reads.partition_point(|(range, _)| range.start <= piece.start);
        let (range, bytes) = at
            .checked_sub(1)
            .map(|i| &reads[i])
            .filter(|(range, _)| piece.end <= range.end)
            .ok_or_else(|| unread(String::new()))?;
        let want = (range.end - range.start) * width;
        if bytes.len() as u64 != want {
            return Err(unread(format!(
                " (read {}..{} holds {} bytes, not {want})",
                range.start,
                range.end,
                bytes.len()
            )));
        }
        let from = ((piece.start - range.start) * width) as usize;
        let to = ((piece.end - range.start) * width) as usize;
        match dtype {
            // Already u32 little-endian.
            TokenDtype::U32 => tokens.extend_from_slice(&bytes[from..to]),
            TokenDtype::U16 => tokens.extend(
                bytes[from..to]
                    .as_chunks::<2>()
                    .0
                    .iter()
                    .flat_map(|id| u32::from(u16::from_le_bytes(*id)).to_le_bytes()),
            ),
        }
        segments.extend_from_slice(&(piece.len() as u32).to_le_bytes());
    }
    Ok((tokens, segments))
}

/// A batch of rows: every array row-major, little-endian, `rows × length`
/// values of `ids` type unless said otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceBatch {
    pub rows: usize,
    pub length: usize,
    pub ids: IdType,
    pub input_ids: Vec<u8>,
    pub labels: Vec<u8>,
    pub position_ids: Vec<u8>,
    pub document_ids: Vec<u8>,
    /// u8 0/1, `rows × length`; `Some` for bestfit and none.
    pub attention_mask: Option<Vec<u8>>,
    /// int32, 1-D, over the flattened batch; `Some` when asked for.
    pub cu_seqlens: Option<Vec<u8>>,
}

/// The label of a position that is not trained (PyTorch's
/// `CrossEntropyLoss` `ignore_index`).
pub const IGNORE_LABEL: i64 = -100;

/// A row [`build`] refuses. `row` is the row's index in the batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("a sequence length of 0 tokens has no positions")]
    ZeroLength,
    #[error(
        "a batch of {rows} rows of {length} tokens has more positions than cu_seqlens (int32) \
         can count or memory can address; use a smaller batch (or no cu_seqlens)"
    )]
    TooManyPositions { rows: usize, length: usize },
    #[error("pad id {pad_id} does not fit int32 ids; ask for int64 ids or a smaller pad id")]
    PadRange { pad_id: u32 },
    #[error(
        "row {row}: its tokens are {bytes} bytes, not a whole number of u32 token ids (4 bytes each)"
    )]
    TokenBytes { row: usize, bytes: usize },
    #[error(
        "row {row}: its segment lengths are {bytes} bytes, not a whole number of u32 lengths \
         (4 bytes each)"
    )]
    SegmentBytes { row: usize, bytes: usize },
    #[error("row {row}: segment {segment} is empty (every piece of a row holds a token)")]
    EmptySegment { row: usize, segment: usize },
    #[error("row {row}: its segments sum to {sum} tokens, but it holds {tokens} tokens")]
    SegmentSum { row: usize, sum: u64, tokens: usize },
    #[error(
        "row {row}: {tokens} tokens, but a concat row holds exactly the sequence length + 1 = \
         {expected}"
    )]
    ConcatLength {
        row: usize,
        tokens: usize,
        expected: usize,
    },
    #[error(
        "row {row}: {tokens} tokens, more than the sequence length {length} ({packing} packing)"
    )]
    TooLong {
        row: usize,
        tokens: usize,
        length: usize,
        packing: Packing,
    },
    #[error(
        "row {row}: token id {id} at position {position} does not fit int32 ids; ask for int64 ids"
    )]
    IdRange {
        row: usize,
        position: usize,
        id: u32,
    },
}

/// Turns `rows` into a batch's columns (see the module docs for what each
/// holds). Every row is checked against `spec` first: a malformed row is an
/// error naming it, never a silently shifted batch.
pub fn build(rows: &[Row<'_>], spec: &RowsSpec) -> Result<SequenceBatch, RowError> {
    let length = spec.sequence.length as usize;
    if length == 0 {
        return Err(RowError::ZeroLength);
    }
    let too_many = RowError::TooManyPositions {
        rows: rows.len(),
        length,
    };
    let positions = rows.len().checked_mul(length).ok_or(too_many.clone())?;
    let width = spec.ids.width();
    let bytes = positions.checked_mul(width).ok_or(too_many.clone())?;
    if spec.cu_seqlens && positions > i32::MAX as usize {
        return Err(too_many);
    }
    if spec.ids == IdType::I32 && spec.pad_id > i32::MAX as u32 {
        return Err(RowError::PadRange {
            pad_id: spec.pad_id,
        });
    }
    let concat = spec.sequence.packing == Packing::Concat;
    // Zeroed: padding's position id is 0 as allocated.
    let mut batch = SequenceBatch {
        rows: rows.len(),
        length,
        ids: spec.ids,
        input_ids: vec![0; bytes],
        labels: vec![0; bytes],
        position_ids: vec![0; bytes],
        document_ids: vec![0; bytes],
        attention_mask: (!concat).then(|| vec![0; positions]),
        cu_seqlens: spec.cu_seqlens.then(|| {
            let mut cu = Vec::with_capacity(4 * (1 + 2 * rows.len()));
            cu.extend_from_slice(&0i32.to_le_bytes());
            cu
        }),
    };
    match spec.ids {
        IdType::I64 => fill(rows, spec, &mut batch, i64::to_le_bytes),
        IdType::I32 => fill(rows, spec, &mut batch, |v: i64| (v as i32).to_le_bytes()),
    }?;
    Ok(batch)
}

/// A checked row: its tokens and segment lengths.
struct Checked<'a> {
    tokens: &'a [[u8; 4]],
    segments: &'a [[u8; 4]],
}

fn check<'a>(index: usize, row: &Row<'a>, spec: &RowsSpec) -> Result<Checked<'a>, RowError> {
    let length = spec.sequence.length as usize;
    let (tokens, rest) = row.tokens.as_chunks::<4>();
    if !rest.is_empty() {
        return Err(RowError::TokenBytes {
            row: index,
            bytes: row.tokens.len(),
        });
    }
    let (segments, rest) = row.segments.as_chunks::<4>();
    if !rest.is_empty() {
        return Err(RowError::SegmentBytes {
            row: index,
            bytes: row.segments.len(),
        });
    }
    if spec.sequence.packing == Packing::Concat {
        if tokens.len() != length + 1 {
            return Err(RowError::ConcatLength {
                row: index,
                tokens: tokens.len(),
                expected: length + 1,
            });
        }
    } else if tokens.len() > length {
        return Err(RowError::TooLong {
            row: index,
            tokens: tokens.len(),
            length,
            packing: spec.sequence.packing,
        });
    }
    let mut sum = 0u64;
    for (segment, bytes) in segments.iter().enumerate() {
        let len = u32::from_le_bytes(*bytes);
        if len == 0 {
            return Err(RowError::EmptySegment {
                row: index,
                segment,
            });
        }
        sum += u64::from(len);
    }
    if sum != tokens.len() as u64 {
        return Err(RowError::SegmentSum {
            row: index,
            sum,
            tokens: tokens.len(),
        });
    }
    if spec.ids == IdType::I32 {
        let all = tokens
            .iter()
            .fold(0u32, |all, t| all | u32::from_le_bytes(*t));
        if all > i32::MAX as u32 {
            let (position, id) = tokens
                .iter()
                .map(|t| u32::from_le_bytes(*t))
                .enumerate()
                .find(|&(_, id)| id > i32::MAX as u32)
                .expect("an id has the top bit set");
            return Err(RowError::IdRange {
                row: index,
                position,
                id,
            });
        }
    }
    Ok(Checked { tokens, segments })
}

/// Writes every row into `batch`'s arrays of `W`-byte ids, `encode` giving
/// a value's bytes.
fn fill<const W: usize>(
    rows: &[Row<'_>],
    spec: &RowsSpec,
    batch: &mut SequenceBatch,
    encode: impl Fn(i64) -> [u8; W] + Copy,
) -> Result<(), RowError> {
    let length = batch.length;
    let concat = spec.sequence.packing == Packing::Concat;
    let ignore = encode(IGNORE_LABEL);
    let pad = encode(i64::from(spec.pad_id));
    let no_doc = encode(-1);
    let token = |bytes: &[u8; 4]| encode(i64::from(u32::from_le_bytes(*bytes)));
    let (inputs, _) = batch.input_ids.as_chunks_mut::<W>();
    let (labels, _) = batch.labels.as_chunks_mut::<W>();
    let (positions, _) = batch.position_ids.as_chunks_mut::<W>();
    let (documents, _) = batch.document_ids.as_chunks_mut::<W>();
    let mut masks = batch
        .attention_mask
        .as_deref_mut()
        .map(|m| m.chunks_exact_mut(length));
    let mut cu = batch.cu_seqlens.as_mut();
    for (index, ((((row, input), label), position), document)) in rows
        .iter()
        .zip(inputs.chunks_exact_mut(length))
        .zip(labels.chunks_exact_mut(length))
        .zip(positions.chunks_exact_mut(length))
        .zip(documents.chunks_exact_mut(length))
        .enumerate()
    {
        let Checked { tokens, segments } = check(index, row, spec)?;
        let base = index * length;
        let mut cut = |end: usize| {
            if let Some(cu) = cu.as_deref_mut() {
                cu.extend_from_slice(&((base + end) as i32).to_le_bytes());
            }
        };
        if concat {
            for (out, t) in input.iter_mut().zip(&tokens[..length]) {
                *out = token(t);
            }
            for (out, t) in label.iter_mut().zip(&tokens[1..]) {
                *out = token(t);
            }
        } else {
            let used = tokens.len();
            for (out, t) in input.iter_mut().zip(tokens) {
                *out = token(t);
            }
            input[used..].fill(pad);
            for (out, t) in label.iter_mut().zip(tokens.get(1..).unwrap_or_default()) {
                *out = token(t);
            }
            label[used.saturating_sub(1)..].fill(ignore);
            document[used..].fill(no_doc);
            if let Some(mask) = masks.as_mut().and_then(Iterator::next) {
                mask[..used].fill(1);
            }
        }
        // Pieces: positions from 0, the piece's index, and (bestfit, none)
        // no label across a piece's end.
        let mut start = 0;
        for (piece, bytes) in segments.iter().enumerate() {
            let end = (start + u32::from_le_bytes(*bytes) as usize).min(length);
            for (k, out) in position[start..end].iter_mut().enumerate() {
                *out = encode(k as i64);
            }
            document[start..end].fill(encode(piece as i64));
            if !concat {
                label[end - 1] = ignore;
            }
            cut(end);
            start = end;
            if start == length {
                // A concat row's last token is a label only.
                break;
            }
        }
        if start < length {
            cut(length);
        }
    }
    Ok(())
}
