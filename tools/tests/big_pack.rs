//! Packing shards larger than the single-PUT limit: each is streamed up as
//! a multipart upload while it is built, within a memory bound, with the
//! same bytes and manifest entry an in-memory build gives; a part that fails
//! is retried alone, and one that fails for good aborts the run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use tributary_common::format::shard::{index_tar, ShardWriter};
use tributary_common::manifest::Compression;
use tributary_io::testing::{noise, CountingStore, Intercept, InterceptStore};
use tributary_io::{Dataset, Location};
use tributary_io::{RetryPolicy, UploadOptions};
use tributary_tools::pack::{pack, PackOptions};
use tributary_tools::progress::{NoProgress, Progress};

const MIB: u64 = 1 << 20;

/// A WebDataset directory: `samples` samples of one `bin` field each.
fn webdataset(dir: &std::path::Path, samples: u64, bytes: usize) -> Vec<Vec<u8>> {
    (0..samples)
        .map(|i| {
            let data = noise(bytes, i);
            std::fs::write(dir.join(format!("s{i:03}.bin")), &data).expect("write");
            data
        })
        .collect()
}

/// 6 MiB single-PUT limit, 5 MiB parts (S3's least), 2 in flight; 2 shards
/// at once.
fn multipart_options() -> PackOptions {
    PackOptions {
        max_bytes: 13 * MIB,
        uploads_in_flight: 2,
        upload: UploadOptions::new(6 * MIB, 5 * MIB, 2).expect("valid"),
        ..PackOptions::default()
    }
}

/// Counts what the progress bar is told.
#[derive(Debug, Default)]
struct Seen {
    samples: AtomicU64,
    uploaded: AtomicU64,
    shards: AtomicU64,
    total_shards: AtomicU64,
}

