//! Which tokens each row of a token shard holds: the rows a shard has for a
//! [`SequenceSpec`] ([`shard_rows`]) and the pieces of documents a run of
//! rows is made of ([`row_pieces`]). Everything here is a pure function of
//! the shard's [`DocIndex`] (plus, for `concat`, the seed, epoch and shard),
//! so the coordinator counts rows from the index alone and every worker cuts
//! the same rows without talking to the others.
//!
//! # Packing modes
//!
//! - **`concat`** (pretraining). The shard's documents, in a seeded order
//!   that changes every epoch, form one token stream; row `i` is stream
//!   tokens `i·L ..= (i+1)·L`: `L + 1` tokens (the inputs and, shifted by
//!   one, the labels), so consecutive rows share one token and every stream
//!   token but the first is a label exactly once. A shard of `T` tokens has
//!   `(T - 1) / L` rows (none when `T < 2`).
//!
//!   *The per-shard tail rule*: the stream's last `(T - 1) % L` tokens
//!   (fewer than `L`) come after the last whole window and are trained in
//!   that epoch neither as inputs nor as labels. The epoch's order decides
//!   which tokens they are, so they change from epoch to epoch (except in a
//!   shard too small to reorder, such as one document). The plan counts
//!   only whole rows, so the tail is never a partial row.
//!
//!   *The seeded order*: documents are grouped into **blocks** of
//!   consecutive documents, a pure function of the lengths: document `d`
//!   belongs to block `offsets[d] / BLOCK_TOKENS`, so a block spans about
//!   [`BLOCK_TOKENS`] tokens of the file. Each epoch permutes the blocks
//!   (a ChaCha stream keyed by `(seed, epoch, shard)`, domain
//!   `TokenBlocks`) and the documents inside each block (keyed by
//!   `(seed, epoch, shard, block)`, domain `TokenDocs`). A run of rows
//!   therefore reads a few contiguous byte ranges (one or two per block it
//!   touches, see [`reads`]), while epochs see different document orders.
//!   The shard order, the shuffle buffer and the split over ranks work on
//!   whole rows above this.
//!
//! - **`bestfit`** (fine-tuning). First-fit decreasing over the shard's
//!   documents into rows of at most `L` tokens: a document longer than `L`
//!   is cut into pieces of `L` (each a full row of its own) and its shorter
//!   last piece is packed like a document; a document of at most `L` tokens
//!   is never cut. Items are taken longest first, ties by document (then
//!   piece) index, each into the first row with room, so the rows are a
//!   pure function of the lengths and do not change with the epoch (the
//!   shard order and the shuffle buffer reorder rows every epoch). Rows are
//!   numbered in the order first-fit opens them: every full piece of `L`
//!   first, in document order, then the rows of the shorter items. It runs
//!   in `O(n log n)` (a max-tree over the rows' room).
//!
//! - **`none`**. Row `d` is document `d`: its first `min(len, L)` tokens.
//!   *The truncation rule*: the rest of a longer document is cut and never
//!   trained; an empty document is a row of padding only.
//!
//! Empty documents hold no tokens and appear in no `concat` or `bestfit`
//! row.
//!
//! # Use
//!
//! The coordinator counts rows with [`rows_from_totals`] (from the
//! manifest's totals; `bestfit` needs [`shard_rows`] over the index). A
//! worker turns a span of rows into [`RowPieces`] with a [`ShardLayout`]
//! (made once per shard and epoch, then one cheap call per run) or
//! [`row_pieces`] (one call, the layout worked out again), reads the
//! token ranges [`reads`] merges, and hands each row's tokens and piece
//! lengths to [`rows::build`](super::rows::build).
//!
//! Costs, for a shard of `n` documents: `concat` `O(blocks)` per layout,
//! then per run the pieces plus the documents of the blocks it touches;
//! `bestfit` `O(n log n)` per layout, then the pieces; `none` the pieces.

mod bestfit;
mod concat;
#[cfg(test)]
mod tests;

use std::ops::Range;

use super::{DocIndex, Packing, SequenceSpec};

