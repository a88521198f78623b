//! Uploads against object_store's in-memory store and local filesystem,
//! through an [`InterceptStore`] that counts parts and breaks them.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::ObjectStoreExt;

use super::*;
use crate::testing::{noise, CountingStore, Intercept, InterceptStore};

const MIB: u64 = 1 << 20;

fn options(limit: u64, part: u64, in_flight: usize) -> UploadOptions {
    UploadOptions::new(limit, part, in_flight).expect("valid options")
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        ..RetryPolicy::default()
    }
}

/// Writes `data` in pieces of `piece` bytes and finishes.
async fn upload(
    dest: &Location,
    name: &str,
    data: &[u8],
    options: UploadOptions,
    meter: &Arc<UploadMeter>,
) -> Result<Uploaded> {
    let mut upload = Upload::new(dest, name, options, Arc::clone(meter));
    for piece in data.chunks(777_777) {
        upload.write(piece).await?;
    }
    upload.finish().await
}

#[tokio::test]
async fn an_object_within_the_limit_is_one_put() {
    let store = Arc::new(CountingStore::counting_parts(Arc::new(InMemory::new())));
    let dest = Location::from_multipart_store(store.clone(), "ds", "memory:///ds");
    let meter = Arc::new(UploadMeter::default());
    let data = noise((6 * MIB) as usize, 0);
    let uploaded = upload(&dest, "a.tar", &data, options(6 * MIB, 5 * MIB, 2), &meter)
        .await
        .expect("upload");
    assert_eq!(
        uploaded,
        Uploaded {
            bytes: 6 * MIB,
            parts: 0
        }
    );
    assert_eq!(store.hooks.puts.load(Ordering::SeqCst), 1);
    assert_eq!(store.hooks.parts.load(Ordering::SeqCst), 0);
    assert_eq!(dest.get("a.tar").await.expect("read back"), data);
    assert_eq!(meter.held(), 0);
}

#[tokio::test]
async fn a_larger_object_goes_up_in_parts_within_the_memory_bound() {
    let store = Arc::new(CountingStore::counting_parts(Arc::new(InMemory::new())));
    let dest = Location::from_multipart_store(store.clone(), "ds", "memory:///ds");
    let meter = Arc::new(UploadMeter::default());
    let opts = options(6 * MIB, 5 * MIB, 3);
    // Seven full parts and a short last one.
    let data = noise((37 * MIB + 12_345) as usize, 0);
    let uploaded = upload(&dest, "big.tar", &data, opts, &meter)
        .await
        .expect("upload");
    assert_eq!(uploaded.parts, 8);
    assert_eq!(uploaded.bytes, data.len() as u64);
    assert_eq!(store.hooks.puts.load(Ordering::SeqCst), 0);
    assert_eq!(store.hooks.parts.load(Ordering::SeqCst), 8);
    assert_eq!(store.hooks.completed.load(Ordering::SeqCst), 1);
    assert_eq!(meter.parts(), 8);
    assert_eq!(dest.get("big.tar").await.expect("read back"), data);
    // 5 MiB × (3 + 1): the parts in flight plus the one filling (or
    // waiting), never more; and the parts did overlap.
    assert_eq!(opts.memory_bound(), 20 * MIB);
    assert!(meter.peak() <= opts.memory_bound(), "{}", meter.peak());
    assert!(meter.peak() >= 3 * 5 * MIB, "{}", meter.peak());
    assert_eq!(meter.held(), 0);
}

/// Fails chosen attempts at parts: `(part, failures)`, `u32::MAX` for ever.
#[derive(Debug, Default)]
struct FlakyParts {
    rules: Vec<(usize, u32)>,
    failures: Mutex<HashMap<usize, u32>>,
    aborted: std::sync::atomic::AtomicU32,
    /// Replies to completes to lose (the upload completes all the same).
    lost_replies: std::sync::atomic::AtomicU32,
    /// Completes to fail before they complete anything.
    failed_completes: std::sync::atomic::AtomicU32,
}

/// A transient error of the flaky store, `n` of `what`.
fn injected(what: &str, n: u32) -> object_store::Error {
    object_store::Error::Generic {
        store: "flaky",
        source: format!("injected failure {n} of {what}").into(),
    }
}

/// Takes one from `counter` if it is above 0.
fn take_one(counter: &std::sync::atomic::AtomicU32) -> Option<u32> {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .ok()
}

