//! Fuzz tests of the formats Tributary reads from outside: the tar reader
//! and indexer, the manifest parser and validator, and the shard/zstd chunk
//! reader. Each runs mutated valid inputs (bit flips, truncation, splices,
//! huge numbers in headers) and random bytes for a short budget; none may
//! panic or make an allocation over 256 MiB. See `fuzz_harness/mod.rs` for
//! the knobs (`TRIBUTARY_FUZZ_SECS`, `_CASES`, `_SEED`, `_CASE`).

#![allow(unsafe_code)] // the capped allocator of the harness, and only it

#[path = "fuzz_harness/mod.rs"]
mod harness;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use proptest::prelude::*;
use tributary_common::format::shard::{
    chunk_range, decode_chunks, index_tar, verify_shard, ShardWriter, TarIndexer,
};
use tributary_common::format::tar::{self, TarReader, BLOCK};
use tributary_common::manifest::index::{decode, max_index_bytes, IndexRef};
use tributary_common::manifest::{index_name, Compression, CompressionKind, Manifest, ShardMeta};

use harness::{fuzz, inputs, CappedAlloc, ALLOCATION_CAP};

#[global_allocator]
static ALLOC: CappedAlloc = CappedAlloc;

/// The largest single allocation the format code may make while fuzzed:
/// above a legacy chunk's decompression (64 MiB, doubled while growing),
/// far below what an unbounded count asks for.
const CAP: usize = 256 << 20;

fn cap() {
    ALLOCATION_CAP.store(CAP, Ordering::Relaxed);
}

fn shard(compression: Compression, block: usize, samples: usize) -> (Vec<u8>, Manifest) {
    let mut writer = ShardWriter::new("s-000000.tar", compression).block_bytes(block);
    for i in 0..samples {
        let data: Vec<u8> = (0..200 + 97 * i).map(|j| (j * 31 + i * 7) as u8).collect();
        let cls = format!("{}", i % 3);
        writer
            .push(
                &format!("c{}/k{i:03}", i % 3),
                &[("cls", cls.as_bytes()), ("jpg", &data)],
            )
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    let manifest = Manifest::new(
        compression.kind,
        shard.fields.iter().cloned().collect(),
        vec!["a".into(), "b".into(), "c".into()],
        vec![shard.meta],
    )
    .expect("manifest");
    (shard.data, manifest)
}

/// A tar with pax and GNU long-name headers, a directory and trailing junk.
fn dialect_tar() -> Vec<u8> {
    let mut out = Vec::new();
    let set_type = |out: &mut Vec<u8>, at: usize, kind: u8| {
        let header = &mut out[at..at + BLOCK];
        header[156] = kind;
        header[148..156].fill(b' ');
        let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
        header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    };
    let at = out.len();
    tar::append_entry(&mut out, "PaxHeader", b"27 path=some/long/a.jpg\n").expect("pax");
    set_type(&mut out, at, b'x');
    tar::append_entry(&mut out, "x", b"jpeg bytes").expect("entry");
    let at = out.len();
    tar::append_entry(&mut out, "dir", b"").expect("dir");
    set_type(&mut out, at, b'5');
    let at = out.len();
    tar::append_entry(&mut out, "././@LongLink", b"another/long/name/b.cls\0").expect("L");
    set_type(&mut out, at, b'L');
    tar::append_entry(&mut out, "y", b"7").expect("entry");
    tar::append_entry(&mut out, "README", b"no extension").expect("entry");
    tar::append_end(&mut out);
    out
}

fn tar_seeds() -> Vec<Vec<u8>> {
    vec![
        shard(Compression::NONE, 1, 5).0,
        dialect_tar(),
        zstd::stream::decode_all(&shard(Compression::ZSTD, 700, 6).0[..]).expect("plain tar"),
    ]
}

#[test]
fn fuzz_tar_reader_and_indexer() {
    cap();
    let strategy = (
        inputs(tar_seeds(), 4096),
        prop::collection::vec(any::<usize>(), 0..6),
    );
    fuzz("tar", strategy, |(data, cuts)| {
        let mut reader = TarReader::new(data, 0);
        let mut entries = 0;
        while let Ok(Some(entry)) = reader.next_entry() {
            assert!(entry.data.end <= data.len(), "payload inside the buffer");
            assert!(entry.start < entry.end, "entries move forward");
            entries += 1;
            assert!(entries <= data.len() / BLOCK, "at most one entry per block");
        }
        // The streaming indexer gives the same answer in any pieces.
        let whole = index_tar("s.tar", data);
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        cuts.sort_unstable();
        let mut indexer = TarIndexer::new("s.tar");
        let mut at = 0;
        let mut pieces = Ok(());
        for cut in cuts.into_iter().chain([data.len()]) {
            pieces = pieces.and_then(|()| indexer.feed(&data[at..cut]));
            at = cut;
        }
        let streamed = pieces.and_then(|()| indexer.finish());
        match (&whole, &streamed) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
            _ => panic!("whole {whole:?} but in pieces {streamed:?}"),
        }
        // Whatever indexes must read back through the fetch path.
        if let Ok((meta, fields)) = whole {
            let manifest = Manifest::new(
                CompressionKind::None,
                fields.into_iter().collect(),
                vec![],
                vec![meta],
            );
            if let Ok(manifest) = manifest {
                let bytes = Bytes::copy_from_slice(data);
                let meta = manifest.shards[0].inline().expect("version 1");
                let samples = verify_shard(meta, CompressionKind::None, &bytes)
                    .expect("an indexed shard verifies");
                assert_eq!(samples, manifest.shards[0].samples);
            }
        }
    });
}

