//! The token path end to end on a local token dataset: what each row holds
//! is what the pure layout says, read through ranged GETs and assembled;
//! ranks split the rows; threads change nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tributary_common::plan::mix::Take;
use tributary_common::tokens::layout::row_pieces;
use tributary_common::tokens::rows::IdType;
use tributary_common::tokens::{DocIndex, Packing, SequenceSpec, TokenDtype};
use tributary_io::{open_any, write_token_dataset, Location, StoreOptions};

use crate::pipeline::decode::fields::Arrays;
use crate::{Column, Datasets, DecodeConfig, Fields, Loader, LoaderConfig, PlanConfig};

const EOS: u32 = 1000;

/// Documents of pseudo-random lengths (1 to 300 tokens, the last of each
/// its end-of-document id), token values telling document and position.
fn documents(count: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..count)
        .map(|d| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let len = 1 + (state >> 33) % 300;
            let mut doc: Vec<u32> = (0..len - 1)
                .map(|i| ((d as u64 * 7 + i) % 997) as u32)
                .collect();
            doc.push(EOS);
            doc
        })
        .collect()
}

/// A local token dataset of `shards` shards of documents; its URL and the
/// documents of each shard.
async fn token_dataset(
    dtype: TokenDtype,
    shards: usize,
) -> (tempfile::TempDir, String, Vec<Vec<Vec<u32>>>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = dir.path().to_str().expect("utf-8").to_owned();
    let location = Location::open(&url, &StoreOptions::default(), true).expect("location");
    let docs: Vec<Vec<Vec<u32>>> = (0..shards)
        .map(|s| documents(60 + s * 17, s as u64))
        .collect();
    write_token_dataset(&location, &docs, dtype, Some(EOS), Some(1001))
        .await
        .expect("write");
    (dir, url, docs)
}

async fn open(url: &str, sequence: SequenceSpec) -> Datasets {
    let opened = open_any(url, &StoreOptions::default()).await.expect("open");
    Datasets::open(vec![opened], &[], 0, Some(sequence), None)
        .await
        .expect("datasets")
}

fn config(rank: usize, world: usize, threads: usize, fields: &[&str]) -> LoaderConfig {
    LoaderConfig {
        plan: PlanConfig {
            seed: 7,
            epoch: 1,
            rank,
            world,
            batch_size: 4,
            shuffle_buffer: 16,
            ..PlanConfig::default()
        },
        decode: DecodeConfig {
            decode_threads: threads,
            fields: Fields::parse(fields.iter().copied()).expect("fields"),
            token_ids: IdType::I64,
            ..DecodeConfig::default()
        },
    }
}

fn i64s(column: &Column) -> (Vec<i64>, usize) {
    let Column::Arrays(Arrays::Stacked { data, shape, .. }) = column else {
        panic!("a stacked column, got {column:?}");
    };
    let values = data
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    (values, shape[0])
}

/// Every row a loader yields: id -> its input_ids and labels.
async fn rows(datasets: Datasets, config: LoaderConfig) -> BTreeMap<u64, (Vec<i64>, Vec<i64>)> {
    let mut loader = Loader::builder(datasets)
        .config(config)
        .build()
        .await
        .expect("build");
    let mut out = BTreeMap::new();
    while let Some(batch) = loader.next().await {
        let batch = batch.expect("batch");
        let (inputs, l) = i64s(&batch.columns[0]);
        let (labels, _) = i64s(&batch.columns[1]);
        for (i, id) in batch.ids.iter().enumerate() {
            let row = (
                inputs[i * l..(i + 1) * l].to_vec(),
                labels[i * l..(i + 1) * l].to_vec(),
            );
            assert!(out.insert(*id, row).is_none(), "row {id} delivered twice");
        }
    }
    out
}

