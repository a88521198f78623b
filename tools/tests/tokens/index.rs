//! `index_tokens` and `inspect_tokens`.

use std::sync::Arc;

use tributary_common::tokens::manifest::TokenManifest;
use tributary_common::tokens::TokenDtype;
use tributary_tools::progress::NoProgress;
use tributary_tools::tokens::{index_tokens, inspect_tokens, IndexTokensOptions};

use crate::{location, read_back};

/// An `.idx` written field by field as Megatron-Core's
/// `MMapIndexedDatasetBuilder` writes it (one sequence per document).
fn megatron_idx(code: u8, width: u64, lengths: &[i32]) -> Vec<u8> {
    let mut out = b"MMIDIDX\x00\x00".to_vec();
    out.extend_from_slice(&1u64.to_le_bytes());
    out.push(code);
    out.extend_from_slice(&(lengths.len() as u64).to_le_bytes());
    out.extend_from_slice(&(lengths.len() as u64 + 1).to_le_bytes());
    for len in lengths {
        out.extend_from_slice(&len.to_le_bytes());
    }
    let mut pointer = 0i64;
    for len in lengths {
        out.extend_from_slice(&pointer.to_le_bytes());
        pointer += i64::from(*len) * width as i64;
    }
    for d in 0..=lengths.len() as i64 {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out
}

/// A version 1 `.npy` of `descr` and 1-D `data`, as numpy writes it.
fn npy(descr: &str, tokens: usize, data: &[u8]) -> Vec<u8> {
    let mut dict =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({tokens},), }}");
    while !(10 + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend_from_slice(data);
    out
}

