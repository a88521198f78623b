//! `pack_tokens`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tributary_common::tokens::TokenDtype;
use tributary_tools::progress::NoProgress;
use tributary_tools::tokens::{inspect_tokens, pack_tokens, TokenPackOptions};
use tributary_tools::ToolsError;

use crate::{location, read_back};

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
