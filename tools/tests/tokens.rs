//! Token datasets: `pack_tokens` with the `bytes` tokenizer and a Hugging
//! Face tokenizer.json read back document by document; `index_tokens` over a
//! Megatron pair, a `.npy` and a raw file; hostile inputs named.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tributary_common::tokens::manifest::TokenManifest;
use tributary_common::tokens::megatron::{decode_idx, Expected};
use tributary_common::tokens::{DocIndex, TokenDtype};
use tributary_io::{Location, StoreOptions};
use tributary_tools::progress::NoProgress;
use tributary_tools::tokens::{
    index_tokens, inspect_tokens, pack_tokens, IndexTokensOptions, TokenPackOptions,
};
use tributary_tools::ToolsError;

fn location(dir: &Path) -> Location {
    Location::open(&dir.display().to_string(), &StoreOptions::default(), true).expect("open")
}

/// Every document of the dataset at `dir`, as token ids, in order, and
/// the manifest.
fn read_back(dir: &Path) -> (TokenManifest, Vec<Vec<u32>>) {
    let manifest =
        TokenManifest::from_json(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("valid manifest");
    let mut docs = Vec::new();
    for shard in &manifest.shards {
        let idx = std::fs::read(dir.join(&shard.index.name)).expect("idx");
        assert_eq!(crc32c::crc32c(&idx), shard.index.crc32c);
        let index = decode_idx(
            &shard.index.name,
            &idx,
            &Expected {
                dtype: manifest.dtype,
                data_offset: shard.offset,
                tokens: shard.tokens,
                documents: shard.documents,
            },
        )
        .expect("index decodes");
        let data = std::fs::read(dir.join(&shard.name)).expect("data");
        assert_eq!(data.len() as u64, shard.bytes);
        let tokens = &data[shard.offset as usize..];
        for d in 0..index.documents() {
            let range = index.doc(d);
            let w = manifest.width() as usize;
            let mut ids = Vec::new();
            manifest.dtype.decode_into(
                &tokens[range.start as usize * w..range.end as usize * w],
                &mut ids,
            );
            docs.push(ids);
        }
    }
    (manifest, docs)
}

fn jsonl(path: &Path, texts: &[&str]) {
    let lines: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"id": i, "text": t}).to_string())
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").expect("write");
}

fn bytes_doc(text: &str) -> Vec<u32> {
    text.bytes().map(u32::from).chain([256]).collect()
}