impl Intercept for FlakyParts {
    fn before_put_part(&self, _: &Path, part: usize, _: u64) -> object_store::Result<()> {
        let Some(&(_, limit)) = self.rules.iter().find(|(p, _)| *p == part) else {
            return Ok(());
        };
        let mut failures = self.failures.lock().expect("lock");
        let count = failures.entry(part).or_default();
        if *count == limit {
            return Ok(());
        }
        *count += 1;
        Err(injected(&format!("part {part}"), *count))
    }

    fn before_complete(&self, _: &Path) -> object_store::Result<()> {
        match take_one(&self.failed_completes) {
            Some(n) => Err(injected("complete", n)),
            None => Ok(()),
        }
    }

    fn complete_reply(&self, _: &Path) -> object_store::Result<()> {
        match take_one(&self.lost_replies) {
            Some(n) => Err(injected("a complete's reply", n)),
            None => Ok(()),
        }
    }

    fn after_multipart(&self, _: &Path, completed: bool) {
        if !completed {
            self.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

fn flaky(rules: Vec<(usize, u32)>) -> (Arc<InMemory>, Arc<InterceptStore<FlakyParts>>, Location) {
    let inner = Arc::new(InMemory::new());
    let hooks = FlakyParts {
        rules,
        ..FlakyParts::default()
    };
    let store = Arc::new(InterceptStore::with_parts(inner.clone(), hooks));
    let dest = Location::from_multipart_store(store.clone(), "ds", "memory:///ds")
        .with_retry(quick_retries());
    (inner, store, dest)
}

#[tokio::test]
async fn a_part_that_fails_transiently_is_sent_again_alone() {
    let (_, store, dest) = flaky(vec![(1, 2), (3, 1)]);
    let meter = Arc::new(UploadMeter::default());
    let data = noise((21 * MIB) as usize, 0);
    let uploaded = upload(&dest, "s.tar", &data, options(0, 5 * MIB, 2), &meter)
        .await
        .expect("retries ride it out");
    assert_eq!(uploaded.parts, 5);
    let failures = store.hooks.failures.lock().expect("lock").clone();
    assert_eq!(failures, HashMap::from([(1, 2), (3, 1)]));
    assert_eq!(dest.get("s.tar").await.expect("read back"), data);
    assert_eq!(store.hooks.aborted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_part_that_fails_for_good_aborts_the_upload() {
    let (inner, store, dest) = flaky(vec![(2, u32::MAX)]);
    let meter = Arc::new(UploadMeter::default());
    let data = noise((21 * MIB) as usize, 0);
    let error = upload(&dest, "s.tar", &data, options(0, 5 * MIB, 2), &meter)
        .await
        .expect_err("must fail");
    let text = error.to_string();
    assert!(text.contains("memory:///ds/s.tar (part 3)"), "{text}");
    assert!(text.contains("gave up after 3 attempts"), "{text}");
    assert!(text.contains("injected failure 3 of part 2"), "{text}");
    assert_eq!(store.hooks.aborted.load(Ordering::SeqCst), 1);
    let head = inner.head(&Path::from("ds/s.tar")).await;
    assert!(
        matches!(head, Err(object_store::Error::NotFound { .. })),
        "{head:?}"
    );
    assert_eq!(meter.held(), 0);
}

#[tokio::test]
async fn a_complete_whose_reply_was_lost_is_found_done() {
    // A shard of the same size left by an earlier run: only a new version
    // of the object counts as this upload's.
    let (inner, store, dest) = flaky(vec![]);
    let data = noise((11 * MIB) as usize, 0);
    inner
        .put(
            &Path::from("ds/s.tar"),
            noise((11 * MIB) as usize, 0)[1..].to_vec().into(),
        )
        .await
        .expect("leftover");
    store.hooks.lost_replies.store(1, Ordering::SeqCst);
    let meter = Arc::new(UploadMeter::default());
    let uploaded = upload(&dest, "s.tar", &data, options(0, 5 * MIB, 2), &meter)
        .await
        .expect("the complete went through");
    assert_eq!(uploaded.parts, 3);
    assert_eq!(store.hooks.lost_replies.load(Ordering::SeqCst), 0);
    assert_eq!(dest.get("s.tar").await.expect("read back"), data);
    assert_eq!(store.hooks.aborted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_complete_that_never_went_through_fails_beside_a_same_size_leftover() {
    let (inner, store, dest) = flaky(vec![]);
    let data = noise((11 * MIB) as usize, 0);
    let leftover = noise((11 * MIB + 1) as usize, 0)[1..].to_vec();
    inner
        .put(&Path::from("ds/s.tar"), leftover.clone().into())
        .await
        .expect("leftover");
    store
        .hooks
        .failed_completes
        .store(u32::MAX, Ordering::SeqCst);
    let meter = Arc::new(UploadMeter::default());
    let error = upload(&dest, "s.tar", &data, options(0, 5 * MIB, 2), &meter)
        .await
        .expect_err("nothing completed");
    assert!(error.to_string().contains("injected failure"), "{error}");
    assert_eq!(store.hooks.aborted.load(Ordering::SeqCst), 1);
    assert_eq!(dest.get("s.tar").await.expect("leftover"), leftover);
}

#[tokio::test]
async fn an_upload_dropped_unfinished_is_aborted() {
    let (inner, store, dest) = flaky(vec![]);
    let meter = Arc::new(UploadMeter::default());
    let mut upload = Upload::new(&dest, "s.tar", options(0, 5 * MIB, 2), meter.clone());
    upload
        .write(&noise((11 * MIB) as usize, 0))
        .await
        .expect("write");
    drop(upload);
    // The abort runs on a task of its own: wait for it, with a deadline.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while store.hooks.aborted.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never aborted");
        tokio::task::yield_now().await;
    }
    let head = inner.head(&Path::from("ds/s.tar")).await;
    assert!(matches!(head, Err(object_store::Error::NotFound { .. })));
}

#[tokio::test]
async fn the_local_filesystem_takes_parts_through_its_own_upload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).expect("local store"));
    let dest = Location::from_store(store, "", "file:///tmp/x");
    let meter = Arc::new(UploadMeter::default());
    let data = noise((16 * MIB + 1) as usize, 0);
    let uploaded = upload(&dest, "big.tar", &data, options(MIB, 5 * MIB, 2), &meter)
        .await
        .expect("upload");
    assert_eq!(uploaded.parts, 4);
    assert_eq!(
        std::fs::read(dir.path().join("big.tar")).expect("file"),
        data
    );

    // Aborted: no object and no staging file left in the directory.
    let mut upload = Upload::new(&dest, "gone.tar", options(0, 5 * MIB, 2), meter);
    upload.write(&data).await.expect("write");
    upload.abort().await;
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, vec!["big.tar".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_upload_is_a_write_for_blocking_threads() {
    use std::io::Write;
    let store = Arc::new(CountingStore::counting_parts(Arc::new(InMemory::new())));
    let dest = Location::from_multipart_store(store.clone(), "ds", "memory:///ds");
    let meter = Arc::new(UploadMeter::default());
    let data = noise((12 * MIB) as usize, 0);
    let upload = Upload::new(&dest, "w.tar", options(0, 5 * MIB, 2), meter.clone());
    let mut writer = BlockingUpload::new(upload, Handle::current());
    let copy = data.clone();
    let uploaded = tokio::task::spawn_blocking(move || {
        for piece in copy.chunks(100_000) {
            writer.write_all(piece).expect("write");
        }
        writer.finish()
    })
    .await
    .expect("join")
    .expect("finish");
    assert_eq!(uploaded.parts, 3);
    assert_eq!(dest.get("w.tar").await.expect("read back"), data);
}

#[test]
fn options_outside_the_stores_limits_are_refused_saying_which() {
    let cases = [
        (UploadOptions::new(6 << 30, 16 << 20, 4), "single-PUT limit"),
        (UploadOptions::new(0, (5 << 20) - 1, 4), "part size 5242879"),
        (UploadOptions::new(0, 6 << 30, 4), "part size"),
        (UploadOptions::new(0, 16 << 20, 0), "parts in flight 0"),
        (UploadOptions::new(0, 16 << 20, 65), "parts in flight 65"),
    ];
    for (result, expected) in cases {
        let error = result.expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
    let default = UploadOptions::default();
    assert_eq!(
        UploadOptions::new(64 << 20, 16 << 20, 4).expect("defaults are valid"),
        default
    );
    assert_eq!(default.memory_bound(), 80 << 20);
    assert_eq!(default.max_object_bytes(), 10_000 * (16 << 20));
}
