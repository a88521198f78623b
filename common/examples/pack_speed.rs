//! How fast rows are cut and packed, on one thread: `layout::row_pieces`
//! over a whole shard, then per batch each row's fields out of the bytes
//! read (`rows::row_from_reads`) and `rows::build`. Prints figures rather
//! than asserting them:
//!
//! ```text
//! cargo run --release -p tributary-common --example pack_speed
//! ```
//!
//! The shard: about 32 Mi u32 tokens in 32 Ki documents of 1 to 2047 tokens
//! (mean 1 Ki). Batches of B = 8 rows of L = 2048, int64 ids, with
//! cu_seqlens. Tokens/s counts the batches' `B·L` positions (for bestfit
//! and none, padding included).

#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use tributary_common::tokens::layout::{self, RowPieces};
use tributary_common::tokens::rows::{self, IdType, Row, RowsSpec};
use tributary_common::tokens::{DocIndex, Packing, SequenceSpec, TokenDtype};

const TOKENS: u64 = 32 << 20;
const DOCUMENTS: u64 = 32 << 10;
const LENGTH: u32 = 2048;
const BATCH: usize = 8;
const SEED: u64 = 42;

/// Lengths of mean `TOKENS / DOCUMENTS`, summing to `TOKENS`.
fn index() -> DocIndex {
    let mean = TOKENS / DOCUMENTS;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut lengths: Vec<u64> = (0..DOCUMENTS)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            1 + (state >> 33) % (2 * mean - 1)
        })
        .collect();
    let total: u64 = lengths.iter().sum();
    let last = lengths.last_mut().expect("documents");
    *last = (*last + TOKENS).saturating_sub(total).max(1);
    DocIndex::from_lengths(lengths)
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort_unstable();
    times[runs / 2]
}

/// Packs every row of `pieces` in batches of `BATCH`, as a worker does:
/// each row's fields from the bytes read (`rows::row_from_reads`; here the
/// whole shard is one read, as from the page cache), then `rows::build`.
fn pack(shard: &[u8], tokens: u64, pieces: &RowPieces, spec: &RowsSpec) -> usize {
    let reads = [(0..tokens, shard)];
    let mut built = 0;
    for first in (0..pieces.rows()).step_by(BATCH) {
        let end = (first + BATCH).min(pieces.rows());
        let fields: Vec<(Vec<u8>, Vec<u8>)> = (first..end)
            .map(|row| {
                rows::row_from_reads(pieces.row(row), &reads, TokenDtype::U32).expect("read")
            })
            .collect();
        let batch: Vec<Row<'_>> = fields
            .iter()
            .map(|(tokens, segments)| Row { tokens, segments })
            .collect();
        let out = rows::build(&batch, spec).expect("well-formed rows");
        built += black_box(out).rows;
    }
    built
}

fn main() {
    let index = index();
    let shard: Vec<u8> = (0..index.tokens() as u32)
        .flat_map(|t| (t % 50_000).to_le_bytes())
        .collect();
    println!(
        "shard: {} tokens, {} documents; L = {LENGTH}, B = {BATCH}, int64, 1 thread",
        index.tokens(),
        index.documents()
    );
    for packing in [Packing::Concat, Packing::BestFit, Packing::None] {
        let sequence = SequenceSpec {
            length: LENGTH,
            packing,
        };
        let rows_of_shard = layout::shard_rows(sequence, &index);
        let cut = median(11, || {
            black_box(layout::row_pieces(
                sequence,
                &index,
                SEED,
                3,
                7,
                0..rows_of_shard,
            ));
        });
        let count = median(11, || {
            black_box(layout::shard_rows(sequence, &index));
        });
        let pieces = layout::row_pieces(sequence, &index, SEED, 3, 7, 0..rows_of_shard);
        // A worker's span: 1/64 of the shard from its middle.
        let span = rows_of_shard / 2..rows_of_shard / 2 + rows_of_shard / 64;
        let cut_span = median(11, || {
            black_box(layout::row_pieces(
                sequence,
                &index,
                SEED,
                3,
                7,
                span.clone(),
            ));
        });
        let shard_layout = layout::ShardLayout::new(sequence, &index, SEED, 3, 7);
        let cut_cached = median(11, || {
            black_box(shard_layout.row_pieces(span.clone()).expect("inside"));
        });
        let spec = RowsSpec {
            sequence,
            ids: IdType::I64,
            cu_seqlens: true,
            pad_id: 0,
        };
        let mut built = 0;
        let packed = median(5, || built = pack(&shard, index.tokens(), &pieces, &spec));
        let positions = (built * LENGTH as usize) as f64;
        let total = cut + packed;
        println!(
            "{packing:>7}: {rows_of_shard} rows; shard_rows {:.2} ms; row_pieces whole shard {:.2} ms, \
             1/64 span {:.3} ms ({:.3} ms with a ShardLayout); row_from_reads + build {:.1} M tokens/s; \
             all three {:.1} M tokens/s",
            count.as_secs_f64() * 1e3,
            cut.as_secs_f64() * 1e3,
            cut_span.as_secs_f64() * 1e3,
            cut_cached.as_secs_f64() * 1e3,
            positions / packed.as_secs_f64() / 1e6,
            positions / total.as_secs_f64() / 1e6,
        );
    }
}
