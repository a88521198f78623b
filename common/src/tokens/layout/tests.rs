use std::collections::HashSet;

use proptest::prelude::*;

use super::concat::Order;
use super::*;

fn spec(length: u32, packing: Packing) -> SequenceSpec {
    SequenceSpec { length, packing }
}

/// The shard's documents in the stream order of `(seed, epoch, shard)`.
fn document_order(index: &DocIndex, key: [u64; 3]) -> Vec<u64> {
    Order::new(index, key).documents(index)
}

fn piece(doc: u64, start: u64, end: u64) -> Piece {
    Piece { doc, start, end }
}

/// Row by row.
fn split_rows(pieces: &RowPieces) -> Vec<Vec<Piece>> {
    (0..pieces.rows()).map(|i| pieces.row(i).to_vec()).collect()
}

fn all_rows(spec: SequenceSpec, index: &DocIndex, key: [u64; 3]) -> RowPieces {
    let rows = shard_rows(spec, index);
    row_pieces(spec, index, key[0], key[1], key[2], 0..rows)
}

/// Appends `pieces` to `stream`, merging a piece that continues the last
/// one (same document, contiguous).
fn extend_merged(stream: &mut Vec<Piece>, pieces: impl IntoIterator<Item = Piece>) {
    for p in pieces {
        if p.is_empty() {
            continue;
        }
        match stream.last_mut() {
            Some(last) if last.doc == p.doc && last.end == p.start => last.end = p.end,
            _ => stream.push(p),
        }
    }
}

/// The first `tokens` tokens of the documents in `order`, as merged pieces.
fn stream_prefix(index: &DocIndex, order: &[u64], tokens: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut left = tokens;
    for &doc in order {
        let range = index.doc(doc);
        let take = range.end.min(range.start + left);
        extend_merged(&mut out, [piece(doc, range.start, take)]);
        left -= take - range.start;
    }
    assert_eq!(left, 0, "the stream holds {tokens} tokens");
    out
}

/// Checks the `concat` rows of the whole shard against the epoch's stream:
/// each row is `L + 1` tokens, each piece inside its document, consecutive
/// rows share exactly one token, and the rows with the shared tokens taken
/// once are the stream's first `rows·L + 1` tokens, the rest (the tail)
/// fewer than `L + 1`.
fn check_concat(index: &DocIndex, length: u32, key: [u64; 3]) {
    let spec = spec(length, Packing::Concat);
    let length = u64::from(length);
    let pieces = all_rows(spec, index, key);
    let rows = pieces.rows() as u64;
    assert_eq!(rows, shard_rows(spec, index));
    let mut stream = Vec::new();
    for i in 0..pieces.rows() {
        let row = pieces.row(i);
        assert_eq!(pieces.row_tokens(i), length + 1, "row {i}: {row:?}");
        for p in row {
            let doc = index.doc(p.doc);
            assert!(
                !p.is_empty() && doc.start <= p.start && p.end <= doc.end,
                "{p:?}"
            );
        }
        if i == 0 {
            extend_merged(&mut stream, row.iter().copied());
        } else {
            let (last, first) = (*pieces.row(i - 1).last().expect("a row"), row[0]);
            assert_eq!(
                (first.doc, first.start),
                (last.doc, last.end - 1),
                "row {i}"
            );
            let mut rest = row.to_vec();
            rest[0].start += 1;
            extend_merged(&mut stream, rest);
        }
    }
    let covered = if rows == 0 { 0 } else { rows * length + 1 };
    let order = document_order(index, key);
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..index.documents()).collect::<Vec<_>>());
    assert_eq!(stream, stream_prefix(index, &order, covered));
    let tail = index.tokens() - covered;
    assert!(
        tail < length + 1 || rows == 0 && index.tokens() < 2,
        "tail {tail}"
    );
}

/// First-fit decreasing as the textbook writes it: `O(n · rows)`.
fn naive_ffd(index: &DocIndex, length: u64) -> Vec<Vec<Piece>> {
    let mut items = Vec::new();
    for doc in 0..index.documents() {
        let range = index.doc(doc);
        let mut start = range.start;
        let mut k = 0;
        while start < range.end {
            let end = range.end.min(start + length);
            items.push((k, piece(doc, start, end)));
            start = end;
            k += 1;
        }
    }
    items.sort_by_key(|(k, p)| (std::cmp::Reverse(p.len()), p.doc, *k));
    let mut bins: Vec<(u64, Vec<Piece>)> = Vec::new();
    for (_, p) in items {
        match bins.iter_mut().find(|(room, _)| *room >= p.len()) {
            Some((room, bin)) => {
                *room -= p.len();
                bin.push(p);
            }
            None => bins.push((length - p.len(), vec![p])),
        }
    }
    bins.into_iter().map(|(_, bin)| bin).collect()
}

