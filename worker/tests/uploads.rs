//! Packing through a store whose uploads fail: transient failures are
//! retried, and a run that fails for good leaves no manifest behind.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use tributary_worker::pack::{pack, PackOptions};
use tributary_worker::progress::NoProgress;
use tributary_worker::{Dataset, Location};

/// Fails the first `n` PUTs of each object whose name contains a pattern.
#[derive(Debug)]
struct FlakyStore {
    inner: InMemory,
    failures: Mutex<HashMap<String, u32>>,
    rules: Vec<(&'static str, u32)>,
}

impl fmt::Display for FlakyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FlakyStore")
    }
}

#[async_trait::async_trait]
impl ObjectStore for FlakyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let name = location.to_string();
        if let Some((_, limit)) = self
            .rules
            .iter()
            .find(|(pattern, _)| name.contains(pattern))
        {
            let mut failures = self.failures.lock().expect("lock");
            let count = failures.entry(name.clone()).or_default();
            if *count < *limit {
                *count += 1;
                return Err(object_store::Error::Generic {
                    store: "flaky",
                    source: format!("injected failure {count} for {name}").into(),
                });
            }
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

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
    let store = Arc::new(FlakyStore {
        inner: InMemory::new(),
        failures: Mutex::default(),
        rules,
    });
    let location = Location::from_store(store.clone(), "ds", "memory:///ds");
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
    let failures = store.failures.lock().expect("lock").clone();
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
    let manifest = store.inner.head(&Path::from("ds/manifest.json")).await;
    assert!(
        matches!(manifest, Err(object_store::Error::NotFound { .. })),
        "{manifest:?}"
    );
}