/// The same shard's manifest as version 2, and its index.
fn indexed(manifest: &Manifest) -> (Manifest, Vec<u8>) {
    let meta = manifest.shards[0].inline().expect("version 1");
    let (manifest, mut indexes) = Manifest::new_indexed(
        manifest.compression,
        manifest.fields.clone(),
        manifest.classes.clone(),
        vec![ShardMeta::clone(meta)],
        index_name,
    )
    .expect("version 2");
    (manifest, indexes.remove(0).data)
}

fn manifest_seeds() -> Vec<Vec<u8>> {
    let shards = [
        shard(Compression::NONE, 1, 4).1,
        shard(Compression::ZSTD, 500, 9).1,
        shard(Compression::ZSTD, 1 << 20, 3).1,
    ];
    let mut seeds: Vec<Vec<u8>> = shards.iter().map(Manifest::to_json).collect();
    seeds.extend(shards.iter().take(2).map(|m| indexed(m).0.to_json()));
    seeds
}

/// Uses one shard's columns the way readers do; nothing here may panic.
fn exercise_shard(meta: &ShardMeta) {
    let range = chunk_range(meta, 0..meta.samples);
    assert!(range.bytes.end <= meta.bytes);
    let last = chunk_range(meta, meta.samples - 1..meta.samples);
    assert!(last.chunks.end <= meta.chunks());
    for chunk in 0..meta.chunks() {
        assert!(meta.chunk_limit(chunk) <= tributary_common::manifest::MAX_CHUNK_BYTES);
    }
}

/// Uses a manifest the way readers do; nothing here may panic.
fn exercise(manifest: &Manifest) {
    for (i, entry) in manifest.shards.iter().enumerate() {
        match entry.inline() {
            Some(meta) => exercise_shard(meta),
            None => {
                let index = entry.index().expect("version 2");
                assert!(index.bytes <= max_index_bytes(entry.samples));
            }
        }
        let first = manifest.shard_start(i);
        assert_eq!(manifest.locate(first), Some((i, 0)));
    }
    assert_eq!(manifest.locate(manifest.samples), None);
}

#[test]
fn fuzz_chunk_index_decoder() {
    cap();
    let seeds: Vec<(Manifest, Vec<u8>)> = [
        shard(Compression::NONE, 1, 5).1,
        shard(Compression::ZSTD, 500, 12).1,
        shard(Compression::ZSTD, 1 << 20, 3).1,
    ]
    .iter()
    .map(indexed)
    .collect();
    let strategy = (
        0..seeds.len(),
        prop::collection::vec(harness::mutation(), 0..6),
        any::<bool>(),
    );
    fuzz("chunk index", strategy, |(which, mutations, resign)| {
        let (manifest, data) = &seeds[*which];
        let entry = &manifest.shards[0];
        let data = harness::mutate(data, mutations);
        // Re-signed, a mutation gets past the manifest's size and checksum
        // to the decoder proper; otherwise those must catch it.
        let index = if *resign {
            IndexRef::of(entry.index().expect("v2").name.clone(), &data)
        } else {
            entry.index().expect("v2").clone()
        };
        match decode(&data, &index, entry.summary(), manifest.compression) {
            Ok(meta) => {
                assert_eq!(meta.samples, entry.samples);
                exercise_shard(&meta);
            }
            Err(error) => {
                let text = error.to_string();
                assert!(
                    text.contains(&index.name) && text.contains(&entry.name),
                    "{text}"
                );
            }
        }
    });
}

#[test]
fn fuzz_manifest_parser_and_validator() {
    cap();
    // Raw byte mutations, and JSON-aware ones: a number replaced by an edge.
    let numbers = prop::sample::select(vec![
        0u64,
        1,
        511,
        512,
        u64::from(u32::MAX),
        u64::from(u32::MAX) + 1,
        u64::MAX,
        u64::MAX / 2 + 1,
        1 << 30,
        (1 << 30) + 1,
    ]);
    let seeds = manifest_seeds();
    let structured = (
        0..seeds.len(),
        any::<prop::sample::Index>(),
        numbers,
        any::<bool>(),
    )
        .prop_map(move |(seed, which, number, remove)| {
            let json: serde_json::Value = serde_json::from_slice(&seeds[seed]).expect("json");
            let mut json = json;
            let mut leaves = Vec::new();
            collect_numbers(&json, String::new(), &mut leaves);
            let path = &leaves[which.index(leaves.len())];
            if let Some(slot) = json.pointer_mut(path) {
                *slot = if remove {
                    serde_json::Value::Null
                } else {
                    number.into()
                };
            }
            json.to_string().into_bytes()
        });
    let strategy = prop_oneof![3 => inputs(manifest_seeds(), 2048), 2 => structured];
    fuzz("manifest", strategy, |json| {
        if let Ok(manifest) = Manifest::from_json(json) {
            exercise(&manifest);
        }
    });
}

