//! The local shard cache (`--cache-dir`, `--cache-limit`) across processes:
//! `tributary read` runs one epoch per process against an S3-compatible
//! server on loopback whose request log shows which shard GETs each epoch
//! sent. With a cache larger than the dataset the second epoch sends none;
//! with one smaller than it, some; either way every epoch delivers what a
//! run without a cache delivers, and the directory stays within its limit,
//! also while two processes share it.

use std::path::Path;
use std::process::Output;

use tributary_common::manifest::{Chunks, Compression, Manifest, ShardEntry, MANIFEST_NAME};
use tributary_io::cache::ENTRY_OVERHEAD;
use tributary_tests::cli::{success_stdout, tributary};
use tributary_tests::dataset::pack_local;
use tributary_tests::faulty_s3::FaultyS3;
use tributary_tests::s3::S3_ENV;
use tributary_tools::pack::PackOptions;
use tributary_tools::synth::{write_image_folder, SynthOptions};

const URL: &str = "s3://datasets/train";

/// A dataset of 6 shards served at [`URL`]; its manifest.
async fn served(dir: &Path) -> (FaultyS3, Manifest) {
    let images = dir.join("images");
    let synth = SynthOptions {
        images: 60,
        classes: 3,
        seed: 7,
    };
    write_image_folder(&images, &synth, &|_| ()).expect("synth");
    let shards = dir.join("shards");
    let options = PackOptions {
        max_samples: 10,
        compression: Compression::ZSTD,
        block_bytes: 4096,
        ..PackOptions::default()
    };
    pack_local(&images, &shards, &options).await;
    let server = FaultyS3::start().await.expect("start server");
    server.put_dir("datasets", "train", &shards).expect("serve");
    let manifest = std::fs::read(shards.join(MANIFEST_NAME)).expect("read manifest");
    let manifest = Manifest::from_json(&manifest).expect("parse manifest");
    assert_eq!(manifest.shards.len(), 6);
    (server, manifest)
}

/// `tributary read` of one epoch (`extra`: more flags), off the runtime
/// that serves the store.
async fn read(server: &FaultyS3, epoch: u64, extra: &[&str]) -> Output {
    let mut args: Vec<String> = [
        "read",
        URL,
        "--s3-endpoint",
        &server.endpoint,
        "--epoch",
        &epoch.to_string(),
        "--batch-size",
        "8",
        "--image-size",
        "32",
        "--max-read-kib",
        "16",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        tributary(&args, &S3_ENV)
    })
    .await
    .expect("run tributary")
}

/// The bytes of a shard's cache files (the shard's and its index's), each
/// an object and its tag.
fn object_bytes(shard: &ShardEntry) -> u64 {
    match &shard.chunks {
        Chunks::Index(index) => shard.bytes + index.bytes + 2 * ENTRY_OVERHEAD,
        Chunks::Inline(_) | Chunks::RowGroups(_) => shard.bytes + ENTRY_OVERHEAD,
    }
}

/// GETs of anything but the manifest: shards and their indexes.
fn shard_gets(server: &FaultyS3) -> usize {
    server
        .log()
        .iter()
        .filter(|l| l.method == "GET" && !l.path.ends_with(MANIFEST_NAME))
        .count()
}

fn dir_bytes(dir: &Path) -> u64 {
    dir_files(dir).iter().map(|(_, len)| len).sum()
}

/// The cache's files (`entries/NAME`, `tmp/NAME`) and their lengths.
fn dir_files(dir: &Path) -> Vec<(String, u64)> {
    ["entries", "tmp"]
        .iter()
        .flat_map(|sub| {
            std::fs::read_dir(dir.join(sub))
                .expect("cache dir")
                .map(move |e| {
                    let e = e.expect("entry");
                    let name = format!("{sub}/{}", e.file_name().to_string_lossy());
                    (name, e.metadata().expect("stat").len())
                })
        })
        .collect()
}