#[tokio::test]
async fn every_concat_row_holds_the_tokens_the_layout_names_read_through_ranged_gets() {
    for dtype in [TokenDtype::U16, TokenDtype::U32] {
        let (_dir, url, docs) = token_dataset(dtype, 3).await;
        let sequence = SequenceSpec {
            length: 64,
            packing: Packing::Concat,
        };
        let datasets = open(&url, sequence).await;
        let layout = datasets.layout().clone();
        let got = rows(datasets, config(0, 1, 2, &["input_ids", "labels"])).await;
        assert_eq!(got.len() as u64, layout.epoch_samples(), "every row once");
        for (&id, (inputs, labels)) in &got {
            let (shard, row) = layout.locate(id).expect("an id of the layout");
            let shard_docs = &docs[shard as usize];
            let index = DocIndex::from_lengths(shard_docs.iter().map(|d| d.len() as u64));
            let stream: Vec<u32> = shard_docs.iter().flatten().copied().collect();
            let pieces = row_pieces(
                sequence,
                &index,
                7,
                1,
                u64::from(shard),
                u64::from(row)..u64::from(row) + 1,
            );
            let window: Vec<i64> = pieces
                .pieces
                .iter()
                .flat_map(|p| {
                    stream[p.start as usize..p.end as usize]
                        .iter()
                        .map(|&t| i64::from(t))
                })
                .collect();
            assert_eq!(window.len(), 65, "a window of L + 1 tokens");
            assert_eq!(inputs[..], window[..64], "row {id}: input_ids");
            assert_eq!(labels[..], window[1..], "row {id}: labels");
        }
    }
}

#[tokio::test]
async fn ranks_split_the_rows_and_threads_change_nothing() {
    let (_dir, url, _) = token_dataset(TokenDtype::U16, 4).await;
    for packing in [Packing::Concat, Packing::BestFit, Packing::None] {
        let sequence = SequenceSpec {
            length: 96,
            packing,
        };
        let datasets = open(&url, sequence).await;
        let total = datasets.layout().epoch_samples();
        let one = rows(datasets.clone(), config(0, 1, 1, &["input_ids", "labels"])).await;
        let two = rows(datasets.clone(), config(0, 1, 2, &["input_ids", "labels"])).await;
        assert_eq!(one, two, "{packing}: one thread or two, the same rows");
        let mut seen = BTreeSet::new();
        for rank in 0..3 {
            let part = rows(
                datasets.clone(),
                config(rank, 3, 2, &["input_ids", "labels"]),
            )
            .await;
            for (id, row) in part {
                assert_eq!(one[&id], row, "{packing}: row {id} alike on any rank");
                assert!(seen.insert(id), "{packing}: row {id} on two ranks");
            }
        }
        // The static split gives equal parts: fewer than `world` rows of
        // the epoch (its documented remainder) are left out.
        assert!(
            total - seen.len() as u64 <= 2,
            "{packing}: {} of {total} rows on some rank",
            seen.len()
        );
    }
}

#[tokio::test]
async fn a_mix_of_token_datasets_takes_its_share_of_rows() {
    let (_a, url_a, _) = token_dataset(TokenDtype::U16, 2).await;
    let (_b, url_b, _) = token_dataset(TokenDtype::U32, 3).await;
    let sequence = SequenceSpec {
        length: 32,
        packing: Packing::Concat,
    };
    let opened = vec![
        open_any(&url_a, &StoreOptions::default()).await.expect("a"),
        open_any(&url_b, &StoreOptions::default()).await.expect("b"),
    ];
    let takes = [Take::Weight(0.7), Take::Weight(0.3)];
    let datasets = Datasets::open(opened, &takes, 1000, Some(sequence), None)
        .await
        .expect("mix");
    let layout = Arc::new(datasets.layout().clone());
    assert_eq!(layout.epoch_samples(), 1000);
    assert_eq!(
        layout.source_samples(0),
        700,
        "70% of the rows, so of the tokens"
    );
    let got = rows(datasets, config(0, 1, 2, &["input_ids", "labels"])).await;
    assert_eq!(got.len(), 1000);
}

#[tokio::test]
async fn the_wrong_kind_of_dataset_is_refused_saying_what_to_pass() {
    let (_dir, url, _) = token_dataset(TokenDtype::U16, 1).await;
    let opened = open_any(&url, &StoreOptions::default())
        .await
        .expect("open");
    let error = Datasets::open(vec![opened], &[], 0, None, None)
        .await
        .expect_err("a token dataset read as samples");
    assert!(
        error.to_string().contains("give sequence_length"),
        "{error}"
    );
    let sequence = SequenceSpec {
        length: 8,
        packing: Packing::Concat,
    };
    let datasets = open(&url, sequence).await;
    let error = Loader::builder(datasets)
        .config(config(0, 1, 1, &["input_ids", "image"]))
        .build()
        .await
        .expect_err("an image field of a token batch");
    assert!(
        error
            .to_string()
            .contains("`image` is not a column of a token batch"),
        "{error}"
    );
}