fn collect_numbers(value: &serde_json::Value, path: String, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Number(_) => out.push(path),
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_numbers(item, format!("{path}/{i}"), out);
            }
        }
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                collect_numbers(item, format!("{path}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// What a shard-reader case changes besides the bytes.
#[derive(Debug, Clone)]
struct Twist {
    /// Recompute the checksums after mutating, so that mutated bytes reach
    /// the zstd and tar parsers instead of stopping at a checksum.
    fix_checksums: bool,
    /// Forget the recorded chunk sizes (a manifest written before them).
    legacy: bool,
    /// Claim this decompressed size for one chunk (where it validates).
    claim: Option<(prop::sample::Index, u64)>,
}

fn twist() -> impl Strategy<Value = Twist> {
    let sizes = prop::sample::select(vec![512u64, 4096, 1 << 20, 255 << 20, 1 << 30]);
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of((any::<prop::sample::Index>(), sizes)),
    )
        .prop_map(|(fix_checksums, legacy, claim)| Twist {
            fix_checksums,
            legacy,
            claim,
        })
}

fn apply(manifest: &Manifest, data: &[u8], twist: &Twist) -> Option<Manifest> {
    let mut json: serde_json::Value = serde_json::from_slice(&manifest.to_json()).ok()?;
    let shard = &mut json["shards"][0];
    if twist.legacy {
        shard.as_object_mut()?.remove("chunk_uncompressed_bytes");
    }
    if let Some((which, size)) = &twist.claim {
        if let Some(sizes) = shard["chunk_uncompressed_bytes"].as_array_mut() {
            let i = which.index(sizes.len());
            sizes[i] = (*size).into();
        }
    }
    if twist.fix_checksums {
        let offsets: Vec<u64> = serde_json::from_value(shard["chunk_offsets"].clone()).ok()?;
        let crcs: Vec<u32> = offsets
            .windows(2)
            .map(|w| {
                let end = (w[1] as usize).min(data.len());
                crc32c::crc32c(&data[(w[0] as usize).min(end)..end])
            })
            .collect();
        shard["chunk_crc32c"] = crcs.into();
        shard["crc32c"] = crc32c::crc32c(data).into();
    }
    Manifest::from_json(json.to_string().as_bytes()).ok()
}

#[test]
fn fuzz_shard_and_zstd_chunk_reader() {
    // A zstd bomb: 128 MiB of zeros in one small frame, claimed as one
    // sample by a manifest with a recorded size of 1 MiB (or, twisted, none).
    let bomb = zstd::bulk::compress(&vec![0u8; 128 << 20], 3).expect("bomb");
    cap();
    let bomb_manifest = Manifest::new(
        CompressionKind::Zstd,
        vec![],
        vec![],
        vec![ShardMeta {
            name: "bomb.tar.zst".into(),
            samples: 1,
            bytes: bomb.len() as u64,
            crc32c: crc32c::crc32c(&bomb),
            chunk_offsets: vec![0, bomb.len() as u64],
            chunk_samples: vec![1],
            chunk_crc32c: vec![crc32c::crc32c(&bomb)],
            chunk_uncompressed_bytes: vec![1 << 20],
        }],
    )
    .expect("bomb manifest");
    let seeds = [
        shard(Compression::NONE, 1, 6),
        shard(Compression::ZSTD, 600, 10),
        shard(Compression::ZSTD, 1 << 20, 4),
        (bomb, bomb_manifest),
    ];
    let strategy = (
        prop_oneof![10 => 0..3usize, 1 => Just(3usize)],
        prop::collection::vec(harness::mutation(), 0..6),
        twist(),
        any::<prop::sample::Index>(),
        any::<prop::sample::Index>(),
    );
    fuzz("shard", strategy, |(which, mutations, twist, a, b)| {
        let (data, manifest) = &seeds[*which];
        let data = harness::mutate(data, mutations);
        let Some(manifest) = apply(manifest, &data, twist) else {
            return;
        };
        let meta = manifest.shards[0].inline().expect("version 1");
        let bytes = Bytes::from(data);
        let _ = verify_shard(meta, manifest.compression, &bytes);
        let samples = meta.samples as usize;
        let (x, y) = (a.index(samples) as u32, b.index(samples) as u32);
        let want = x.min(y)..x.max(y) + 1;
        let range = chunk_range(meta, want.clone());
        let end = (range.bytes.end as usize).min(bytes.len());
        let start = (range.bytes.start as usize).min(end);
        let mut out = Vec::new();
        let result = decode_chunks(
            meta,
            manifest.compression,
            &range,
            &bytes.slice(start..end),
            0,
            want.clone(),
            &mut out,
        );
        if result.is_ok() {
            assert_eq!(out.len(), want.len());
        }
    });
}
