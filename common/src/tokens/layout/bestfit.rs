//! `bestfit`: first-fit decreasing of a shard's documents into rows of at
//! most `L` tokens, in `O(n log n)`.

use std::cmp::Reverse;
use std::ops::Range;

use super::{Piece, RowPieces};
use crate::tokens::DocIndex;

/// A shard packed first-fit decreasing. Rows `0..full` are the full pieces
/// of `L` tokens, in document order; row `full + b` is bin `b` of the
/// shorter items (documents of fewer than `L` tokens and the last pieces
/// of longer ones).
#[derive(Debug)]
pub(super) struct BestFit {
    length: u64,
    /// `full_before[d]`: full pieces of the documents before `d`.
    full_before: Vec<u64>,
    /// The short items, bin by bin: bin `b` holds
    /// `items[item_bounds[b]..item_bounds[b + 1]]`, in the order first-fit
    /// put them there.
    items: Vec<Piece>,
    item_bounds: Vec<usize>,
}

impl BestFit {
    pub(super) fn new(index: &DocIndex, length: u64) -> Self {
        let offsets = index.offsets();
        let docs = offsets.len() - 1;
        let mut full_before = Vec::with_capacity(docs + 1);
        let mut full = 0u64;
        let mut short = Vec::new();
        for doc in 0..docs {
            full_before.push(full);
            let (start, end) = (offsets[doc], offsets[doc + 1]);
            let pieces = (end - start) / length;
            full += pieces;
            let rest = start + pieces * length;
            if rest < end {
                short.push(Piece {
                    doc: doc as u64,
                    start: rest,
                    end,
                });
            }
        }
        full_before.push(full);
        // Longest first; equal lengths by document (one short item per
        // document, so the key is unique and the order total).
        short.sort_unstable_by_key(|piece| (Reverse(piece.len()), piece.doc));
        let mut tree = Room::new(short.len(), length);
        let bins: Vec<u32> = short.iter().map(|piece| tree.put(piece.len())).collect();
        // Group by bin, keeping first-fit's order within each (a counting
        // sort, stable).
        let used = tree.opened;
        let mut item_bounds = vec![0usize; used + 1];
        for &bin in &bins {
            item_bounds[bin as usize + 1] += 1;
        }
        for b in 0..used {
            item_bounds[b + 1] += item_bounds[b];
        }
        let mut next = item_bounds.clone();
        let mut items = vec![
            Piece {
                doc: 0,
                start: 0,
                end: 0,
            };
            short.len()
        ];
        for (piece, &bin) in short.iter().zip(&bins) {
            items[next[bin as usize]] = *piece;
            next[bin as usize] += 1;
        }
        Self {
            length,
            full_before,
            items,
            item_bounds,
        }
    }

    fn full(&self) -> u64 {
        *self
            .full_before
            .last()
            .expect("one entry per document and one more")
    }

    pub(super) fn rows(&self) -> u64 {
        self.full() + (self.item_bounds.len() - 1) as u64
    }

    /// The pieces of rows `rows` (inside `0..rows()`).
    pub(super) fn row_pieces(&self, index: &DocIndex, rows: Range<u64>) -> RowPieces {
        let mut out = RowPieces::default();
        out.bounds.reserve((rows.end - rows.start) as usize);
        let full = self.full();
        let full_rows = rows.start.min(full)..rows.end.min(full);
        if !full_rows.is_empty() {
            // The document holding full piece `full_rows.start`, then on.
            let mut doc = self
                .full_before
                .partition_point(|&before| before <= full_rows.start)
                - 1;
            for row in full_rows {
                while self.full_before[doc + 1] <= row {
                    doc += 1;
                }
                let start =
                    index.doc(doc as u64).start + (row - self.full_before[doc]) * self.length;
                out.pieces.push(Piece {
                    doc: doc as u64,
                    start,
                    end: start + self.length,
                });
                out.close_row();
            }
        }
        let bins = rows.start.max(full) - full..rows.end.max(full) - full;
        for bin in bins {
            let bin = bin as usize;
            out.pieces
                .extend_from_slice(&self.items[self.item_bounds[bin]..self.item_bounds[bin + 1]]);
            out.close_row();
        }
        out
    }
}

/// The room left in each bin, as a max-tree: `put` finds the first bin with
/// room for an item in `O(log n)`. Bins not yet opened have the whole row's
/// room, and they lie right of every opened bin, so "the first bin with
/// room" is first-fit's choice, opening a new bin when no open one fits.
struct Room {
    /// Leaves at `size..2·size`; node `i` holds the max of `2i` and `2i+1`.
    /// (u32: a row is at most `MAX_SEQUENCE_LENGTH` tokens; half the
    /// memory of u64 keeps more of the tree in cache.)
    tree: Vec<u32>,
    size: usize,
    opened: usize,
}

impl Room {
    fn new(bins: usize, length: u64) -> Self {
        let length = u32::try_from(length).expect("a row length fits u32");
        let size = bins.next_power_of_two().max(1);
        let mut tree = vec![0; 2 * size];
        tree[size..size + bins].fill(length);
        for node in (1..size).rev() {
            tree[node] = tree[2 * node].max(tree[2 * node + 1]);
        }
        Self {
            tree,
            size,
            opened: 0,
        }
    }

    /// Puts an item of `len` tokens (at most the row length) into the
    /// first bin with room; returns the bin.
    fn put(&mut self, len: u64) -> u32 {
        let len = len as u32;
        debug_assert!(self.tree[1] >= len, "every item fits an unopened bin");
        let mut node = 1;
        while node < self.size {
            node = if self.tree[2 * node] >= len {
                2 * node
            } else {
                2 * node + 1
            };
        }
        self.tree[node] -= len;
        let bin = node - self.size;
        self.opened = self.opened.max(bin + 1);
        node /= 2;
        while node >= 1 {
            let max = self.tree[2 * node].max(self.tree[2 * node + 1]);
            if self.tree[node] == max {
                // The maxima above are unchanged too.
                break;
            }
            self.tree[node] = max;
            node /= 2;
        }
        bin as u32
    }
}
