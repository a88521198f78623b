//! Version 2 manifests and their shard indexes, read through the whole
//! pipeline: the same samples as version 1, only the indexes of the shards
//! a rank touches read (once each), and a damaged index an error that names
//! it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use tributary_common::manifest::{Compression, VERSION_INDEXED, VERSION_INLINE};
use tributary_common::plan::span::{Span, SpanSet};
use tributary_io::testing::{Intercept, InterceptStore};
use tributary_io::ManifestVersion;
use tributary_tests::dataset::pack_local;
use tributary_tools::pack::PackOptions;
use tributary_worker::{
    Batch, Dataset, DecodeConfig, Loader, LoaderConfig, Location, PlanConfig, WorkerError,
};
use tributary_worker::{Size, Transform};

/// Six classes of ten small images each.
fn image_folder(dir: &Path) {
    for c in 0..6 {
        let class_dir = dir.join(format!("class{c}"));
        std::fs::create_dir_all(&class_dir).expect("mkdir");
        for i in 0..10u32 {
            let img = image::RgbImage::from_fn(24 + i, 20 + c, |x, y| {
                image::Rgb([(x * 9) as u8, (y * 7 + i * 5) as u8, (c * 40) as u8])
            });
            img.save(class_dir.join(format!("{i:04}.png")))
                .expect("save image");
        }
    }
}

/// The images of `src` packed as `version` into `dest`, 10 samples a shard.
async fn packed(src: &Path, dest: &Path, version: ManifestVersion) -> Location {
    let options = PackOptions {
        max_samples: 10,
        compression: Compression::ZSTD,
        block_bytes: 2048,
        manifest_version: version,
        ..PackOptions::default()
    };
    pack_local(src, dest, &options).await
}

