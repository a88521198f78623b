//! Tests of the manifest: both versions, and the errors that name fields.

use std::sync::Arc;

use super::meta::legacy_limit;
use super::*;

fn shard(name: &str, samples: u32) -> ShardMeta {
    ShardMeta {
        name: name.into(),
        samples,
        bytes: u64::from(samples) * 1024 + 1024,
        crc32c: 1,
        chunk_offsets: (0..=u64::from(samples)).map(|i| i * 1024).collect(),
        chunk_samples: vec![],
        chunk_crc32c: vec![0; samples as usize],
        chunk_uncompressed_bytes: vec![],
    }
}

#[test]
fn ids_and_locations_agree() {
    let m = Manifest::new(
        CompressionKind::None,
        vec!["jpg".into()],
        vec![],
        vec![shard("a.tar", 3), shard("b.tar", 5)],
    )
    .expect("valid");
    assert_eq!(m.samples, 8);
    assert_eq!(m.sample_id(1, 2), 5);
    assert_eq!(m.locate(5), Some((1, 2)));
    assert_eq!(m.locate(2), Some((0, 2)));
    assert_eq!(m.locate(8), None);
    let back = Manifest::from_json(&m.to_json()).expect("round trip");
    assert_eq!(back, m);
}

#[test]
fn errors_name_the_field() {
    let m = Manifest::new(
        CompressionKind::None,
        vec![],
        vec![],
        vec![shard("a.tar", 2)],
    )
    .expect("valid");
    let mut json: serde_json::Value = serde_json::from_slice(&m.to_json()).expect("json");
    json["shards"][0]
        .as_object_mut()
        .expect("object")
        .remove("chunk_crc32c");
    let err = Manifest::from_json(json.to_string().as_bytes()).expect_err("missing field");
    assert!(err.to_string().contains("shards[0]"), "{err}");
    assert!(err.to_string().contains("chunk_crc32c"), "{err}");

    json["compression"] = "lz4".into();
    let err = Manifest::from_json(json.to_string().as_bytes()).expect_err("bad compression");
    assert!(err.to_string().contains("compression"), "{err}");
    assert!(err.to_string().contains("lz4"), "{err}");

    let mut bad = m.clone();
    let mut meta = ShardMeta::clone(bad.shards[0].inline().expect("inline"));
    meta.chunk_offsets[1] = 0;
    bad.shards[0].chunks = Chunks::Inline(Arc::new(meta));
    let err = Manifest::from_json(&bad.to_json()).expect_err("offsets not increasing");
    assert!(err.to_string().contains("shards[0].chunk_offsets"), "{err}");
}

fn zstd_manifest_json(chunk_samples: u32, sizes: Option<u64>) -> String {
    let sizes = sizes.map_or(String::new(), |s| {
        format!(r#","chunk_uncompressed_bytes":[{s}]"#)
    });
    format!(
        r#"{{"format":"tributary","version":1,"compression":"zstd","fields":["jpg"],"samples":{chunk_samples},"bytes":3584,
           "shards":[{{"name":"s.tar.zst","samples":{chunk_samples},"bytes":3584,"crc32c":1,
           "chunk_offsets":[0,3584],"chunk_samples":[{chunk_samples}],"chunk_crc32c":[1]{sizes}}}]}}"#
    )
}

#[test]
fn a_chunk_sample_count_no_chunk_can_hold_is_rejected_before_anything_is_allocated() {
    // The reproduction: read/bench sized a Vec from this count.
    let err = Manifest::from_json(zstd_manifest_json(u32::MAX, None).as_bytes())
        .expect_err("4294967295 samples in 3584 bytes");
    let text = err.to_string();
    assert!(text.contains("shards[0].chunk_samples"), "{text}");
    assert!(text.contains("4294967295"), "{text}");
    // With a recorded size, the samples must fit in it.
    let err = Manifest::from_json(zstd_manifest_json(9, Some(4096)).as_bytes())
        .expect_err("9 samples need at least 4608 bytes");
    assert!(
        err.to_string()
            .contains("shards[0].chunk_uncompressed_bytes"),
        "{err}"
    );
    let m = Manifest::from_json(zstd_manifest_json(8, Some(4096)).as_bytes()).expect("fits");
    assert_eq!(m.shards[0].inline().expect("inline").chunk_limit(0), 4096);
    assert_eq!(
        m.shards[0].inline().expect("inline").chunk_uncompressed(0),
        Some(4096)
    );
    let err = Manifest::from_json(zstd_manifest_json(8, Some(MAX_CHUNK_BYTES + 1)).as_bytes())
        .expect_err("over the chunk limit");
    assert!(err.to_string().contains("chunk limit"), "{err}");
}

#[test]
fn an_old_manifest_without_chunk_sizes_gets_a_bounded_limit() {
    let m = Manifest::from_json(zstd_manifest_json(2, None).as_bytes()).expect("old manifest");
    assert_eq!(
        m.shards[0].inline().expect("inline").chunk_uncompressed(0),
        None
    );
    assert_eq!(
        m.shards[0].inline().expect("inline").chunk_limit(0),
        LEGACY_MIN_LIMIT
    );
    assert!(!String::from_utf8_lossy(&m.to_json()).contains("chunk_uncompressed_bytes"));
    assert_eq!(legacy_limit(10 << 20), 320 << 20);
    assert_eq!(legacy_limit(u64::MAX), MAX_CHUNK_BYTES);
}

