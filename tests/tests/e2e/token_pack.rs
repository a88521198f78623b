//! Token datasets through the `tributary` binary: `pack --tokenizer` with
//! `bytes` and a Hugging Face tokenizer.json, read back id by id from the
//! Megatron `.bin`/`.idx` it wrote; `index` over a Megatron pair and a
//! `.npy` read in place; `inspect`; hostile files named with their offset.

use std::path::Path;

use tributary_common::tokens::manifest::TokenManifest;
use tributary_common::tokens::megatron::{decode_idx, Expected};
use tributary_tests::cli::{tributary, tributary_ok, Scratch};

/// Every document of the token dataset at `dir`, as ids, and its manifest.
fn documents(dir: &Path) -> (TokenManifest, Vec<Vec<u32>>) {
    let manifest =
        TokenManifest::from_json(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("valid");
    let mut docs = Vec::new();
    for shard in &manifest.shards {
        let idx = std::fs::read(dir.join(&shard.index.name)).expect("idx");
        let expected = Expected {
            dtype: manifest.dtype,
            data_offset: shard.offset,
            tokens: shard.tokens,
            documents: shard.documents,
        };
        let index = decode_idx(&shard.index.name, &idx, &expected).expect("idx decodes");
        let data = std::fs::read(dir.join(&shard.name)).expect("bin");
        let width = manifest.width();
        for d in 0..index.documents() {
            let r = index.doc(d);
            let bytes = &data[(shard.offset + r.start * width) as usize
                ..(shard.offset + r.end * width) as usize];
            let mut ids = Vec::new();
            manifest.dtype.decode_into(bytes, &mut ids);
            docs.push(ids);
        }
    }
    (manifest, docs)
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let output = tributary(args, &[]);
    assert!(!output.status.success(), "tributary {args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "tributary {args:?}: `{needle}` not in:\n{stderr}"
        );
    }
}

#[test]
fn token_pack_with_bytes_and_a_tokenizer_json_reads_back_every_document() {
    let scratch = Scratch::new();
    let corpus = scratch.path("corpus.jsonl");
    let texts: Vec<String> = (0..120)
        .map(|i| format!("the cat {} sat ", ["a", "b", "c"][i % 3]).repeat(1 + i % 4))
        .collect();
    let mut lines: Vec<String> = texts
        .iter()
        .map(|t| serde_json::json!({ "content": t }).to_string())
        .collect();
    lines.insert(7, r#"{"content": ""}"#.into());
    std::fs::write(&corpus, lines.join("\n")).expect("write");

    let out = scratch.path("bytes");
    let printed = tributary_ok(
        &[
            "pack",
            &corpus,
            &out,
            "--tokenizer",
            "bytes",
            "--text-field",
            "content",
            "--shard-tokens",
            "2000",
        ],
        &[],
    );
    assert!(
        printed.contains("packed 120 documents")
            && printed.contains("documents/s")
            && printed.contains("M tokens/s")
            && printed.contains("skipped 1 empty documents"),
        "{printed}"
    );
    let (manifest, docs) = documents(Path::new(&out));
    let expected: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| t.bytes().map(u32::from).chain([256]).collect())
        .collect();
    assert_eq!(docs, expected);
    assert!(manifest.shards.len() > 1);
    let inspected = tributary_ok(&["inspect", &out], &[]);
    assert!(
        inspected.contains("tributary-tokens")
            && inspected.contains(&format!("tokens       {} (u16, eos 256", manifest.tokens))
            && inspected.contains("documents    120")
            && inspected.contains("indexes      ok"),
        "{inspected}"
    );

    // A WordLevel tokenizer.json, written by hand: the, cat, a, b, c, sat.
    let words = ["the", "cat", "a", "b", "c", "sat"];
    let mut vocab = serde_json::Map::new();
    vocab.insert("<unk>".into(), 0.into());
    vocab.insert("<|endoftext|>".into(), 1.into());
    for (i, w) in words.iter().enumerate() {
        vocab.insert((*w).into(), (i + 2).into());
    }
    let tokenizer = scratch.path("tokenizer.json");
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 1, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(&tokenizer, json.to_string()).expect("write");
    let out = scratch.path("hf");
    tributary_ok(
        &[
            "pack",
            &corpus,
            &out,
            "--tokenizer",
            &tokenizer,
            "--text-field",
            "content",
        ],
        &[],
    );
    let (manifest, docs) = documents(Path::new(&out));
    assert_eq!(manifest.eos_id, Some(1), "<|endoftext|> is the default eos");
    let id = |w: &str| words.iter().position(|x| *x == w).expect("word") as u32 + 2;
    let expected: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| t.split_whitespace().map(id).chain([1]).collect())
        .collect();
    assert_eq!(docs, expected);

    // Bad input: the file and line, and what to do.
    fails_with(
        &["pack", &corpus, &scratch.path("x"), "--tokenizer", "bytes"],
        &[&format!("{corpus}:1:"), "no \"text\" field", "--text-field"],
    );
    fails_with(
        &[
            "pack",
            &corpus,
            &out,
            "--tokenizer",
            "bytes",
            "--text-field",
            "content",
        ],
        &["already exists", "--force"],
    );
    fails_with(
        &[
            "pack",
            &corpus,
            &scratch.path("y"),
            "--text-field",
            "content",
        ],
        &["--tokenizer"],
    );
}

