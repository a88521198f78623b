//! Packing through a store whose uploads fail: transient failures are
//! retried, and a run that fails for good leaves no manifest behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use tributary_worker::intercept::{Intercept, InterceptStore};
use tributary_worker::pack::{pack, PackOptions};
use tributary_worker::progress::NoProgress;
use tributary_worker::store::RetryPolicy;
use tributary_worker::{Dataset, Location};

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
    // Every shard and the manifest fail twice before they succeed.
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
    assert_eq!(failures.len(), 4, "{failures:?}");
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