pub use concat::BLOCK_TOKENS;

/// Rows of a shard for `spec`. concat: `(tokens - 1) / L` (0 when
/// `tokens < 2`); bestfit: the number of first-fit-decreasing rows; none:
/// documents.
///
/// # Panics
///
/// If `spec.length` is 0.
pub fn shard_rows(spec: SequenceSpec, index: &DocIndex) -> u64 {
    let length = length(spec);
    match spec.packing {
        Packing::Concat => concat::rows(index.tokens(), length),
        Packing::BestFit => bestfit::BestFit::new(index, length).rows(),
        Packing::None => index.documents(),
    }
}

/// The same as [`shard_rows`] from a shard's totals where they suffice:
/// `Some` for concat and none, `None` for bestfit (which needs the lengths).
///
/// # Panics
///
/// If `spec.length` is 0.
pub fn rows_from_totals(spec: SequenceSpec, tokens: u64, documents: u64) -> Option<u64> {
    let length = length(spec);
    match spec.packing {
        Packing::Concat => Some(concat::rows(tokens, length)),
        Packing::BestFit => None,
        Packing::None => Some(documents),
    }
}

/// Tokens `start..end` (token offsets in the shard's stream, inside
/// document `doc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Piece {
    pub doc: u64,
    pub start: u64,
    pub end: u64,
}

impl Piece {
    /// Tokens in the piece.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Row `i` of the call holds `pieces[bounds[i]..bounds[i+1]]`, in row
/// order. `bounds` has one entry more than there are rows and starts at 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowPieces {
    pub pieces: Vec<Piece>,
    pub bounds: Vec<usize>,
}

impl Default for RowPieces {
    fn default() -> Self {
        Self {
            pieces: Vec::new(),
            bounds: vec![0],
        }
    }
}

impl RowPieces {
    /// Rows held.
    pub fn rows(&self) -> usize {
        self.bounds.len() - 1
    }

    /// The pieces of row `i` of the call, in order.
    ///
    /// # Panics
    ///
    /// If `i >= rows()`.
    pub fn row(&self, i: usize) -> &[Piece] {
        &self.pieces[self.bounds[i]..self.bounds[i + 1]]
    }

    /// Tokens in row `i` of the call.
    pub fn row_tokens(&self, i: usize) -> u64 {
        self.row(i).iter().map(Piece::len).sum()
    }

    /// Closes the current row: the pieces pushed since the last close are
    /// its pieces.
    fn close_row(&mut self) {
        self.bounds.push(self.pieces.len());
    }
}

/// Rows asked for past the end of a shard (the plan and the shard's index
/// disagree: an index that changed since planning, or a bad span).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "rows {start}..{end} of shard {shard} asked for, but under {packing} packing with length \
     {length} the shard has {rows} rows (was the shard's index changed after the job was planned?)"
)]
pub struct RowsOutOfRange {
    pub shard: u64,
    pub start: u64,
    pub end: u64,
    pub rows: u64,
    pub packing: Packing,
    pub length: u32,
}

/// The pieces of rows `rows` of shard `shard` (its index in its dataset,
/// for seeding) in epoch `epoch`.
///
/// Each call works out the shard's layout again (for `bestfit`, first-fit
/// decreasing over the whole shard): for many runs of one shard in one
/// epoch, make a [`ShardLayout`] once.
///
/// # Panics
///
/// If `spec.length` is 0 or `rows` is not inside `0..shard_rows(spec,
/// index)` (see [`try_row_pieces`] for the checked form).
pub fn row_pieces(
    spec: SequenceSpec,
    index: &DocIndex,
    seed: u64,
    epoch: u64,
    shard: u64,
    rows: Range<u64>,
) -> RowPieces {
    try_row_pieces(spec, index, seed, epoch, shard, rows).unwrap_or_else(|error| panic!("{error}"))
}