impl Progress for Seen {
    fn advance(&self, samples: u64, _bytes: u64) {
        self.samples.fetch_add(samples, Ordering::SeqCst);
    }
    fn total_shards(&self, shards: u64) {
        self.total_shards.store(shards, Ordering::SeqCst);
    }
    fn uploaded(&self, bytes: u64, shards: u64) {
        self.uploaded.fetch_add(bytes, Ordering::SeqCst);
        self.shards.fetch_add(shards, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_shards_stream_up_in_parts_with_the_bytes_of_an_in_memory_build() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 12 samples of 3 MB: three shards of four samples, ~12 MB each.
    let samples = webdataset(dir.path(), 12, 3_000_000);
    let store = Arc::new(CountingStore::counting_parts(Arc::new(InMemory::new())));
    let location = Location::from_multipart_store(store.clone(), "ds", "memory:///ds");
    let options = multipart_options();
    let seen = Arc::new(Seen::default());
    let summary = pack(dir.path(), &location, &options, seen.clone())
        .await
        .expect("pack");
    assert_eq!((summary.shards, summary.samples), (3, 12));
    // Every shard is over the limit: three parts each (5 + 5 + ~2 MiB).
    assert_eq!(summary.parts, 9);
    assert_eq!(store.hooks.parts.load(Ordering::SeqCst), 9);
    assert_eq!(store.hooks.completed.load(Ordering::SeqCst), 3);
    assert_eq!(
        store.hooks.puts.load(Ordering::SeqCst),
        4,
        "the three shard indexes and the manifest"
    );
    // Memory: two shards at once, each within its upload's bound.
    let bound = 2 * options.upload.memory_bound();
    assert!(
        summary.peak_upload_bytes <= bound,
        "{} > {bound}",
        summary.peak_upload_bytes
    );
    assert!(summary.peak_upload_bytes >= 5 * MIB);
    // The progress bar heard of every sample, byte and shard.
    assert_eq!(seen.samples.load(Ordering::SeqCst), 12);
    assert_eq!(seen.total_shards.load(Ordering::SeqCst), 3);
    assert_eq!(seen.shards.load(Ordering::SeqCst), 3);
    assert_eq!(seen.uploaded.load(Ordering::SeqCst), summary.bytes);

    // Each shard: the bytes and manifest entry a whole in-memory build of
    // the same samples gives.
    let dataset = Dataset::from_location(location.clone())
        .await
        .expect("manifest");
    for index in 0..dataset.manifest.shards.len() {
        let meta = dataset.shard_meta(index).await.expect("index");
        let meta = &*meta;
        let mut writer = ShardWriter::new(meta.name.clone(), Compression::NONE);
        for (i, data) in samples.iter().enumerate().skip(index * 4).take(4) {
            writer
                .push(&format!("s{i:03}"), &[("bin", &data[..])])
                .expect("push");
        }
        let built = writer.finish().expect("finish");
        let stored = location.get(&meta.name).await.expect("shard");
        assert_eq!(&stored[..], &built.data[..], "{}", meta.name);
        assert_eq!(meta, &built.meta);
        let (indexed, _) = index_tar(&meta.name, &stored).expect("a plain tar");
        assert_eq!(&indexed, meta);
    }
    let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verified_samples, 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zstd_shards_stream_up_in_parts_and_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    webdataset(dir.path(), 8, 3_000_000);
    let store = Arc::new(CountingStore::counting_parts(Arc::new(InMemory::new())));
    let location = Location::from_multipart_store(store.clone(), "ds", "memory:///ds");
    let options = PackOptions {
        compression: Compression::ZSTD,
        ..multipart_options()
    };
    let summary = pack(dir.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect("pack");
    assert_eq!(summary.shards, 2);
    assert!(summary.parts >= 4, "{}", summary.parts);
    let dataset = Dataset::from_location(location).await.expect("manifest");
    let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verified_samples, 8);
}

/// Fails part `part` of objects whose name holds `pattern`, `times` times
/// (`u32::MAX`: for ever); counts aborted uploads.
#[derive(Debug, Default)]
struct FlakyPart {
    pattern: &'static str,
    part: usize,
    times: u32,
    failures: Mutex<HashMap<String, u32>>,
    aborted: AtomicU64,
}

impl Intercept for FlakyPart {
    fn before_put_part(&self, location: &Path, part: usize, _: u64) -> object_store::Result<()> {
        let name = location.to_string();
        if part != self.part || !name.contains(self.pattern) {
            return Ok(());
        }
        let mut failures = self.failures.lock().expect("lock");
        let count = failures.entry(name.clone()).or_default();
        if *count == self.times {
            return Ok(());
        }
        *count += 1;
        Err(object_store::Error::Generic {
            store: "flaky",
            source: format!("injected failure {count} of part {part} of {name}").into(),
        })
    }

    fn after_multipart(&self, _: &Path, completed: bool) {
        if !completed {
            self.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn flaky(hooks: FlakyPart) -> (Arc<InterceptStore<FlakyPart>>, Location) {
    let store = Arc::new(InterceptStore::with_parts(Arc::new(InMemory::new()), hooks));
    let retry = RetryPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(5),
        ..RetryPolicy::default()
    };
    let location =
        Location::from_multipart_store(store.clone(), "ds", "memory:///ds").with_retry(retry);
    (store, location)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_fails_transiently_is_retried_and_the_pack_succeeds() {
    let dir = tempfile::tempdir().expect("tempdir");
    webdataset(dir.path(), 8, 3_000_000);
    let (store, location) = flaky(FlakyPart {
        pattern: "shard-000001",
        part: 1,
        times: 2,
        ..FlakyPart::default()
    });
    let summary = pack(
        dir.path(),
        &location,
        &multipart_options(),
        Arc::new(NoProgress),
    )
    .await
    .expect("retries ride it out");
    assert_eq!(summary.shards, 2);
    let failures = store.hooks.failures.lock().expect("lock").clone();
    assert_eq!(failures.into_values().collect::<Vec<_>>(), vec![2]);
    assert_eq!(store.hooks.aborted.load(Ordering::SeqCst), 0);
    let dataset = Dataset::from_location(location).await.expect("manifest");
    let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_fails_for_good_aborts_the_upload_and_leaves_no_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    webdataset(dir.path(), 8, 3_000_000);
    let (store, location) = flaky(FlakyPart {
        pattern: "shard-000001",
        part: 1,
        times: u32::MAX,
        ..FlakyPart::default()
    });
    let error = pack(
        dir.path(),
        &location,
        &multipart_options(),
        Arc::new(NoProgress),
    )
    .await
    .expect_err("must fail");
    let text = error.to_string();
    assert!(text.contains("shard-000001.tar (part 2)"), "{text}");
    assert!(text.contains("gave up after 3 attempts"), "{text}");
    assert!(store.hooks.aborted.load(Ordering::SeqCst) >= 1);
    for name in ["ds/manifest.json", "ds/shard-000001.tar"] {
        let head = store.head(&Path::from(name)).await;
        assert!(
            matches!(head, Err(object_store::Error::NotFound { .. })),
            "{name}: {head:?}"
        );
    }
}

#[tokio::test]
async fn part_sizes_too_small_for_the_shard_size_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = Location::open("memory:///ds", &Default::default(), false).expect("memory");
    let options = PackOptions {
        max_bytes: 60 << 30,
        upload: UploadOptions::new(0, 5 * MIB, 2).expect("valid"),
        ..PackOptions::default()
    };
    let error = pack(dir.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("raise the part size"), "{error}");
}
