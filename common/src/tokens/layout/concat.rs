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
#[derive(Debug)]
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

/// A shard's block order in one epoch, with where each block starts in the
/// epoch's stream: what every run of rows of the shard in that epoch
/// shares. `O(blocks)` memory; the documents inside a block are ordered
/// when a run reaches it.
#[derive(Debug)]
pub(super) struct Order {
    blocks: Blocks,
    /// Block `order[i]` is the `i`-th in the stream ...
    order: Vec<u32>,
    /// ... and starts at stream token `starts[i]` (`starts[count]` is the
    /// shard's tokens).
    starts: Vec<u64>,
    key: [u64; 3],
}

impl Order {
    /// The order of epoch key `key` = `(seed, epoch, shard)`.
    pub(super) fn new(index: &DocIndex, key: [u64; 3]) -> Self {
        let blocks = Blocks::new(index);
        let mut order: Vec<u32> = (0..blocks.count() as u32).collect();
        seed::shuffle(&mut seed::rng(Domain::TokenBlocks, &key), &mut order);
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut at = 0;
        starts.push(at);
        for &block in &order {
            at += blocks.tokens(index, block as usize);
            starts.push(at);
        }
        Self {
            blocks,
            order,
            starts,
            key,
        }
    }

    /// Sets `docs` to the documents of the `i`-th block of the stream, in
    /// the epoch's order.
    fn block_docs(&self, index: &DocIndex, i: usize, docs: &mut Vec<u64>) {
        let block = self.order[i] as usize;
        let [seed, epoch, shard] = self.key;
        let slot = self.blocks.slot(index, block);
        docs.clear();
        docs.extend(self.blocks.docs(block));
        seed::shuffle(
            &mut seed::rng(Domain::TokenDocs, &[seed, epoch, shard, slot]),
            docs,
        );
    }

    /// The pieces of rows `rows` (inside `0..rows(tokens, length)`).
    pub(super) fn row_pieces(&self, index: &DocIndex, length: u64, rows: Range<u64>) -> RowPieces {
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
        // The block holding the run's first token (`first` is inside the
        // stream, so it is not the end sentinel).
        let from = self.starts.partition_point(|&start| start <= first) - 1;
        let offsets = index.offsets();
        let mut docs = Vec::new();
        for i in from..self.order.len() {
            let mut at = self.starts[i];
            self.block_docs(index, i, &mut docs);
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
        unreachable!("rows {rows:?} end inside the shard's stream")
    }

    /// The shard's documents in the epoch's stream order.
    #[cfg(test)]
    pub(super) fn documents(&self, index: &DocIndex) -> Vec<u64> {
        let mut all = Vec::with_capacity(index.documents() as usize);
        let mut docs = Vec::new();
        for i in 0..self.order.len() {
            self.block_docs(index, i, &mut docs);
            all.extend_from_slice(&docs);
        }
        all
    }
}