/// A Megatron `.idx` of one sequence per document, u16 (code 8).
fn megatron_idx(lengths: &[i32]) -> Vec<u8> {
    let mut out = b"MMIDIDX\x00\x00".to_vec();
    out.extend_from_slice(&1u64.to_le_bytes());
    out.push(8);
    out.extend_from_slice(&(lengths.len() as u64).to_le_bytes());
    out.extend_from_slice(&(lengths.len() as u64 + 1).to_le_bytes());
    for len in lengths {
        out.extend_from_slice(&len.to_le_bytes());
    }
    let mut pointer = 0i64;
    for len in lengths {
        out.extend_from_slice(&pointer.to_le_bytes());
        pointer += 2 * i64::from(*len);
    }
    for d in 0..=lengths.len() as i64 {
        out.extend_from_slice(&d.to_le_bytes());
    }
    out
}

fn le16(ids: &[u16]) -> Vec<u8> {
    ids.iter().flat_map(|i| i.to_le_bytes()).collect()
}

#[test]
fn token_index_reads_megatron_pairs_and_npy_in_place_and_names_bad_files() {
    let scratch = Scratch::new();
    let dir = scratch.path("corpus");
    let d = Path::new(&dir);
    std::fs::create_dir_all(d).expect("mkdir");
    std::fs::write(d.join("a.bin"), le16(&[3, 4, 0, 5, 0])).expect("write");
    std::fs::write(d.join("a.idx"), megatron_idx(&[3, 2])).expect("write");
    // A .npy as numpy writes it: a 128-byte header for this shape.
    let mut header = "{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }".to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    npy.extend_from_slice(&le16(&[7, 0, 8, 0]));
    std::fs::write(d.join("b.npy"), &npy).expect("write");

    fails_with(&["index", &dir], &["b.npy", "--eos-id"]);
    let printed = tributary_ok(&["index", &dir, "--eos-id", "0"], &[]);
    assert!(
        printed.contains("indexed 2 token files (1 Megatron pairs read in place, 1 scanned"),
        "{printed}"
    );
    let (manifest, docs) = documents(d);
    assert_eq!(
        docs,
        vec![vec![3, 4, 0], vec![5, 0], vec![7, 0], vec![8, 0]]
    );
    assert_eq!(manifest.shards[1].offset, 128);
    assert!(tributary_ok(&["inspect", &dir], &[]).contains("indexes      ok"));

    // A hostile index: a sequence count far past the file.
    let mut idx = megatron_idx(&[3, 2]);
    idx[18..26].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(d.join("a.idx"), &idx).expect("write");
    fails_with(
        &["index", &dir, "--eos-id", "0", "--force"],
        &["a.idx: at byte 18", "sequence_count"],
    );
    fails_with(&["inspect", &dir], &["a.idx", "the manifest says"]);
}
