//! Packing through a store whose uploads fail: transient failures are
//! retried, and a run that fails for good leaves no manifest behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use tributary_io::testing::{Intercept, InterceptStore};
use tributary_io::RetryPolicy;
use tributary_io::{Dataset, Location};
use tributary_tools::pack::{pack, PackOptions};
use tributary_tools::progress::NoProgress;

/// Fails the first `n` PUTs of each object whose name contains a pattern.
#[derive(Debug, Default)]
struct Flaky {
    rules: Vec<(&'static str, u32)>,
    failures: Mutex<HashMap<String, u32>>,
}

impl Intercept for Flaky {
    fn before_put(&self, location: &Path, _bytes: u64) -> object_store::Result<()> {
        let name = location.to_string();
        let Some((_, limit)) = self
            .rules
            .iter()
            .find(|(pattern, _)| name.contains(pattern))
        else {
            return Ok(());
        };
        let mut failures = self.failures.lock().expect("lock");
        let count = failures.entry(name.clone()).or_default();
        if *count == *limit {
            return Ok(());
        }
        *count += 1;
        Err(object_store::Error::Generic {
            store: "flaky",
            source: format!("injected failure {count} for {name}").into(),
        })
    }
}

type FlakyStore = InterceptStore<Flaky>;

fn image_folder(dir: &std::path::Path) {
    for class in ["a", "b"] {
        std::fs::create_dir_all(dir.join(class)).expect("mkdir");
        for i in 0..5u32 {
            let img = image::RgbImage::from_fn(20, 16, |x, y| {
                image::Rgb([(x * 9) as u8, (y * 11) as u8, (i * 40) as u8])
            });
            img.save(dir.join(class).join(format!("{i}.jpg")))
                .expect("save");
        }
    }
}

fn flaky(rules: Vec<(&'static str, u32)>) -> (Arc<FlakyStore>, Location) {
    let store = Arc::new(FlakyStore::new(
        Arc::new(InMemory::new()),
        Flaky {
            rules,
            ..Flaky::default()
        },
    ));
    // Short pauses: the run that fails for good spends its whole budget.
    let retry = RetryPolicy {
        attempts: 4,
        first_backoff: Duration::from_millis(20),
        ..RetryPolicy::default()
    };
    let location = Location::from_store(store.clone(), "ds", "memory:///ds").with_retry(retry);
    (store, location)
}

#[tokio::test]
async fn transient_upload_failures_are_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_folder(dir.path());
    // Every shard, its index (`shard-*.idx`) and the manifest fail twice
    // before they succeed.
    let (store, location) = flaky(vec![("shard-", 2), ("manifest", 2)]);
    let options = PackOptions {
        max_samples: 4,
        ..PackOptions::default()
    };
    let summary = pack(dir.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect("pack survives");
    assert_eq!((summary.shards, summary.samples), (3, 10));
    let failures = store.hooks.failures.lock().expect("lock").clone();
    assert_eq!(failures.len(), 7, "{failures:?}");
    assert!(failures.values().all(|&n| n == 2));
    let dataset = Dataset::from_location(location)
        .await
        .expect("manifest written");
    assert_eq!(dataset.manifest.samples, 10);
}

#[tokio::test]
async fn a_failed_pack_leaves_no_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_folder(dir.path());
    let (store, location) = flaky(vec![("shard-000001", u32::MAX)]);
    let options = PackOptions {
        max_samples: 4,
        ..PackOptions::default()
    };
    let error = pack(dir.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect_err("must fail");
    assert!(error.to_string().contains("shard-000001.tar"), "{error}");
    assert!(error.to_string().contains("injected failure"), "{error}");
    let manifest = store.head(&Path::from("ds/manifest.json")).await;
    assert!(
        matches!(manifest, Err(object_store::Error::NotFound { .. })),
        "{manifest:?}"
    );
}

/// Fails every PUT of a shard once `armed` and `allowed` shard PUTs have
/// gone through.
#[derive(Debug, Default)]
struct FailAfter {
    armed: std::sync::atomic::AtomicBool,
    allowed: u32,
    seen: std::sync::atomic::AtomicU32,
}

impl Intercept for FailAfter {
    fn before_put(&self, location: &Path, _bytes: u64) -> object_store::Result<()> {
        use std::sync::atomic::Ordering;
        if !self.armed.load(Ordering::SeqCst) || !location.to_string().contains("shard-") {
            return Ok(());
        }
        if self.seen.fetch_add(1, Ordering::SeqCst) < self.allowed {
            return Ok(());
        }
        Err(object_store::Error::PermissionDenied {
            path: location.to_string(),
            source: "injected failure midway through the pack".into(),
        })
    }
}

/// Every sample of `location`'s dataset, read and checksummed.
async fn read_all(location: &Location) -> Vec<String> {
    let dataset = Dataset::from_location(location.clone())
        .await
        .expect("a readable manifest");
    let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.verified_samples, dataset.manifest.samples);
    // The shards and their index objects.
    tributary_io::publish::objects_named(&dataset.manifest)
}

#[tokio::test]
async fn packing_over_a_dataset_needs_force_and_a_failure_midway_leaves_the_old_one_whole() {
    let old_src = tempfile::tempdir().expect("tempdir");
    image_folder(old_src.path());
    let store = Arc::new(InterceptStore::new(
        Arc::new(InMemory::new()),
        FailAfter {
            allowed: 1,
            ..FailAfter::default()
        },
    ));
    let location = Location::from_store(store.clone(), "ds", "memory:///ds");
    let options = PackOptions {
        max_samples: 3,
        uploads_in_flight: 1,
        ..PackOptions::default()
    };
    pack(old_src.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect("first pack");
    let old = read_all(&location).await;
    assert_eq!(old.len(), 8, "4 shards and their indexes");

    // Without --force: refused, naming the manifest, nothing written.
    let new_src = tempfile::tempdir().expect("tempdir");
    image_folder(new_src.path());
    std::fs::copy(
        new_src.path().join("a/0.jpg"),
        new_src.path().join("a/9.jpg"),
    )
    .expect("one more image");
    let error = pack(new_src.path(), &location, &options, Arc::new(NoProgress))
        .await
        .expect_err("refused without force");
    assert!(
        error.to_string().contains("memory:///ds/manifest.json"),
        "{error}"
    );
    assert!(error.to_string().contains("--force"), "{error}");
    assert_eq!(read_all(&location).await, old);

    // With --force, the second shard's upload fails: the old dataset is
    // still whole, and the new shard that made it is removed.
    let force = PackOptions {
        force: true,
        ..options.clone()
    };
    store
        .hooks
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let error = pack(new_src.path(), &location, &force, Arc::new(NoProgress))
        .await
        .expect_err("injected failure");
    assert!(error.to_string().contains("injected failure"), "{error}");
    assert_eq!(read_all(&location).await, old);
    let listed: Vec<String> = location
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let mut expected = old.clone();
    expected.push("manifest.json".into());
    expected.sort();
    assert_eq!(listed, expected, "only the old dataset is left");

    // With --force and no failure: the new dataset, under new names, and
    // the old shards gone.
    store
        .hooks
        .armed
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let summary = pack(new_src.path(), &location, &force, Arc::new(NoProgress))
        .await
        .expect("forced pack");
    assert_eq!(summary.samples, 11);
    let new = read_all(&location).await;
    assert_eq!(new.len(), 8);
    assert!(new.iter().all(|name| !old.contains(name)), "{new:?}");
    let listed = location.list().await.expect("list");
    assert_eq!(listed.len(), new.len() + 1, "{listed:?}");
}
