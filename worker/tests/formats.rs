//! Hostile files end to end: manifests whose numbers cannot be true, labels
//! outside the manifest's classes and zstd bombs, read and inspected.
//! (`index` and `inspect` in bounded range reads are tested with the tools:
//! `tools/tests/index_inspect.rs`.)

use std::path::Path;
use std::sync::Arc;

use tributary_common::format::shard::ShardWriter;
use tributary_common::manifest::{Compression, CompressionKind, Manifest, ShardMeta};
use tributary_tools::inspect::inspect;
use tributary_tools::progress::NoProgress;
use tributary_worker::{Dataset, DecodeConfig, Loader, LoaderConfig, PlanConfig, StoreOptions};
use tributary_worker::{Size, Transform};

fn jpeg(seed: u8) -> Vec<u8> {
    let pixels: Vec<u8> = (0..24 * 16 * 3)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 80)
        .encode(&pixels, 24, 16, jpeg_encoder::ColorType::Rgb)
        .expect("jpeg");
    out
}

/// Writes one shard of `labels.len()` JPEG samples and its manifest under
/// `dir`, listing `classes`.
fn write_dataset(dir: &Path, compression: Compression, labels: &[&str], classes: &[&str]) {
    let name = format!("shard-000000{}", compression.kind.suffix());
    let mut writer = ShardWriter::new(name.clone(), compression);
    for (i, label) in labels.iter().enumerate() {
        writer
            .push(
                &format!("k/{i:03}"),
                &[("cls", label.as_bytes()), ("jpg", &jpeg(i as u8 + 1))],
            )
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    let manifest = Manifest::new(
        compression.kind,
        shard.fields.iter().cloned().collect(),
        classes.iter().map(|c| (*c).to_owned()).collect(),
        vec![shard.meta],
    )
    .expect("manifest");
    write_manifest(dir, &manifest);
    std::fs::write(dir.join(name), &shard.data).expect("write shard");
}

fn write_manifest(dir: &Path, manifest: &Manifest) {
    std::fs::write(dir.join("manifest.json"), manifest.to_json()).expect("write manifest");
}

fn url(dir: &Path) -> String {
    dir.display().to_string()
}

async fn read_all(dataset: Dataset) -> tributary_worker::Result<usize> {
    let config = LoaderConfig {
        plan: PlanConfig {
            batch_size: 4,
            shuffle_buffer: 4,
            ..PlanConfig::default()
        },
        decode: DecodeConfig {
            decode_threads: 2,
            transform: Transform {
                size: Size::square(16),
                ..Transform::default()
            },
            ..DecodeConfig::default()
        },
    };
    let mut loader = Loader::builder(dataset).config(config).build().await?;
    let mut samples = 0;
    while let Some(batch) = loader.next().await {
        samples += batch?.len();
    }
    Ok(samples)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_chunk_sample_count_is_a_manifest_error_not_an_abort() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_dataset(dir.path(), Compression::ZSTD, &["0"; 6], &[]);
    let path = dir.path().join("manifest.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    // The reproduction: read and bench sized a Vec from this count.
    json["shards"][0]["chunk_samples"] = serde_json::json!([4_294_967_295u64]);
    json["shards"][0]["samples"] = 4_294_967_295u64.into();
    json["samples"] = 4_294_967_295u64.into();
    std::fs::write(&path, json.to_string()).expect("write");
    // Every reader (read, bench, inspect, the coordinator) opens through here.
    let message = Dataset::open(&url(dir.path()), &StoreOptions::default())
        .await
        .expect_err("an impossible manifest")
        .to_string();
    assert!(message.contains("manifest.json"), "{message}");
    assert!(message.contains("shards[0].chunk_"), "{message}");
    assert!(message.contains("holds 4294967295 samples"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_past_the_manifest_classes_fails_read_and_inspect_naming_shard_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_dataset(
        dir.path(),
        Compression::NONE,
        &["0", "1", "2", "1"],
        &["cat", "dog"],
    );
    let dataset = Dataset::open(&url(dir.path()), &StoreOptions::default())
        .await
        .expect("open");
    let message = read_all(dataset.clone())
        .await
        .expect_err("cls 2 of 2 classes")
        .to_string();
    assert!(message.contains("shard-000000.tar"), "{message}");
    assert!(message.contains("k/002"), "{message}");
    assert!(message.contains("`cls` 2"), "{message}");
    let report = inspect(&dataset, Arc::new(NoProgress)).await;
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("k/002"),
        "{:?}",
        report.problems
    );

    // Without classes in the manifest, labels are not checked.
    let dir = tempfile::tempdir().expect("tempdir");
    write_dataset(dir.path(), Compression::NONE, &["0", "7"], &[]);
    let dataset = Dataset::open(&url(dir.path()), &StoreOptions::default())
        .await
        .expect("open");
    assert_eq!(read_all(dataset).await.expect("read"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zstd_bomb_shard_is_a_read_error_at_its_recorded_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One frame of 128 MiB of zeros: a few KB stored.
    let bomb = zstd::bulk::compress(&vec![0u8; 128 << 20], 3).expect("compress");
    let crc = crc32c::crc32c(&bomb);
    let meta = ShardMeta {
        name: "bomb.tar.zst".into(),
        samples: 2,
        bytes: bomb.len() as u64,
        crc32c: crc,
        chunk_offsets: vec![0, bomb.len() as u64],
        chunk_samples: vec![2],
        chunk_crc32c: vec![crc],
        chunk_uncompressed_bytes: vec![8192],
    };
    let manifest = Manifest::new(
        CompressionKind::Zstd,
        vec!["jpg".into()],
        vec![],
        vec![meta],
    )
    .expect("manifest");
    write_manifest(dir.path(), &manifest);
    std::fs::write(dir.path().join("bomb.tar.zst"), &bomb).expect("write");
    let dataset = Dataset::open(&url(dir.path()), &StoreOptions::default())
        .await
        .expect("open");
    let message = read_all(dataset.clone())
        .await
        .expect_err("a bomb")
        .to_string();
    assert!(
        message.contains("shard bomb.tar.zst: zstd frame 0 at byte 0"),
        "{message}"
    );
    assert!(message.contains("recorded size of 8192 bytes"), "{message}");
    let report = inspect(&dataset, Arc::new(NoProgress)).await;
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
}