fn check_bestfit(index: &DocIndex, length: u32) {
    let spec = spec(length, Packing::BestFit);
    let length = u64::from(length);
    let pieces = all_rows(spec, index, [0, 0, 0]);
    let rows = split_rows(&pieces);
    assert_eq!(rows.len() as u64, shard_rows(spec, index));
    let mut per_doc: Vec<Vec<Piece>> = vec![Vec::new(); index.documents() as usize];
    for (i, row) in rows.iter().enumerate() {
        assert!(
            pieces.row_tokens(i) <= length,
            "row {i} over {length}: {row:?}"
        );
        assert!(!row.is_empty(), "row {i} is empty");
        for p in row {
            assert!(!p.is_empty());
            per_doc[p.doc as usize].push(*p);
        }
    }
    for (doc, got) in per_doc.iter_mut().enumerate() {
        let range = index.doc(doc as u64);
        got.sort_by_key(|p| p.start);
        let mut at = range.start;
        for p in got.iter() {
            assert_eq!(p.start, at, "doc {doc}: {got:?}");
            at = p.end;
        }
        assert_eq!(at, range.end, "doc {doc}: {got:?}");
        if range.end - range.start <= length {
            assert!(got.len() <= 1, "doc {doc} fits a row but was cut: {got:?}");
        }
    }
}

fn lengths_small() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![4 => 0u64..40, 1 => 0u64..400], 0..60)
}

