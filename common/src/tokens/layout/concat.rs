//! `concat`: a shard's documents in a seeded per-epoch order, one stream
//! cut into windows of `L + 1` tokens that overlap by one.

use std::ops::Range;

use super::{Piece, RowPieces};
use crate::plan::seed::{self, Domain};
use crate::tokens::DocIndex;

/// About how many tokens of the file a block of documents spans: document
/// `d` belongs to block `offsets[d] / BLOCK_TOKENS`. Big enough that a run
/// of rows reads few byte ranges, small enough that an epoch's order mixes
/// a shard's documents well.
pub const BLOCK_TOKENS: u64 = 1 << 18;

/// Rows of a stream of `tokens` tokens: whole windows of `length + 1`
/// tokens advancing by `length`.
pub(super) fn rows(tokens: u64, length: u64) -> u64 {
    if tokens < 2 {
        0
    } else {
        (tokens - 1) / length
    }
}

/// The non-empty blocks of a shard, in file order: block `b` is documents
/// `first[b]..first[b + 1]`, all starting inside one `BLOCK_TOKENS` slot of
/// the file; its seed key is that slot's number.
struct Blocks {
    first: Vec<u64>,
}

impl Blocks {
    fn new(index: &DocIndex) -> Self {
        let offsets = index.offsets();
        let docs = offsets.len() - 1;
        let starts = &offsets[..docs];
        let mut first = Vec::with_capacity(docs / 64 + 2);
        let mut doc = 0;
        while doc < docs {
            first.push(doc as u64);
            let slot = starts[doc] / BLOCK_TOKENS;
            // Binary search from `doc` on: O(log n) per block, and the
            // number of blocks is at most the number of documents however
            // long the documents are.
            let next_start = (slot + 1).saturating_mul(BLOCK_TOKENS);
            doc += starts[doc..].partition_point(|&start| start < next_start);
        }
        first.push(docs as u64);
        Self { first }
    }

    fn count(&self) -> usize {
        self.first.len() - 1
    }

    fn docs(&self, block: usize) -> Range<u64> {
        self.first[block]..self.first[block + 1]
    }

    /// The number that keys block `block`'s document order.
    fn slot(&self, index: &DocIndex, block: usize) -> u64 {
        index.offsets()[self.first[block] as usize] / BLOCK_TOKENS
    }

    fn tokens(&self, index: &DocIndex, block: usize) -> u64 {
        let offsets = index.offsets();
        offsets[self.first[block + 1] as usize] - offsets[self.first[block] as usize]
    }
}

/// Cuts the stream into rows as document runs arrive, in stream order.
struct Cutter {
    length: u64,
    /// The row being filled and the stream position it ends at
    /// (exclusive): row `r` is stream tokens `r·L .. r·L + L + 1`.
    row: u64,
    row_end: u64,
    end_row: u64,
    out: RowPieces,
}

impl Cutter {
    fn done(&self) -> bool {
        self.row == self.end_row
    }

    /// Takes stream tokens `from..to` (`from` at or after the start of the
    /// current row), which are tokens `doc_start + (from - at)..` of
    /// document `doc` whose first token is at stream position `at`.
    fn take(&mut self, doc: u64, doc_start: u64, at: u64, mut from: u64, to: u64) {
        while from < to && !self.done() {
            let end = to.min(self.row_end);
            self.out.pieces.push(Piece {
                doc,
                start: doc_start + (from - at),
                end: doc_start + (end - at),
            });
            if end == self.row_end {
                self.out.close_row();
                self.row += 1;
                // The next row starts at the token this one ended with.
                from = end - 1;
                self.row_end = end + self.length;
            } else {
                from = end;
            }
        }
    }
}

/// The blocks in the order of epoch key `key` = `(seed, epoch, shard)`.
fn block_order(blocks: &Blocks, key: [u64; 3]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..blocks.count() as u32).collect();
    seed::shuffle(&mut seed::rng(Domain::TokenBlocks, &key), &mut order);
    order
}

/// Sets `docs` to the documents of block `block` in the order of epoch key
/// `key`.
fn block_docs(index: &DocIndex, blocks: &Blocks, block: usize, key: [u64; 3], docs: &mut Vec<u64>) {
    let [seed, epoch, shard] = key;
    let slot = blocks.slot(index, block);
    docs.clear();
    docs.extend(blocks.docs(block));
    seed::shuffle(
        &mut seed::rng(Domain::TokenDocs, &[seed, epoch, shard, slot]),
        docs,
    );
}

/// The pieces of rows `rows` (inside `0..rows(tokens, length)`) of the
/// shard in the order of epoch key `key` = `(seed, epoch, shard)`.
pub(super) fn row_pieces(
    index: &DocIndex,
    length: u64,
    key: [u64; 3],
    rows: Range<u64>,
) -> RowPieces {
    let mut cutter = Cutter {
        length,
        row: rows.start,
        row_end: rows.start * length + length + 1,
        end_row: rows.end,
        out: RowPieces::default(),
    };
    if cutter.done() {
        return cutter.out;
    }
    let count = (rows.end - rows.start) as usize;
    // About one piece per row plus one per document boundary.
    cutter.out.bounds.reserve(count);
    cutter.out.pieces.reserve(count + count / 4);
    let first = rows.start * length;
    let blocks = Blocks::new(index);
    let offsets = index.offsets();
    let mut at = 0u64;
    let mut docs = Vec::new();
    for block in block_order(&blocks, key) {
        let block = block as usize;
        let tokens = blocks.tokens(index, block);
        if at + tokens <= first {
            // Wholly before the first row: skipped without ordering it.
            at += tokens;
            continue;
        }
        block_docs(index, &blocks, block, key, &mut docs);
        for &doc in &docs {
            let (start, end) = (offsets[doc as usize], offsets[doc as usize + 1]);
            let doc_end = at + (end - start);
            if doc_end > first {
                cutter.take(doc, start, at, at.max(first), doc_end);
                if cutter.done() {
                    return cutter.out;
                }
            }
            at = doc_end;
        }
    }
    unreachable!("rows {rows:?} end inside the shard's {at} tokens")
}

/// The shard's documents in the stream order of epoch key `key`.
#[cfg(test)]
pub(super) fn document_order(index: &DocIndex, key: [u64; 3]) -> Vec<u64> {
    let blocks = Blocks::new(index);
    let mut all = Vec::with_capacity(index.documents() as usize);
    let mut docs = Vec::new();
    for block in block_order(&blocks, key) {
        block_docs(index, &blocks, block as usize, key, &mut docs);
        all.extend_from_slice(&docs);
    }
    all
}
