//! `index` and `inspect` on shards as streams of bounded range reads, and
//! `index` refusing the keys `pack` refuses.

use std::path::Path;
use std::sync::Arc;

use object_store::local::LocalFileSystem;
use tributary_common::format::tar;
use tributary_io::testing::CountingStore;
use tributary_io::{Dataset, Location, ManifestVersion, StoreOptions};
use tributary_tools::index::{index, INDEX_READ_BYTES};
use tributary_tools::inspect::{inspect, INSPECT_READ_BYTES};
use tributary_tools::progress::NoProgress;

fn url(dir: &Path) -> String {
    dir.display().to_string()
}

/// A foreign WebDataset tar of `samples` samples of `size` bytes each.
fn foreign_tar(samples: usize, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..samples {
        let data: Vec<u8> = (0..size).map(|j| (i * 31 + j) as u8).collect();
        tar::append_entry(&mut out, &format!("s/{i:04}.bin"), &data).expect("entry");
        tar::append_entry(&mut out, &format!("s/{i:04}.cls"), b"1").expect("entry");
    }
    tar::append_end(&mut out);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_and_inspect_stream_a_shard_in_bounded_range_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 MiB: three reads of at most 8 MiB each, never the whole shard.
    let data = foreign_tar(40, 512 << 10);
    let size = data.len() as u64;
    assert!(size > 2 * INDEX_READ_BYTES);
    std::fs::write(dir.path().join("big.tar"), &data).expect("write");
    let counting = Arc::new(CountingStore::counting(Arc::new(LocalFileSystem::new())));
    let prefix = std::path::absolute(dir.path()).expect("absolute");
    let location = Location::from_store(
        counting.clone(),
        prefix.to_str().expect("utf-8").trim_start_matches('/'),
        "counted",
    );
    let summary = index(
        &location,
        false,
        ManifestVersion::default(),
        Arc::new(NoProgress),
    )
    .await
    .expect("index");
    assert_eq!(summary.samples, 40);
    let (gets, bytes) = counting.hooks.reads();
    assert_eq!(
        gets,
        size.div_ceil(INDEX_READ_BYTES),
        "range reads of the shard"
    );
    assert_eq!(bytes, size, "each byte read once");

    let dataset = Dataset::from_location(location).await.expect("open");
    let (gets_before, bytes_before) = counting.hooks.reads();
    let report = inspect(&dataset, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verified_samples, 40);
    let (gets, bytes) = counting.hooks.reads();
    assert!(
        gets - gets_before >= size.div_ceil(INSPECT_READ_BYTES),
        "{} reads",
        gets - gets_before
    );
    let index_bytes = dataset.manifest.shards[0].index().expect("version 2").bytes;
    assert_eq!(
        bytes - bytes_before,
        size + index_bytes,
        "each byte of the shard and its index read once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_rejects_keys_with_control_characters_as_pack_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut data = Vec::new();
    tar::append_entry(&mut data, "s/ok.jpg", b"x").expect("entry");
    tar::append_entry(&mut data, "s/bad\u{7}key.jpg", b"x").expect("entry");
    tar::append_end(&mut data);
    std::fs::write(dir.path().join("a.tar"), &data).expect("write");
    let location = Location::open(&url(dir.path()), &StoreOptions::default(), false).expect("open");
    let message = index(
        &location,
        false,
        ManifestVersion::default(),
        Arc::new(NoProgress),
    )
    .await
    .expect_err("a control character")
    .to_string();
    assert!(
        message.contains("a.tar") && message.contains("control character"),
        "{message}"
    );
    assert!(!dir.path().join("manifest.json").exists());
}