fn le16(ids: &[u16]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.to_le_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_tokens_reads_megatron_pairs_npy_and_raw_files_in_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // A Megatron pair (no eos needed), a .npy and a raw .bin split at 9.
    let pair_data = le16(&[5, 6, 7, 1, 2, 3, 4]);
    std::fs::write(d.join("a.bin"), &pair_data).expect("write");
    std::fs::write(d.join("a.idx"), megatron_idx(8, 2, &[3, 4])).expect("write");
    let npy_ids = [1u16, 9, 2, 3, 9, 4];
    std::fs::write(d.join("b.npy"), npy("<u2", 6, &le16(&npy_ids))).expect("write");
    std::fs::write(d.join("c.bin"), le16(&[9, 8, 8, 9, 7])).expect("write");
    let dest = location(d);
    let options = IndexTokensOptions {
        dtype: Some(TokenDtype::U16),
        eos_id: Some(9),
        force: false,
    };
    let summary = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect("index");
    assert_eq!(
        (summary.shards, summary.megatron, summary.scanned),
        (3, 1, 2)
    );
    assert_eq!(
        summary.unterminated, 2,
        "b.npy ends with 4, c.bin with 7: no eos"
    );
    let (manifest, docs) = read_back(d);
    let names: Vec<(&str, &str, u64)> = manifest
        .shards
        .iter()
        .map(|s| (s.name.as_str(), s.index.name.as_str(), s.offset))
        .collect();
    assert_eq!(
        names,
        [
            ("a.bin", "a.idx", 0),
            ("b.npy", "b.npy.idx", 128),
            ("c.bin", "c.bin.idx", 0)
        ]
    );
    assert_eq!(
        docs,
        vec![
            vec![5, 6, 7],
            vec![1, 2, 3, 4],
            vec![1, 9],
            vec![2, 3, 9],
            vec![4],
            vec![9],
            vec![8, 8, 9],
            vec![7],
        ]
    );
    // In place: the data and Megatron index untouched.
    assert_eq!(std::fs::read(d.join("a.bin")).expect("read"), pair_data);
    assert_eq!(
        std::fs::read(d.join("a.idx")).expect("read"),
        megatron_idx(8, 2, &[3, 4])
    );
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("manifest there")
        .to_string();
    assert!(error.contains("--force"), "{error}");
    let report = inspect_tokens(&dest, &manifest, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_tokens_needs_eos_and_dtype_for_files_without_an_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("c.bin"), le16(&[1, 2])).expect("write");
    let dest = location(dir.path());
    let error = index_tokens(&dest, &IndexTokensOptions::default(), Arc::new(NoProgress))
        .await
        .expect_err("no eos")
        .to_string();
    assert!(
        error.contains("c.bin") && error.contains("--eos-id"),
        "{error}"
    );
    let options = IndexTokensOptions {
        eos_id: Some(2),
        ..IndexTokensOptions::default()
    };
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("no dtype")
        .to_string();
    assert!(
        error.contains("c.bin") && error.contains("--dtype"),
        "{error}"
    );
    std::fs::write(dir.path().join("c.bin"), [1u8, 0, 2]).expect("odd size");
    let options = IndexTokensOptions {
        eos_id: Some(2),
        dtype: Some(TokenDtype::U16),
        ..IndexTokensOptions::default()
    };
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("odd size")
        .to_string();
    assert!(
        error.contains("c.bin: at byte 2") && error.contains("whole number"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_tokens_hostile_files_name_the_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("a.bin"), le16(&[1, 2, 3])).expect("write");
    let dest = location(d);
    let options = IndexTokensOptions {
        eos_id: Some(3),
        ..IndexTokensOptions::default()
    };
    // Counts far past the file.
    let mut idx = megatron_idx(8, 2, &[1, 2]);
    idx[18..26].copy_from_slice(&(1u64 << 60).to_le_bytes());
    std::fs::write(d.join("a.idx"), &idx).expect("write");
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("count")
        .to_string();
    assert!(
        error.contains("a.idx: at byte 18") && error.contains("sequence_count"),
        "{error}"
    );
    // Sequences past the data object.
    std::fs::write(d.join("a.idx"), megatron_idx(8, 2, &[1, 5])).expect("write");
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("past")
        .to_string();
    assert!(
        error.contains("a.idx: at byte 34") && error.contains("past the data object's 6 bytes"),
        "{error}"
    );
    // A dtype Megatron has but we do not read.
    std::fs::write(d.join("a.idx"), megatron_idx(6, 8, &[1])).expect("write");
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("dtype")
        .to_string();
    assert!(
        error.contains("a.idx: at byte 17") && error.contains("float64"),
        "{error}"
    );
    // A .npy whose header lies about its length; a signed .npy with a
    // negative id.
    std::fs::remove_file(d.join("a.idx")).expect("rm");
    std::fs::remove_file(d.join("a.bin")).expect("rm");
    std::fs::write(d.join("b.npy"), npy("<u2", 1000, &le16(&[1, 3]))).expect("write");
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("npy")
        .to_string();
    assert!(
        error.contains("b.npy: at byte 128") && error.contains("needs 2000 bytes"),
        "{error}"
    );
    std::fs::write(d.join("b.npy"), npy("<i2", 3, &le16(&[1, 0xffff, 3]))).expect("write");
    let error = index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect_err("negative")
        .to_string();
    assert!(
        error.contains("b.npy: at byte 130") && error.contains("negative"),
        "{error}"
    );
    assert!(!d.join("manifest.json").exists());
    // A corrupted index is found by inspect, naming the object.
    std::fs::write(d.join("b.npy"), npy("<u2", 3, &le16(&[1, 3, 3]))).expect("write");
    index_tokens(&dest, &options, Arc::new(NoProgress))
        .await
        .expect("index");
    let manifest = TokenManifest::from_json(&std::fs::read(d.join("manifest.json")).expect("read"))
        .expect("valid");
    let mut idx = std::fs::read(d.join("b.npy.idx")).expect("read");
    let last = idx.len() - 1;
    idx[last] ^= 1;
    std::fs::write(d.join("b.npy.idx"), &idx).expect("write");
    let report = inspect_tokens(&dest, &manifest, Arc::new(NoProgress)).await;
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("b.npy.idx") && report.problems[0].contains("crc32c"),
        "{:?}",
        report.problems
    );
}