async fn pack(
    paths: &[PathBuf],
    out: &Path,
    options: &TokenPackOptions,
) -> Result<tributary_tools::tokens::TokenPackSummary, ToolsError> {
    pack_tokens(paths, &location(out), options, Arc::new(NoProgress)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_tokens_bytes_round_trips_every_document_in_corpus_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(corpus.join("more")).expect("mkdir");
    let texts: Vec<String> = (0..300)
        .map(|i| format!("document {i} ").repeat(i % 5))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    jsonl(&corpus.join("a.jsonl"), &refs[..200]);
    jsonl(&corpus.join("more/b.jsonl"), &refs[200..]);
    std::fs::write(corpus.join("c.txt"), "héllo\nworld").expect("txt");
    std::fs::write(corpus.join("README.md"), "not a corpus file").expect("md");
    let single = dir.path().join("single.jsonl");
    jsonl(&single, &["last one"]);
    let out = dir.path().join("out");
    let options = TokenPackOptions {
        shard_tokens: 1000,
        batch_bytes: 300,
        ..TokenPackOptions::default()
    };
    let summary = pack(&[corpus, single], &out, &options).await.expect("pack");
    // Directory order: a.jsonl, c.txt, more/b.jsonl; then single.jsonl.
    let mut expected: Vec<Vec<u32>> = Vec::new();
    let mut empty = 0;
    for text in refs[..200]
        .iter()
        .chain(["héllo\nworld"].iter())
        .chain(&refs[200..])
        .chain(["last one"].iter())
    {
        if text.is_empty() {
            empty += 1;
        } else {
            expected.push(bytes_doc(text));
        }
    }
    let (manifest, docs) = read_back(&out);
    assert_eq!(docs, expected);
    assert_eq!(summary.empty_documents, empty);
    assert_eq!(summary.skipped_files, 1);
    assert_eq!(manifest.dtype, TokenDtype::U16);
    assert_eq!(
        (manifest.eos_id, manifest.vocab_size),
        (Some(256), Some(257))
    );
    assert_eq!(manifest.tokenizer.as_deref(), Some("bytes"));
    assert!(
        manifest.shards.len() > 3,
        "{} shards",
        manifest.shards.len()
    );
    for shard in &manifest.shards[..manifest.shards.len() - 1] {
        // Closed at the first document that reaches 1000 tokens.
        assert!(
            shard.tokens >= 1000 && shard.tokens < 1000 + 60,
            "{}",
            shard.tokens
        );
    }
    // The same bytes whatever the batching (so whatever the threads).
    let again = dir.path().join("again");
    let corpus = dir.path().join("corpus");
    let single = dir.path().join("single.jsonl");
    let options = TokenPackOptions {
        shard_tokens: 1000,
        batch_bytes: 1 << 20,
        ..TokenPackOptions::default()
    };
    pack(&[corpus, single], &again, &options)
        .await
        .expect("pack");
    for name in ["manifest.json", "shard-000000.bin", "shard-000001.idx"] {
        assert_eq!(
            std::fs::read(out.join(name)).expect("first"),
            std::fs::read(again.join(name)).expect("second"),
            "{name}"
        );
    }
    let report = inspect_tokens(&location(&out), &manifest, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verified_shards, manifest.shards.len());
}

/// A Hugging Face tokenizer.json of a WordLevel model over `words` (ids
/// from 2; 0 is `<unk>`, 1 is `eos`), split on whitespace.
fn word_level(words: &[String], eos: &str) -> String {
    let mut vocab = serde_json::Map::new();
    vocab.insert("<unk>".into(), 0.into());
    vocab.insert(eos.into(), 1.into());
    for (i, w) in words.iter().enumerate() {
        vocab.insert(w.clone(), (i + 2).into());
    }
    let special = |id: u32, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
    };
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<unk>"), special(1, eos)],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_tokens_hf_tokenizer_round_trips_in_u16_and_u32() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (words, dtype) in [(100usize, TokenDtype::U16), (70_000, TokenDtype::U32)] {
        let vocab: Vec<String> = (0..words).map(|i| format!("w{i}")).collect();
        let tokenizer = dir.path().join(format!("tokenizer-{words}.json"));
        std::fs::write(&tokenizer, word_level(&vocab, "</s>")).expect("write");
        let texts: Vec<String> = (0..50)
            .map(|i| format!("w{} w{} nope w{}", i, (i * 7) % words, words - 1))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let corpus = dir.path().join(format!("c-{words}.jsonl"));
        jsonl(&corpus, &refs);
        let out = dir.path().join(format!("out-{words}"));
        let options = TokenPackOptions {
            tokenizer: tokenizer.display().to_string(),
            shard_tokens: 64,
            ..TokenPackOptions::default()
        };
        let summary = pack(&[corpus], &out, &options).await.expect("pack");
        assert_eq!(
            (summary.dtype, summary.eos_id),
            (dtype, 1),
            "</s> is the eos"
        );
        let (manifest, docs) = read_back(&out);
        let expected: Vec<Vec<u32>> = (0..50u32)
            .map(|i| vec![i + 2, (i * 7) % words as u32 + 2, 0, words as u32 + 1, 1])
            .collect();
        assert_eq!(docs, expected);
        assert_eq!(manifest.dtype, dtype);
        assert_eq!(manifest.vocab_size, Some(words as u64 + 2));
        assert_eq!(manifest.tokenizer, Some(format!("tokenizer-{words}.json")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_tokens_hf_without_an_eos_token_asks_for_eos_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokenizer = dir.path().join("tokenizer.json");
    std::fs::write(&tokenizer, word_level(&["a".into()], "<sep>")).expect("write");
    let corpus = dir.path().join("c.jsonl");
    jsonl(&corpus, &["a a"]);
    let mut options = TokenPackOptions {
        tokenizer: tokenizer.display().to_string(),
        ..TokenPackOptions::default()
    };
    let error = pack(
        std::slice::from_ref(&corpus),
        &dir.path().join("out"),
        &options,
    )
    .await
    .expect_err("no eos")
    .to_string();
    assert!(error.contains("pass --eos-id"), "{error}");
    options.eos_id = Some(1);
    pack(&[corpus], &dir.path().join("out"), &options)
        .await
        .expect("with --eos-id");
    let (_, docs) = read_back(&dir.path().join("out"));
    assert_eq!(docs, vec![vec![2, 2, 1]]);
    let error = pack(
        &[dir.path().join("c.jsonl")],
        &dir.path().join("x"),
        &TokenPackOptions {
            tokenizer: dir.path().join("nope.json").display().to_string(),
            ..TokenPackOptions::default()
        },
    )
    .await
    .expect_err("missing tokenizer")
    .to_string();
    assert!(
        error.contains("nope.json") && error.contains("bytes"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_tokens_bad_input_names_the_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let cases: Vec<(&str, &[u8], &[&str])> = vec![
        (
            "a.jsonl",
            b"{\"text\": \"ok\"}\n{\"body\": \"x\", \"id\": 3}\n",
            &[":2:", "no \"text\" field", "\"body\"", "--text-field"],
        ),
        (
            "b.jsonl",
            b"{\"text\": \"ok\"}\n\n{\"text\": \"ok\"\n",
            &[":3:", "not a JSON object"],
        ),
        (
            "c.jsonl",
            b"{\"text\": 7}\n",
            &[":1:", "a number, not a string"],
        ),
        ("d.jsonl", b"[1, 2]\n", &[":1:", "not a JSON object"]),
        ("e.jsonl", b"{\"text\": \"\xff\"}\n", &[":1:"]),
        ("f.txt", b"ok \xff\xfe", &["f.txt", "not UTF-8", "offset 3"]),
        ("g.csv", b"text\nx\n", &["g.csv", "not a corpus file"]),
    ];
    for (name, content, needles) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        let error = pack(
            std::slice::from_ref(&path),
            &out,
            &TokenPackOptions::default(),
        )
        .await
        .expect_err(name)
        .to_string();
        assert!(error.contains(&path.display().to_string()), "{error}");
        for needle in needles {
            assert!(error.contains(needle), "{name}: `{needle}` not in {error}");
        }
        assert!(!out.join("manifest.json").exists());
    }
    // A failed run leaves no shard behind.
    let big = dir.path().join("late.jsonl");
    let mut lines: Vec<String> = (0..500)
        .map(|i| format!("{{\"text\": \"doc {i}\"}}"))
        .collect();
    lines.push("{\"oops\": 1}".into());
    std::fs::write(&big, lines.join("\n")).expect("write");
    let options = TokenPackOptions {
        shard_tokens: 100,
        batch_bytes: 64,
        ..TokenPackOptions::default()
    };
    let error = pack(&[big], &out, &options)
        .await
        .expect_err("late error")
        .to_string();
    assert!(error.contains(":501:"), "{error}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_tokens_refuses_a_dataset_there_and_force_replaces_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = dir.path().join("c.jsonl");
    jsonl(&corpus, &["one", "two"]);
    let out = dir.path().join("out");
    pack(
        std::slice::from_ref(&corpus),
        &out,
        &TokenPackOptions::default(),
    )
    .await
    .expect("pack");
    let error = pack(
        std::slice::from_ref(&corpus),
        &out,
        &TokenPackOptions::default(),
    )
    .await
    .expect_err("exists")
    .to_string();
    assert!(
        error.contains("already exists") && error.contains("--force"),
        "{error}"
    );
    jsonl(&corpus, &["three"]);
    let options = TokenPackOptions {
        force: true,
        ..TokenPackOptions::default()
    };
    pack(&[corpus], &out, &options).await.expect("replace");
    let (manifest, docs) = read_back(&out);
    assert_eq!(docs, vec![bytes_doc("three")]);
    assert_ne!(manifest.shards[0].name, "shard-000000.bin", "new names");
    assert!(!out.join("shard-000000.bin").exists(), "old shard deleted");
    assert!(!out.join("shard-000000.idx").exists(), "old index deleted");
}

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
    while (10 + dict.len() + 1) % 64 != 0 {
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
    let _ = DocIndex::from_lengths([1]);
}