#[test]
fn shard_sizes_whose_sum_overflows_are_an_error_not_a_panic() {
    let mut a = shard("a.tar", 1);
    a.bytes = u64::MAX / 2 + 1;
    let mut b = shard("b.tar", 1);
    b.bytes = u64::MAX / 2 + 1;
    let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![a, b])
        .expect_err("sum overflows");
    assert!(err.to_string().contains("shards[1].bytes"), "{err}");
}

#[test]
fn counts_and_offsets_are_bounded_against_each_other() {
    let mut tiny = shard("a.tar", 2);
    tiny.chunk_offsets = vec![0, 100, 2048];
    let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![tiny])
        .expect_err("a 100-byte chunk cannot hold a sample");
    assert!(err.to_string().contains("shards[0].chunk_offsets"), "{err}");

    let mut huge = shard("a.tar", 1);
    huge.chunk_offsets = vec![0, MAX_CHUNK_BYTES + 1];
    huge.bytes = MAX_CHUNK_BYTES + 2;
    let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![huge])
        .expect_err("chunk over the limit");
    assert!(err.to_string().contains("chunk limit"), "{err}");

    let mut named = shard("a\u{1}.tar", 1);
    named.samples = 1;
    let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![named])
        .expect_err("control character in a name");
    assert!(err.to_string().contains("shards[0].name"), "{err}");

    let mut sized = shard("a.tar", 1);
    sized.chunk_uncompressed_bytes = vec![1024];
    let err = Manifest::new(CompressionKind::None, vec![], vec![], vec![sized])
        .expect_err("sizes only for compressed shards");
    assert!(
        err.to_string()
            .contains("shards[0].chunk_uncompressed_bytes"),
        "{err}"
    );
}

#[test]
fn compression_parses() {
    assert_eq!("none".parse(), Ok(Compression::NONE));
    assert_eq!("zstd".parse(), Ok(Compression::ZSTD));
    assert_eq!("zstd:19".parse::<Compression>().map(|c| c.level), Ok(19));
    assert!("zstd:99".parse::<Compression>().is_err());
    assert!("lz4".parse::<Compression>().is_err());
}

#[test]
fn version_2_round_trips_without_columns_and_its_indexes_decode() {
    let shards = vec![shard("a.tar", 3), shard("b.tar", 5)];
    let (m, indexes) = Manifest::new_indexed(
        CompressionKind::None,
        vec!["jpg".into()],
        vec![],
        shards.clone(),
        index_name,
    )
    .expect("valid");
    assert_eq!(m.version, VERSION_INDEXED);
    let json = String::from_utf8(m.to_json()).expect("utf-8");
    assert!(!json.contains("chunk_"), "{json}");
    assert!(json.contains(r#""index":{"name":"a.tar.idx""#), "{json}");
    let back = Manifest::from_json(json.as_bytes()).expect("parses");
    assert_eq!(back, m);
    assert_eq!(back.locate(4), Some((1, 1)));
    assert_eq!(indexes.len(), 2);
    for ((entry, object), meta) in back.shards.iter().zip(&indexes).zip(&shards) {
        let index = entry.index().expect("version 2");
        assert_eq!(index.name, object.name);
        let decoded =
            index::decode(&object.data, index, entry.summary(), m.compression).expect("decodes");
        assert_eq!(&decoded, meta);
    }
}

#[test]
fn each_version_requires_its_own_fields() {
    let (v2, _) = Manifest::new_indexed(
        CompressionKind::None,
        vec![],
        vec![],
        vec![shard("a.tar", 2)],
        index_name,
    )
    .expect("valid");
    let v1 = Manifest::new(
        CompressionKind::None,
        vec![],
        vec![],
        vec![shard("a.tar", 2)],
    )
    .expect("valid");
    let json =
        |m: &Manifest| -> serde_json::Value { serde_json::from_slice(&m.to_json()).expect("json") };
    let parse = |j: &serde_json::Value| Manifest::from_json(j.to_string().as_bytes());

    let mut mixed = json(&v2);
    mixed["shards"][0]["chunk_offsets"] = serde_json::json!([0, 1024, 2048]);
    let err = parse(&mixed).expect_err("columns in version 2");
    assert!(err.to_string().contains("shards[0].chunk_offsets"), "{err}");

    let mut no_index = json(&v2);
    no_index["shards"][0]
        .as_object_mut()
        .expect("object")
        .remove("index");
    let err = parse(&no_index).expect_err("no index");
    assert!(err.to_string().contains("shards[0].index"), "{err}");

    let mut huge = json(&v2);
    huge["shards"][0]["index"]["bytes"] = (1u64 << 40).into();
    let err = parse(&huge).expect_err("an index no shard of 2 samples needs");
    assert!(err.to_string().contains("shards[0].index.bytes"), "{err}");

    let mut escaping = json(&v2);
    escaping["shards"][0]["index"]["name"] = "../elsewhere.idx".into();
    let err = parse(&escaping).expect_err("index outside the dataset");
    assert!(err.to_string().contains("shards[0].index.name"), "{err}");

    let mut index_in_v1 = json(&v1);
    index_in_v1["shards"][0]["index"] = json(&v2)["shards"][0]["index"].clone();
    let err = parse(&index_in_v1).expect_err("index in version 1");
    assert!(err.to_string().contains("shards[0].index"), "{err}");

    let mut future = json(&v2);
    future["version"] = 3.into();
    let err = parse(&future).expect_err("version 3");
    assert!(err.to_string().contains("version 3"), "{err}");
}