/// [`row_pieces`], with an error instead of a panic when `rows` is not
/// inside `0..shard_rows(spec, index)` (or is reversed).
///
/// # Panics
///
/// If `spec.length` is 0.
pub fn try_row_pieces(
    spec: SequenceSpec,
    index: &DocIndex,
    seed: u64,
    epoch: u64,
    shard: u64,
    rows: Range<u64>,
) -> Result<RowPieces, RowsOutOfRange> {
    ShardLayout::new(spec, index, seed, epoch, shard).row_pieces(rows)
}

/// The rows of one shard for one spec in one epoch, worked out once, so
/// that many runs of its rows (a rank's span, dynamic units) cost only
/// their own pieces: [`row_pieces`] without redoing the shard's layout
/// (the block order for `concat`, first-fit decreasing for `bestfit`).
#[derive(Debug)]
pub struct ShardLayout<'a> {
    spec: SequenceSpec,
    index: &'a DocIndex,
    shard: u64,
    rows: u64,
    packed: Packed,
}

#[derive(Debug)]
enum Packed {
    Concat(concat::Order),
    BestFit(bestfit::BestFit),
    None,
}

impl<'a> ShardLayout<'a> {
    /// The layout of shard `shard` (its index in its dataset, for seeding)
    /// with document index `index` in epoch `epoch`.
    ///
    /// # Panics
    ///
    /// If `spec.length` is 0.
    pub fn new(spec: SequenceSpec, index: &'a DocIndex, seed: u64, epoch: u64, shard: u64) -> Self {
        let length = length(spec);
        let (rows, packed) = match spec.packing {
            Packing::Concat => (
                concat::rows(index.tokens(), length),
                Packed::Concat(concat::Order::new(index, [seed, epoch, shard])),
            ),
            Packing::BestFit => {
                let packed = bestfit::BestFit::new(index, length);
                (packed.rows(), Packed::BestFit(packed))
            }
            Packing::None => (index.documents(), Packed::None),
        };
        Self {
            spec,
            index,
            shard,
            rows,
            packed,
        }
    }

    /// The shard's rows ([`shard_rows`]).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The pieces of rows `rows`; an error when they are not inside
    /// `0..self.rows()` (or reversed).
    pub fn row_pieces(&self, rows: Range<u64>) -> Result<RowPieces, RowsOutOfRange> {
        if rows.start > rows.end || rows.end > self.rows {
            return Err(RowsOutOfRange {
                shard: self.shard,
                start: rows.start,
                end: rows.end,
                rows: self.rows,
                packing: self.spec.packing,
                length: self.spec.length,
            });
        }
        let length = u64::from(self.spec.length);
        Ok(match &self.packed {
            Packed::Concat(order) => order.row_pieces(self.index, length, rows),
            Packed::BestFit(packed) => packed.row_pieces(self.index, rows),
            Packed::None => none_pieces(self.index, length, rows),
        })
    }
}

/// `none`: row `d` is the first `min(len, L)` tokens of document `d`.
fn none_pieces(index: &DocIndex, length: u64, rows: Range<u64>) -> RowPieces {
    let count = (rows.end - rows.start) as usize;
    let mut out = RowPieces {
        pieces: Vec::with_capacity(count),
        bounds: Vec::with_capacity(count + 1),
    };
    out.bounds.push(0);
    for doc in rows {
        let range = index.doc(doc);
        let end = range.end.min(range.start + length);
        if range.start < end {
            out.pieces.push(Piece {
                doc,
                start: range.start,
                end,
            });
        }
        out.close_row();
    }
    out
}

/// The token ranges to read for `pieces`: sorted, and overlapping ones,
/// adjacent ones and ones closer than `max_gap` tokens merged (reading a
/// gap of up to `max_gap` tokens is cheaper than one more request). Empty
/// pieces need no read.
pub fn reads(pieces: &[Piece], max_gap: u64) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = pieces
        .iter()
        .filter(|piece| !piece.is_empty())
        .map(|piece| piece.start..piece.end)
        .collect();
    ranges.sort_unstable_by_key(|range| (range.start, range.end));
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(max_gap) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

fn length(spec: SequenceSpec) -> u64 {
    assert!(spec.length > 0, "a sequence length of 0 tokens has no rows");
    u64::from(spec.length)
}