fn config() -> LoaderConfig {
    LoaderConfig {
        plan: PlanConfig {
            seed: 3,
            batch_size: 7,
            shuffle_buffer: 12,
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
    }
}

async fn read(dataset: Dataset, spans: Option<SpanSet>) -> Result<Vec<Batch>, WorkerError> {
    let mut builder = Loader::builder(dataset).config(config());
    if let Some(spans) = spans {
        builder = builder.spans(spans);
    }
    let mut loader = builder.build().await?;
    let mut batches = Vec::new();
    while let Some(batch) = loader.next().await {
        batches.push(batch?);
    }
    Ok(batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_1_and_2_of_a_dataset_deliver_the_same_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_folder(&dir.path().join("src"));
    let v1 = packed(
        &dir.path().join("src"),
        &dir.path().join("v1"),
        ManifestVersion::Inline,
    )
    .await;
    let v2 = packed(
        &dir.path().join("src"),
        &dir.path().join("v2"),
        ManifestVersion::Indexed,
    )
    .await;
    let v1 = Dataset::from_location(v1).await.expect("open v1");
    let v2 = Dataset::from_location(v2).await.expect("open v2");
    assert_eq!(v1.manifest.version, VERSION_INLINE);
    assert_eq!(v2.manifest.version, VERSION_INDEXED);
    assert_eq!(v1.manifest.shards.len(), 6);
    for shard in 0..6 {
        assert_eq!(
            v1.shard_meta(shard).await.expect("inline"),
            v2.shard_meta(shard).await.expect("index"),
            "shard {shard}"
        );
    }
    let size = |d: &str| {
        std::fs::metadata(dir.path().join(d).join("manifest.json"))
            .expect("manifest")
            .len()
    };
    assert!(size("v2") < size("v1"), "{} vs {}", size("v2"), size("v1"));
    let (a, b) = (
        read(v1, None).await.expect("read v1"),
        read(v2, None).await.expect("read v2"),
    );
    assert_eq!(a.iter().map(Batch::len).sum::<usize>(), 60);
    assert_eq!(a, b, "same batches, pixels and order");
}

/// Records the path of every GET.
#[derive(Debug, Default)]
struct Gets(Mutex<Vec<String>>);

impl Intercept for Gets {
    fn after_get(&self, location: &ObjectPath, _bytes: u64) {
        let name = location.filename().unwrap_or_default().to_owned();
        self.0.lock().expect("lock").push(name);
    }
}

impl Gets {
    /// How many GETs each object ending in `suffix` got.
    fn of(&self, suffix: &str) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for name in self.0.lock().expect("lock").iter() {
            if name.ends_with(suffix) {
                *counts.entry(name.clone()).or_default() += 1;
            }
        }
        counts
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rank_reads_the_index_of_each_shard_it_touches_once_and_no_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_folder(&dir.path().join("src"));
    let plain = packed(
        &dir.path().join("src"),
        &dir.path().join("ds"),
        ManifestVersion::Indexed,
    )
    .await;
    let store = Arc::new(InterceptStore::new(
        Arc::new(LocalFileSystem::new()),
        Gets::default(),
    ));
    let location = Location::from_store(store.clone(), plain.prefix.as_ref(), "counted");
    let dataset = Dataset::from_location(location).await.expect("open");
    // Opening (all the coordinator does) reads the manifest alone.
    assert_eq!(
        store.hooks.0.lock().expect("lock").as_slice(),
        ["manifest.json"]
    );
    // Two spans of shard 1, one of shard 4.
    let spans = SpanSet::new([Span::new(1, 0, 4), Span::new(4, 2, 9), Span::new(1, 6, 10)]);
    let batches = read(dataset, Some(spans)).await.expect("read");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 4 + 7 + 4);
    let indexes: Vec<(String, usize)> = store.hooks.of(".idx").into_iter().collect();
    assert_eq!(
        indexes,
        [
            ("shard-000001.tar.zst.idx".to_owned(), 1),
            ("shard-000004.tar.zst.idx".to_owned(), 1)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_or_missing_index_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    image_folder(&dir.path().join("src"));
    let location = packed(
        &dir.path().join("src"),
        &dir.path().join("ds"),
        ManifestVersion::Indexed,
    )
    .await;
    let name = "shard-000002.tar.zst.idx";
    let path = dir.path().join("ds").join(name);
    let pristine = std::fs::read(&path).expect("index");
    let fail = |bytes: Option<Vec<u8>>| {
        let (location, path) = (location.clone(), path.clone());
        async move {
            match bytes {
                Some(bytes) => std::fs::write(&path, bytes).expect("write"),
                None => std::fs::remove_file(&path).expect("remove"),
            }
            let dataset = Dataset::from_location(location).await.expect("open");
            read(dataset, None)
                .await
                .expect_err("must fail")
                .to_string()
        }
    };
    let mut flipped = pristine.clone();
    flipped[8] ^= 0x10;
    let message = fail(Some(flipped)).await;
    assert!(
        message.contains(name)
            && message.contains("shard-000002.tar.zst")
            && message.contains("crc32c"),
        "{message}"
    );
    let message = fail(Some(pristine[..pristine.len() - 3].to_vec())).await;
    assert!(
        message.contains(name) && message.contains("bytes") && message.contains("truncated"),
        "{message}"
    );
    // Larger than the manifest says: refused before its body is read.
    let mut longer = pristine.clone();
    longer.extend_from_slice(&[0; 4096]);
    let message = fail(Some(longer)).await;
    assert!(
        message.contains(name) && message.contains("more than the limit"),
        "{message}"
    );
    let message = fail(None).await;
    assert!(
        message.contains(name) && message.contains("not found"),
        "{message}"
    );
    // Whole again, it reads.
    std::fs::write(&path, &pristine).expect("restore");
    let dataset = Dataset::from_location(location).await.expect("open");
    assert_eq!(
        read(dataset, None)
            .await
            .expect("read")
            .iter()
            .map(Batch::len)
            .sum::<usize>(),
        60
    );
}

/// A manifest as version 1 writers wrote it (before indexes), with a shard
/// the same writer built: it still opens and reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_manifest_from_before_indexes_still_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut writer =
        tributary_common::format::shard::ShardWriter::new("shard-000000.tar", Compression::NONE);
    for i in 0..3u32 {
        let mut png = Vec::new();
        image::RgbImage::from_pixel(8 + i, 8, image::Rgb([1, 2, 3]))
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .expect("png");
        writer
            .push(&format!("a/{i}"), &[("cls", b"0"), ("png", &png)])
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    let meta = &shard.meta;
    std::fs::write(dir.path().join("shard-000000.tar"), &shard.data).expect("shard");
    // Written out by hand, field by field, as a version 1 writer did.
    let list = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let json = format!(
        r#"{{"format":"tributary","version":1,"compression":"none","fields":["cls","png"],"classes":["a"],"samples":3,"bytes":{bytes},
  "shards":[{{"name":"shard-000000.tar","samples":3,"bytes":{bytes},"crc32c":{crc},"chunk_offsets":[{offsets}],"chunk_crc32c":[{crcs}]}}]}}"#,
        bytes = meta.bytes,
        crc = meta.crc32c,
        offsets = list(&meta.chunk_offsets),
        crcs = list(
            &meta
                .chunk_crc32c
                .iter()
                .map(|&c| u64::from(c))
                .collect::<Vec<_>>()
        ),
    );
    std::fs::write(dir.path().join("manifest.json"), json).expect("manifest");
    let dataset = Dataset::open(
        &dir.path().display().to_string(),
        &tributary_worker::StoreOptions::default(),
    )
    .await
    .expect("a version 1 manifest opens");
    assert_eq!(dataset.manifest.version, VERSION_INLINE);
    let batches = read(dataset, None).await.expect("read");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 3);
}
