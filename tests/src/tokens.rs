//! Token datasets for the end-to-end tests: documents written as Megatron
//! `.bin`/`.idx` shards with a token manifest into a real S3-compatible
//! server, and the replay every delivered row is checked against: what
//! each row of an epoch must hold, computed from the documents with the
//! pure layout, not through the reading path under test.

use std::collections::BTreeMap;

use tributary_common::plan::mix::Layout;
use tributary_common::tokens::layout::row_pieces;
use tributary_common::tokens::{DocIndex, SequenceSpec, TokenDtype};
use tributary_io::{write_token_dataset, Location};

use crate::cli::Scratch;
use crate::s3::S3Server;

/// The end-of-document id of the test corpora (a byte-level vocabulary).
pub const EOS: u32 = 256;

/// An S3 server holding a token dataset at `s3://data/tokens`.
#[derive(Debug)]
pub struct S3Tokens {
    pub s3: S3Server,
    pub scratch: Scratch,
    /// `s3://data/tokens`
    pub url: String,
    /// Each shard's documents.
    pub shards: Vec<Vec<Vec<u32>>>,
}

/// `count` documents of 1 to `max_len` tokens (below 256, the last of each
/// [`EOS`]), pseudo-random from `seed`.
pub fn documents(count: usize, max_len: u64, seed: u64) -> Vec<Vec<u32>> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        state >> 33
    };
    (0..count)
        .map(|_| {
            let len = 1 + next() % max_len;
            let mut doc: Vec<u32> = (1..len).map(|_| (next() % 256) as u32).collect();
            doc.push(EOS);
            doc
        })
        .collect()
}

impl S3Tokens {
    /// Starts an S3 server and writes `shards` shards of `docs` documents
    /// each (u16 ids) into `s3://data/tokens`.
    pub fn start(shards: usize, docs: usize) -> Self {
        let s3 = S3Server::start();
        s3.create_bucket("data");
        let url = "s3://data/tokens".to_owned();
        let shards: Vec<Vec<Vec<u32>>> = (0..shards)
            .map(|s| documents(docs, 120, s as u64 + 1))
            .collect();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async {
            let location = Location::open(&url, &s3.options(), true).expect("location");
            write_token_dataset(&location, &shards, TokenDtype::U16, Some(EOS), Some(257))
                .await
                .expect("write the token dataset");
        });
        Self {
            s3,
            scratch: Scratch::new(),
            url,
            shards,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.s3.endpoint
    }

    /// The rows of each shard under `sequence` (the plan's layout).
    pub fn layout(&self, sequence: SequenceSpec) -> Layout {
        let rows = self
            .shards
            .iter()
            .map(|docs| {
                let index = DocIndex::from_lengths(docs.iter().map(|d| d.len() as u64));
                tributary_common::tokens::layout::shard_rows(sequence, &index) as u32
            })
            .collect();
        Layout::single(rows)
    }

    /// Every row of epoch `epoch` (seed `seed`): its id and the CRC-32C of
    /// the int64 `input_ids` it must deliver.
    pub fn replay(&self, sequence: SequenceSpec, seed: u64, epoch: u64) -> BTreeMap<u64, String> {
        let layout = self.layout(sequence);
        let mut out = BTreeMap::new();
        for (shard, docs) in self.shards.iter().enumerate() {
            let index = DocIndex::from_lengths(docs.iter().map(|d| d.len() as u64));
            let stream: Vec<u32> = docs.iter().flatten().copied().collect();
            let rows = u64::from(layout.shard_samples(shard as u32).unwrap_or(0));
            let pieces = row_pieces(sequence, &index, seed, epoch, shard as u64, 0..rows);
            let first = layout.shard_start(shard as u32);
            for row in 0..pieces.rows() {
                let mut tokens: Vec<i64> = pieces
                    .row(row)
                    .iter()
                    .flat_map(|p| stream[p.start as usize..p.end as usize].iter())
                    .map(|&t| i64::from(t))
                    .collect();
                // input_ids: the first L tokens, padded (bestfit, none)
                // with the end-of-document id.
                tokens.resize(sequence.length as usize + 1, i64::from(EOS));
                let bytes: Vec<u8> = tokens[..sequence.length as usize]
                    .iter()
                    .flat_map(|t| t.to_le_bytes())
                    .collect();
                out.insert(
                    first + row as u64,
                    format!("{:08x}", crc32c::crc32c(&bytes)),
                );
            }
        }
        out
    }
}