/// Shards of several blocks.
fn lengths_large() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![3 => 0u64..20_000, 1 => 0u64..300_000], 20..200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn concat_rows_cover_the_epochs_stream_exactly_once(
        lengths in lengths_small(), length in 1u32..48, key in any::<[u64; 3]>(),
    ) {
        check_concat(&DocIndex::from_lengths(lengths), length, key);
    }

    #[test]
    fn concat_rows_cover_the_stream_of_a_shard_of_many_blocks(
        lengths in lengths_large(), length in 1024u32..8192, key in any::<[u64; 3]>(),
    ) {
        check_concat(&DocIndex::from_lengths(lengths), length, key);
    }

    /// Rows `a..b` then `b..c` are rows `a..c`, for every mode and split.
    #[test]
    fn row_pieces_of_adjacent_runs_join_into_the_whole_run(
        lengths in prop_oneof![lengths_small(), lengths_large()],
        length in prop_oneof![1u32..48, 1024u32..8192],
        key in any::<[u64; 3]>(),
        cuts in any::<[prop::sample::Index; 3]>(),
    ) {
        let index = DocIndex::from_lengths(lengths);
        for packing in [Packing::Concat, Packing::BestFit, Packing::None] {
            let spec = spec(length, packing);
            let rows = shard_rows(spec, &index);
            let mut at: Vec<u64> = cuts.iter().map(|c| c.index(rows as usize + 1) as u64).collect();
            at.sort_unstable();
            let [a, b, c] = [at[0], at[1], at[2]];
            // Runs of one `ShardLayout`, and of the free function.
            let layout = ShardLayout::new(spec, &index, key[0], key[1], key[2]);
            prop_assert_eq!(layout.rows(), rows);
            let run = |range: Range<u64>| split_rows(&layout.row_pieces(range).expect("inside"));
            let mut joined = run(a..b);
            joined.extend(run(b..c));
            let whole = split_rows(&row_pieces(spec, &index, key[0], key[1], key[2], a..c));
            prop_assert_eq!(joined, whole, "{} rows {}..{}..{}", packing, a, b, c);
        }
    }

    #[test]
    fn bestfit_packs_every_token_once_within_rows_and_never_cuts_a_fitting_document(
        lengths in prop_oneof![lengths_small(), lengths_large()],
        length in prop_oneof![1u32..48, 1024u32..8192],
    ) {
        check_bestfit(&DocIndex::from_lengths(lengths), length);
    }

    /// The rows are first-fit decreasing's, row for row and piece for piece.
    #[test]
    fn bestfit_rows_are_those_of_textbook_first_fit_decreasing(
        lengths in lengths_small(), length in 1u32..48,
    ) {
        let index = DocIndex::from_lengths(lengths);
        let spec = spec(length, Packing::BestFit);
        let got = split_rows(&all_rows(spec, &index, [0, 0, 0]));
        prop_assert_eq!(got, naive_ffd(&index, u64::from(length)));
    }

    #[test]
    fn none_row_is_its_document_truncated(lengths in lengths_small(), length in 1u32..48) {
        let index = DocIndex::from_lengths(lengths);
        let spec = spec(length, Packing::None);
        let rows = split_rows(&all_rows(spec, &index, [0, 0, 0]));
        prop_assert_eq!(rows.len() as u64, index.documents());
        for (doc, row) in rows.iter().enumerate() {
            let range = index.doc(doc as u64);
            let end = range.end.min(range.start + u64::from(length));
            let want = if range.is_empty() { vec![] } else { vec![piece(doc as u64, range.start, end)] };
            prop_assert_eq!(row, &want);
        }
    }

    #[test]
    fn reads_cover_every_piece_sorted_and_merged(
        lengths in lengths_small(), length in 1u32..48, key in any::<[u64; 3]>(),
        packing in prop_oneof![Just(Packing::Concat), Just(Packing::BestFit), Just(Packing::None)],
        max_gap in 0u64..20, first in any::<prop::sample::Index>(),
    ) {
        let index = DocIndex::from_lengths(lengths);
        let spec = spec(length, packing);
        let rows = shard_rows(spec, &index);
        let first = first.index(rows as usize + 1) as u64;
        let pieces = row_pieces(spec, &index, key[0], key[1], key[2], first..rows).pieces;
        let ranges = reads(&pieces, max_gap);
        for w in ranges.windows(2) {
            prop_assert!(w[0].end + max_gap < w[1].start, "not merged: {:?}", w);
        }
        for p in &pieces {
            prop_assert!(ranges.iter().any(|r| r.start <= p.start && p.end <= r.end), "{:?} unread", p);
        }
        // Nothing read but pieces and gaps of at most `max_gap`.
        let mut covered: Vec<Range<u64>> = pieces.iter().map(|p| p.start..p.end).collect();
        covered.sort_unstable_by_key(|r| r.start);
        for r in &ranges {
            let mut at = r.start;
            for c in covered.iter().filter(|c| r.start <= c.start && c.end <= r.end) {
                prop_assert!(c.start <= at + max_gap, "gap before {:?} in {:?}", c, r);
                at = at.max(c.end);
            }
            prop_assert_eq!(at, r.end);
        }
    }

    #[test]
    fn rows_from_totals_agree_with_shard_rows(lengths in lengths_small(), length in 1u32..48) {
        let index = DocIndex::from_lengths(lengths);
        for packing in [Packing::Concat, Packing::BestFit, Packing::None] {
            let spec = spec(length, packing);
            let totals = rows_from_totals(spec, index.tokens(), index.documents());
            prop_assert_eq!(totals.is_none(), packing == Packing::BestFit);
            if let Some(rows) = totals {
                prop_assert_eq!(rows, shard_rows(spec, &index));
            }
        }
    }
}

#[test]
fn concat_rows_of_a_small_shard_by_hand() {
    // One block; documents 0..3 of 3, 1, 4 tokens at offsets 0, 3, 4.
    let index = DocIndex::from_lengths([3, 1, 4]);
    let spec = spec(3, Packing::Concat);
    assert_eq!(shard_rows(spec, &index), 2);
    let key = [7, 1, 0];
    let order = document_order(&index, key);
    let mut stream = Vec::new();
    for &doc in &order {
        stream.extend(index.doc(doc).map(|t| (doc, t)));
    }
    let pieces = all_rows(spec, &index, key);
    for (i, row) in split_rows(&pieces).iter().enumerate() {
        let tokens: Vec<(u64, u64)> = row
            .iter()
            .flat_map(|p| (p.start..p.end).map(|t| (p.doc, t)))
            .collect();
        assert_eq!(
            tokens,
            stream[3 * i..3 * i + 4],
            "row {i} of order {order:?}"
        );
    }
    // 8 tokens, rows of 4 advancing by 3: the last token is the tail.
    assert_eq!(stream.len(), 8);
}

