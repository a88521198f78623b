use super::*;
use crate::tokens::megatron::encode_idx;
use crate::tokens::DocIndex;

fn shard(i: usize, lengths: &[u64]) -> TokenShard {
    let index = DocIndex::from_lengths(lengths.iter().copied());
    let idx = encode_idx(TokenDtype::U16, &index, 0);
    TokenShard {
        name: format!("shard-{i:06}.bin"),
        bytes: index.tokens() * 2,
        offset: 0,
        tokens: index.tokens(),
        documents: index.documents(),
        index: TokenIndexRef {
            name: format!("shard-{i:06}.idx"),
            bytes: idx.len() as u64,
            crc32c: crc32c::crc32c(&idx),
        },
    }
}

fn manifest() -> TokenManifest {
    TokenManifest::new(
        TokenDtype::U16,
        Some(256),
        Some(257),
        Some("bytes".into()),
        vec![shard(0, &[3, 4, 1]), shard(1, &[10])],
    )
    .expect("valid")
}

/// The JSON of `manifest()` with `edit` applied to its value.
fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut value: serde_json::Value = serde_json::from_slice(&manifest().to_json()).expect("json");
    edit(&mut value);
    serde_json::to_vec(&value).expect("json")
}

fn invalid(bytes: &[u8]) -> String {
    TokenManifest::from_json(bytes)
        .expect_err("refused")
        .to_string()
}

#[test]
fn token_manifest_round_trips_and_sums() {
    let m = manifest();
    assert_eq!((m.tokens, m.documents, m.bytes), (18, 4, 36));
    let back = TokenManifest::from_json(&m.to_json()).expect("parses");
    assert_eq!(back, m);
    assert_eq!(back.shard(1).map(|s| s.tokens), Some(10));
    assert!(back.shard(2).is_none());
    assert_eq!(
        back.shard(1).map(|s| s.token_bytes(TokenDtype::U16)),
        Some(0..20)
    );
    assert!(is_token_manifest(&m.to_json()));
}

#[test]
fn token_manifest_parses_the_design_example() {
    let idx_bytes = megatron::idx_bytes_bounds(7).1;
    let json = format!(
        r#"{{"format": "tributary-tokens", "version": 1, "dtype": "u16", "eos_id": 256, "vocab_size": 257,
   "tokenizer": "bytes", "tokens": 123, "documents": 7, "bytes": 246,
   "shards": [{{"name": "shard-000000.bin", "bytes": 246, "offset": 0, "tokens": 123, "documents": 7,
               "index": {{"name": "shard-000000.idx", "bytes": {idx_bytes}, "crc32c": 1234}}}}]}}"#
    );
    let m = TokenManifest::from_json(json.as_bytes()).expect("parses");
    assert_eq!(m.dtype, TokenDtype::U16);
    assert_eq!(m.shards[0].index.crc32c, 1234);
}