/// The `cache: ...` line of a read's stderr.
fn cache_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr)
        .lines()
        .find(|l| l.starts_with("cache: "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_epoch_reads_its_shards_from_the_cache_within_its_limit() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let (server, manifest) = served(scratch.path()).await;
    // Shards and their indexes: the cache keeps both.
    let dataset_bytes: u64 = manifest.shards.iter().map(object_bytes).sum();
    let largest = manifest
        .shards
        .iter()
        .map(|s| s.bytes + ENTRY_OVERHEAD)
        .max()
        .unwrap_or(0);
    let mut uncached = Vec::new();
    for epoch in 0..2 {
        uncached.push(success_stdout("read", read(&server, epoch, &[]).await));
    }

    // Larger than the dataset: epoch 1 (a new process) sends no shard GET.
    let big = scratch.path().join("big");
    let limit = (dataset_bytes + 1).to_string();
    let flags = [
        "--cache-dir",
        big.to_str().expect("utf-8"),
        "--cache-limit",
        &limit,
    ];
    let first = read(&server, 0, &flags).await;
    assert_eq!(success_stdout("cached epoch 0", first.clone()), uncached[0]);
    assert!(
        cache_line(&first).contains(" 12 files cached"),
        "{}",
        cache_line(&first)
    );
    server.clear_log();
    let second = read(&server, 1, &flags).await;
    assert_eq!(
        success_stdout("cached epoch 1", second.clone()),
        uncached[1]
    );
    assert_eq!(shard_gets(&server), 0, "{:?}", server.log());
    assert!(
        cache_line(&second).contains(" 0 misses"),
        "{}",
        cache_line(&second)
    );
    assert_eq!(dir_bytes(&big), dataset_bytes);

    // Half the dataset: epoch 1 fetches shards the cache cannot hold,
    // evicting as it goes; the directory never holds more than the limit.
    // (How many it hits depends on when background fills evict: a shuffled
    // order can meet every cached shard after its eviction. The unit tests
    // check the LRU order itself.)
    let half = scratch.path().join("half");
    let limit = (dataset_bytes / 2).max(largest);
    let limit_flag = limit.to_string();
    let flags = [
        "--cache-dir",
        half.to_str().expect("utf-8"),
        "--cache-limit",
        &limit_flag,
    ];
    let first = read(&server, 0, &flags).await;
    let line = cache_line(&first);
    assert_eq!(success_stdout("half epoch 0", first), uncached[0]);
    assert!(line.contains(" 0 corrupt, 0 errors"), "{line}");
    assert!(dir_bytes(&half) <= limit, "{:?}", dir_files(&half));
    server.clear_log();
    let second = read(&server, 1, &flags).await;
    let line = cache_line(&second);
    assert_eq!(success_stdout("half epoch 1", second), uncached[1]);
    assert!(shard_gets(&server) > 0, "{line}");
    assert!(line.contains(" 0 corrupt, 0 errors"), "{line}");
    assert!(dir_bytes(&half) <= limit, "{:?}", dir_files(&half));

    // Two ranks (processes) on one directory at once.
    let shared = scratch.path().join("shared");
    let flags = [
        "--cache-dir",
        shared.to_str().expect("utf-8"),
        "--cache-limit",
        &limit_flag,
    ];
    let world = |rank: &'static str| {
        let mut extra = vec!["--rank", rank, "--world", "2"];
        extra.extend(flags);
        extra
    };
    let (flags0, flags1) = (world("0"), world("1"));
    let (rank0, rank1) = tokio::join!(read(&server, 2, &flags0), read(&server, 2, &flags1));
    for (rank, output) in [rank0, rank1].into_iter().enumerate() {
        assert!(
            output.status.success(),
            "rank {rank}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            cache_line(&output).contains(" 0 errors"),
            "{}",
            cache_line(&output)
        );
    }
    assert!(
        dir_bytes(&shared) <= limit,
        "limit {limit}: {:?}",
        dir_files(&shared)
    );
}

#[tokio::test]
async fn bad_cache_flags_are_refused_by_name() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let file = scratch.path().join("file");
    std::fs::write(&file, b"x").expect("write");
    for (flags, wanted) in [
        (
            vec!["--cache-dir", "/tmp/x", "--cache-limit", "0"],
            "the cache limit must be at least 1 byte",
        ),
        (
            vec!["--cache-dir", "/tmp/x", "--cache-limit", "10XB"],
            "is not a byte count",
        ),
        (vec!["--cache-dir", "/tmp/x"], "--cache-limit"),
        (vec!["--cache-limit", "1GiB"], "--cache-dir"),
    ] {
        let mut args = vec!["read", "/nowhere"];
        args.extend(&flags);
        let output = tributary(&args, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(wanted),
            "{flags:?}: {stderr}"
        );
    }
    let under_file = file.join("cache");
    let output = tributary(
        &["read", "/nowhere", "--cache-limit", "1MiB"],
        &[("TRIBUTARY_CACHE_DIR", under_file.to_str().expect("utf-8"))],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("file/cache"),
        "{stderr}"
    );
}