#[test]
fn concat_orders_change_with_the_epoch_and_repeat_with_the_key() {
    // 800 documents of 1000..=11_000 tokens (4.8 M): about 18 blocks.
    let index = DocIndex::from_lengths((0..800u64).map(|d| 1000 + (d * 7919) % 10_001));
    let mut orders = HashSet::new();
    for epoch in 0..20 {
        let order = document_order(&index, [5, epoch, 3]);
        assert_eq!(order, document_order(&index, [5, epoch, 3]));
        // A block's documents stay together (few ranged reads per run).
        let slots: Vec<u64> = order
            .iter()
            .map(|&d| index.doc(d).start / BLOCK_TOKENS)
            .collect();
        let mut runs = slots.clone();
        runs.dedup();
        let distinct: HashSet<u64> = slots.iter().copied().collect();
        assert_eq!(
            runs.len(),
            distinct.len(),
            "epoch {epoch}: a block is split"
        );
        assert!(distinct.len() > 10);
        assert!(orders.insert(order), "epoch {epoch} repeats an order");
    }
    assert_ne!(
        document_order(&index, [5, 0, 3]),
        document_order(&index, [6, 0, 3])
    );
    assert_ne!(
        document_order(&index, [5, 0, 3]),
        document_order(&index, [5, 0, 4])
    );
    let spec = spec(2048, Packing::Concat);
    let rows = shard_rows(spec, &index);
    assert_eq!(
        row_pieces(spec, &index, 5, 2, 3, 10..rows),
        row_pieces(spec, &index, 5, 2, 3, 10..rows)
    );
    assert_ne!(
        row_pieces(spec, &index, 5, 2, 3, 10..rows),
        row_pieces(spec, &index, 5, 1, 3, 10..rows)
    );
}

#[test]
fn bestfit_rows_by_hand() {
    // L = 4: documents of 5 (a full piece and 1), 2, 3, 4 (full), 0, 1.
    let index = DocIndex::from_lengths([5, 2, 3, 4, 0, 1]);
    let rows = split_rows(&all_rows(spec(4, Packing::BestFit), &index, [0, 0, 0]));
    assert_eq!(
        rows,
        vec![
            vec![piece(0, 0, 4)],
            vec![piece(3, 10, 14)],
            // 3 first, then 2 opens a row, then the 1s fill: doc 0's rest
            // joins the 3, doc 5 the 2.
            vec![piece(2, 7, 10), piece(0, 4, 5)],
            vec![piece(1, 5, 7), piece(5, 14, 15)],
        ]
    );
}

#[test]
fn rows_past_the_shard_are_an_error_naming_them() {
    let index = DocIndex::from_lengths([10, 10]);
    for (packing, rows) in [
        (Packing::Concat, 4),
        (Packing::BestFit, 5),
        (Packing::None, 2),
    ] {
        let spec = spec(4, packing);
        assert_eq!(shard_rows(spec, &index), rows);
        let error =
            try_row_pieces(spec, &index, 0, 0, 9, rows - 1..rows + 1).expect_err("past the end");
        assert_eq!(error.rows, rows);
        let text = error.to_string();
        assert!(
            text.contains(&format!("rows {}..{} of shard 9", rows - 1, rows + 1)),
            "{text}"
        );
        assert!(try_row_pieces(spec, &index, 0, 0, 9, 0..rows).is_ok());
    }
}

#[test]
#[should_panic(expected = "of shard 2 asked for")]
fn row_pieces_panics_on_rows_past_the_shard() {
    let index = DocIndex::from_lengths([3]);
    row_pieces(spec(2, Packing::Concat), &index, 0, 0, 2, 0..2);
}

#[test]
fn empty_shards_and_runs_have_no_rows() {
    let empty = DocIndex::from_lengths([]);
    let one = DocIndex::from_lengths([1, 0]);
    for packing in [Packing::Concat, Packing::BestFit] {
        assert_eq!(shard_rows(spec(8, packing), &empty), 0);
        assert_eq!(shard_rows(spec(8, Packing::Concat), &one), 0);
        assert_eq!(
            all_rows(spec(8, packing), &empty, [0; 3]),
            RowPieces::default()
        );
    }
    assert_eq!(shard_rows(spec(8, Packing::None), &one), 2);
    let none = all_rows(spec(8, Packing::None), &one, [0; 3]);
    assert_eq!(split_rows(&none), vec![vec![piece(0, 0, 1)], vec![]]);
    assert_eq!(reads(&none.pieces, 0), vec![0..1]);
}