#[test]
fn is_token_manifest_tells_the_kinds_apart() {
    assert!(!is_token_manifest(
        br#"{"format":"tributary","version":2,"shards":[]}"#
    ));
    assert!(!is_token_manifest(b"not json"));
    assert!(!is_token_manifest(b"[1,2]"));
    assert!(is_token_manifest(br#"{"format":"tributary-tokens"}"#));
}

#[test]
fn token_manifest_refuses_tokens_beyond_the_bytes() {
    let error = invalid(&edited(|v| v["shards"][1]["tokens"] = 11.into()));
    assert!(error.contains("shards[1].tokens"), "{error}");
    assert!(error.contains("shard-000001.bin"), "{error}");
    // The offset counts too.
    let error = invalid(&edited(|v| v["shards"][0]["offset"] = 1.into()));
    assert!(error.contains("shards[0].tokens"), "{error}");
    // A count whose bytes overflow u64 is refused, not wrapped.
    let error = invalid(&edited(|v| {
        v["shards"][0]["tokens"] = (u64::MAX / 2 + 1).into();
    }));
    assert!(error.contains("shards[0].tokens"), "{error}");
    let error = invalid(&edited(|v| v["shards"][0]["offset"] = u64::MAX.into()));
    assert!(error.contains("shards[0].tokens"), "{error}");
}

#[test]
fn token_manifest_refuses_documents_beyond_tokens_and_empty_shards() {
    let error = invalid(&edited(|v| v["shards"][1]["documents"] = 11.into()));
    assert!(error.contains("shards[1].documents"), "{error}");
    let error = invalid(&edited(|v| v["shards"][1]["documents"] = 0.into()));
    assert!(error.contains("shards[1].documents"), "{error}");
    let error = invalid(&edited(|v| v["shards"] = serde_json::json!([])));
    assert!(error.contains("shards"), "{error}");
}

#[test]
fn token_manifest_refuses_an_index_size_impossible_for_its_documents() {
    let error = invalid(&edited(|v| v["shards"][0]["index"]["bytes"] = 10.into()));
    assert!(error.contains("shards[0].index.bytes"), "{error}");
    let error = invalid(&edited(|v| {
        v["shards"][0]["index"]["bytes"] = u64::MAX.into();
    }));
    assert!(error.contains("shards[0].index.bytes"), "{error}");
}

#[test]
fn token_manifest_refuses_totals_that_are_not_the_sums() {
    for field in ["tokens", "documents", "bytes"] {
        let error = invalid(&edited(|v| {
            let n = v[field].as_u64().expect("number");
            v[field] = (n + 1).into();
        }));
        assert!(error.starts_with(&format!("field `{field}`")), "{error}");
    }
}

#[test]
fn token_manifest_refuses_overflowing_sums() {
    let big = u64::MAX / 2 + 2;
    let error = invalid(&edited(|v| {
        v["shards"][0]["bytes"] = big.into();
        v["shards"][1]["bytes"] = big.into();
    }));
    assert!(error.contains("shards[1].bytes"), "{error}");
    assert!(error.contains("overflow"), "{error}");
}

#[test]
fn token_manifest_refuses_bad_names() {
    for name in ["../x", "/etc/passwd", "", "a/../../b", "a\nb"] {
        let error = invalid(&edited(|v| v["shards"][1]["name"] = name.into()));
        assert!(error.contains("shards[1].name"), "{name:?}: {error}");
        let error = invalid(&edited(|v| v["shards"][0]["index"]["name"] = name.into()));
        assert!(error.contains("shards[0].index.name"), "{name:?}: {error}");
    }
    let error = invalid(&edited(|v| {
        v["shards"][1]["name"] = "shard-000000.bin".into()
    }));
    assert!(error.contains("named twice"), "{error}");
    let error = invalid(&edited(|v| {
        v["shards"][1]["index"]["name"] = "shard-000001.bin".into();
    }));
    assert!(error.contains("shards[1].index.name"), "{error}");
}

#[test]
fn token_manifest_refuses_bad_header_fields() {
    let error = invalid(&edited(|v| v["format"] = "tributary".into()));
    assert!(error.contains("format"), "{error}");
    let error = invalid(&edited(|v| v["version"] = 2.into()));
    assert!(error.contains("version 2"), "{error}");
    let error = invalid(&edited(|v| v["dtype"] = "u8".into()));
    assert!(error.contains("dtype"), "{error}");
    let error = invalid(&edited(|v| v["eos_id"] = 300.into()));
    assert!(error.contains("eos_id"), "{error}");
    let error = invalid(&edited(|v| v["vocab_size"] = 70_000.into()));
    assert!(error.contains("vocab_size"), "{error}");
    let error = invalid(&edited(|v| v["shards"][0]["extra"] = 1.into()));
    assert!(error.contains("shards[0]"), "{error}");
    let error = invalid(&edited(|v| v["shards"][0]["tokens"] = (-1).into()));
    assert!(error.contains("shards[0].tokens"), "{error}");
}
