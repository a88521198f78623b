//! Integration tests of the worker: pack an ImageFolder tree through
//! object_store's local backend, read it back through the full pipeline, and
//! check determinism, I/O economy and error reporting.

use std::path::Path;
use std::sync::Arc;

use object_store::local::LocalFileSystem;
use tributary_common::manifest::Compression;
use tributary_common::plan::span::{Span, SpanSet};
use tributary_io::testing::CountingStore;
use tributary_tests::dataset::pack_local;
use tributary_tools::pack::PackOptions;
use tributary_tools::progress::NoProgress;
use tributary_worker::pipeline::fetch::FetchConfig;
use tributary_worker::{
    Batch, Dataset, DecodeConfig, Loader, LoaderConfig, Location, PlanConfig, StoreOptions, Stripe,
    WorkerError,
};
use tributary_worker::{Dtype, Layout, Preset, Size, Tail, Transform};

/// A small ImageFolder tree: `classes` classes of `per_class` JPEG images
/// (and one PNG), each with distinct content.
fn image_folder(dir: &Path, classes: usize, per_class: usize) {
    for c in 0..classes {
        let class_dir = dir.join(format!("class{c}"));
        std::fs::create_dir_all(&class_dir).expect("mkdir");
        for i in 0..per_class {
            let (w, h) = (48 + (i as u32 * 7) % 40, 40 + (i as u32 * 5) % 30);
            let img = image::RgbImage::from_fn(w, h, |x, y| {
                image::Rgb([
                    (x * 5 + c as u32 * 40) as u8,
                    (y * 6 + i as u32 * 3) as u8,
                    ((x + y) * 2) as u8,
                ])
            });
            let ext = if i == 1 { "png" } else { "jpg" };
            img.save(class_dir.join(format!("{i:04}.{ext}")))
                .expect("save image");
        }
    }
}

async fn packed(dir: &Path, compression: Compression, max_samples: u32) -> Dataset {
    image_folder(&dir.join("src"), 3, 20);
    let options = PackOptions {
        max_samples,
        compression,
        block_bytes: 4096,
        ..PackOptions::default()
    };
    let dest = pack_local(&dir.join("src"), &dir.join("shards"), &options).await;
    Dataset::from_location(dest).await.expect("open dataset")
}

fn config(threads: usize) -> LoaderConfig {
    LoaderConfig {
        plan: PlanConfig {
            seed: 7,
            batch_size: 8,
            shuffle_buffer: 16,
            ..PlanConfig::default()
        },
        decode: DecodeConfig {
            decode_threads: threads,
            transform: Transform {
                size: Size::square(32),
                ..Transform::default()
            },
            ..DecodeConfig::default()
        },
    }
}

/// Every batch of one loader over `dataset` with `config`.
async fn read_with(dataset: Dataset, config: LoaderConfig) -> Result<Vec<Batch>, WorkerError> {
    collect(Loader::builder(dataset).config(config).build().await?).await
}

async fn collect(mut loader: Loader) -> Result<Vec<Batch>, WorkerError> {
    let mut batches = Vec::new();
    while let Some(batch) = loader.next().await {
        batches.push(batch?);
    }
    Ok(batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_then_read_every_sample_once_both_compressions() {
    for compression in [Compression::NONE, Compression::ZSTD] {
        let dir = tempfile::tempdir().expect("tempdir");
        let dataset = packed(dir.path(), compression, 16).await;
        assert_eq!(dataset.manifest.samples, 60);
        assert_eq!(dataset.manifest.shards.len(), 4);
        assert_eq!(dataset.manifest.classes, ["class0", "class1", "class2"]);
        assert_eq!(dataset.manifest.fields, ["cls", "jpg", "png"]);

        let mut ids = Vec::new();
        for rank in 0..2 {
            let loader = Loader::builder(dataset.clone())
                .config(LoaderConfig {
                    plan: PlanConfig {
                        rank,
                        world: 2,
                        ..config(2).plan
                    },
                    decode: config(2).decode,
                })
                .build()
                .await
                .expect("build");
            assert_eq!(loader.samples(), 30);
            let batches = collect(loader).await.expect("read");
            assert_eq!(batches.len(), 4, "30 samples in batches of 8");
            for batch in &batches {
                assert_eq!(batch.images().expect("images").1, [batch.len(), 3, 32, 32]);
                for (key, label) in batch.keys.iter().zip(batch.labels().expect("labels")) {
                    assert_eq!(
                        key.split('/').next(),
                        Some(format!("class{label}").as_str())
                    );
                }
                ids.extend(&batch.ids);
            }
        }
        tributary_common::invariants::check_exactly_once(0..60, ids).expect("exactly once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_batches_bit_for_bit_on_1_or_8_threads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::ZSTD, 16).await;
    let run = |threads: usize, seed: u64| {
        let config = LoaderConfig {
            plan: PlanConfig {
                seed,
                ..config(threads).plan
            },
            decode: config(threads).decode,
        };
        let dataset = dataset.clone();
        async move { read_with(dataset, config).await.expect("read") }
    };
    let one = run(1, 7).await;
    let eight = run(8, 7).await;
    assert_eq!(one.len(), 8);
    assert_eq!(one, eight, "batches differ between 1 and 8 decode threads");
    let other = run(8, 8).await;
    assert_ne!(
        one[0].ids, other[0].ids,
        "another seed must give another order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripes_taken_in_turn_are_the_unstriped_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::ZSTD, 16).await;
    // 60 samples in batches of 8: 8 batches, the last one short.
    let whole = read_with(dataset.clone(), config(2)).await.expect("read");
    assert_eq!(whole.len(), 8);
    let mut stripes = Vec::new();
    for index in 0..3 {
        let config = LoaderConfig {
            plan: PlanConfig {
                stripe: Stripe { index, count: 3 },
                ..config(1).plan
            },
            decode: config(1).decode,
        };
        stripes.push(read_with(dataset.clone(), config).await.expect("read"));
    }
    assert_eq!(
        stripes.iter().map(Vec::len).collect::<Vec<_>>(),
        [3, 3, 2],
        "batches 0,3,6 / 1,4,7 / 2,5"
    );
    // Round robin over the stripes, as PyTorch's DataLoader takes them.
    let mut turns: Vec<_> = stripes.into_iter().map(Vec::into_iter).collect();
    let interleaved: Vec<Batch> = (0..whole.len())
        .map_while(|i| turns[i % 3].next())
        .collect();
    assert_eq!(interleaved, whole, "same batches, pixels and order");

    let bad = LoaderConfig {
        plan: PlanConfig {
            stripe: Stripe { index: 3, count: 3 },
            ..config(1).plan
        },
        decode: config(1).decode,
    };
    let error = read_with(dataset, bad).await.expect_err("stripe 3 of 3");
    assert!(error.to_string().contains("stripe 3 of 3"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn u8_layout_matches_the_f32_layout_before_normalisation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::NONE, 64).await;
    let mut u8_config = config(2);
    u8_config.decode.transform.dtype = Dtype::U8;
    u8_config.decode.transform.layout = Layout::Nhwc;
    let u8_batches = read_with(dataset.clone(), u8_config).await.expect("read");
    let f32_batches = read_with(dataset, config(2)).await.expect("read");
    let (tributary_worker::Images::U8(raw), tributary_worker::Images::F32(norm)) = (
        u8_batches[0].images().expect("images").0,
        f32_batches[0].images().expect("images").0,
    ) else {
        panic!("unexpected layouts");
    };
    assert_eq!(u8_batches[0].images().expect("images").1, [8, 32, 32, 3]);
    // Pixel (y=3, x=5) of image 2, channel 1 (green), in both layouts.
    let (n, y, x, c) = (2usize, 3usize, 5usize, 1usize);
    let v = raw[((n * 32 + y) * 32 + x) * 3 + c];
    let f = norm[((n * 3 + c) * 32 + y) * 32 + x];
    let expected = (f32::from(v) / 255.0 - 0.456) / 0.224;
    assert!((f - expected).abs() < 1e-5, "{f} vs {expected}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_from_a_sample_offset_fetches_only_its_bytes() {
    for compression in [Compression::NONE, Compression::ZSTD] {
        let dir = tempfile::tempdir().expect("tempdir");
        let dataset = packed(dir.path(), compression, 64).await;
        let counting = Arc::new(CountingStore::counting(Arc::new(LocalFileSystem::new())));
        let location = Location::from_store(
            counting.clone(),
            dataset.location.prefix.as_ref(),
            "counted",
        );
        let dataset = Dataset::from_location(location).await.expect("open");
        let (gets_before, bytes_before) = counting.hooks.reads();
        let index_bytes = dataset.manifest.shards[0].index().expect("version 2").bytes;
        let span = Span::new(0, 37, 45);
        // A clone shares the index the loader loads.
        let peek = dataset.clone();
        let loader = Loader::builder(dataset)
            .config(LoaderConfig {
                plan: config(2).plan,
                decode: DecodeConfig {
                    fetch: FetchConfig {
                        max_read_bytes: 1 << 30,
                        first_read_bytes: 1 << 30,
                        ..FetchConfig::default()
                    },
                    ..config(2).decode
                },
            })
            .spans(SpanSet::new([span]))
            .build()
            .await
            .expect("build");
        let batches = collect(loader).await.expect("read");
        let mut ids: Vec<u64> = batches.iter().flat_map(|b| b.ids.clone()).collect();
        ids.sort_unstable();
        assert_eq!(ids, (37..45).collect::<Vec<_>>());
        let (gets, bytes) = counting.hooks.reads();
        let meta = peek.loaded_shard_meta(0).expect("loaded by the loader");
        let range = tributary_common::format::shard::chunk_range(&meta, 37..45);
        assert_eq!(
            gets - gets_before,
            2,
            "{compression}: one GET of the shard's index, one range GET"
        );
        assert_eq!(
            bytes - bytes_before,
            index_bytes + range.bytes.end - range.bytes.start,
            "{compression}: only the index's and the chunks' bytes"
        );
        if compression == Compression::NONE {
            assert_eq!(range.bytes.start, meta.chunk_offsets[37]);
            assert_eq!(range.bytes.end, meta.chunk_offsets[45]);
        }
        assert!(range.bytes.start > 0 && range.bytes.end < meta.bytes);
    }
}

async fn first_error(dataset: Dataset) -> String {
    match read_with(dataset, config(2)).await {
        Ok(_) => panic!("reading a damaged dataset succeeded"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_shards_are_errors_that_name_shard_chunk_and_offset() {
    for compression in [Compression::NONE, Compression::ZSTD] {
        let dir = tempfile::tempdir().expect("tempdir");
        let dataset = packed(dir.path(), compression, 64).await;
        let meta = dataset.shard_meta(0).await.expect("index");
        let path = dir.path().join("shards").join(&meta.name);
        let pristine = std::fs::read(&path).expect("read shard");

        // A flipped byte inside chunk 3.
        let mut corrupt = pristine.clone();
        let at = meta.chunk_offsets[3] as usize + 20;
        corrupt[at] ^= 0x40;
        std::fs::write(&path, &corrupt).expect("write");
        let message = first_error(dataset.clone()).await;
        assert!(message.contains(&meta.name), "{message}");
        assert!(
            message.contains(&format!("chunk 3 at byte {}", meta.chunk_offsets[3])),
            "{message}"
        );
        assert!(message.contains("checksum mismatch"), "{message}");

        // A shard cut short.
        std::fs::write(&path, &pristine[..pristine.len() / 2]).expect("write");
        let message = first_error(dataset.clone()).await;
        assert!(message.contains(&meta.name), "{message}");

        // And `inspect` reports the damaged shard too.
        let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].contains(&meta.name));
        std::fs::write(&path, &pristine).expect("restore");
        let report = tributary_tools::inspect::inspect(&dataset, Arc::new(NoProgress)).await;
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(report.verified_samples, 60);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_manifests_and_missing_datasets_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::NONE, 64).await;
    let url = dir.path().join("shards").display().to_string();
    let manifest_path = dir.path().join("shards/manifest.json");
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).expect("read")).expect("json");
    drop(dataset);

    let open = |json: serde_json::Value| {
        let (url, path) = (url.clone(), manifest_path.clone());
        async move {
            std::fs::write(&path, json.to_string()).expect("write manifest");
            Dataset::open(&url, &StoreOptions::default())
                .await
                .expect_err("must fail")
                .to_string()
        }
    };
    let mut missing = original.clone();
    missing["shards"][0]
        .as_object_mut()
        .expect("object")
        .remove("index");
    let message = open(missing).await;
    assert!(
        message.contains("manifest.json")
            && message.contains("shards[0]")
            && message.contains("index"),
        "{message}"
    );

    let mut unknown = original.clone();
    unknown["compression"] = "lz4".into();
    let message = open(unknown).await;
    assert!(
        message.contains("compression") && message.contains("lz4"),
        "{message}"
    );

    let mut version = original.clone();
    version["version"] = 99.into();
    let message = open(version).await;
    assert!(message.contains("version 99"), "{message}");

    let message = Dataset::open(&format!("{url}/nowhere"), &StoreOptions::default())
        .await
        .expect_err("missing")
        .to_string();
    assert!(
        message.contains("nowhere/manifest.json") && message.contains("not found"),
        "{message}"
    );

    let message = Dataset::open("s3://", &StoreOptions::default())
        .await
        .expect_err("bad url")
        .to_string();
    assert!(message.contains("s3://"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_start_small_and_double_up_to_the_largest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::NONE, 64).await;
    let meta = &dataset.shard_meta(0).await.expect("index");
    let chunk = |i: usize| meta.chunk_offsets[i + 1] - meta.chunk_offsets[i];
    let largest_chunk = (0..meta.chunk_offsets.len() - 1)
        .map(chunk)
        .max()
        .expect("chunks");
    let first = largest_chunk; // one chunk or so
    let config = FetchConfig {
        first_read_bytes: first,
        max_read_bytes: 8 * first,
        ..FetchConfig::default()
    };
    let spans = SpanSet::new([Span::new(0, 0, meta.samples)]);
    let reads =
        tributary_worker::pipeline::fetch::plan_reads(&dataset.clone().into(), &spans, &config)
            .await
            .expect("plan");
    let sizes: Vec<u64> = reads
        .iter()
        .map(|r| r.ranges()[0].end - r.ranges()[0].start)
        .collect();
    // Each read holds at most its limit: first, 2 first, 4 first, then 8.
    for (i, size) in sizes.iter().enumerate() {
        let limit = first << i.min(3);
        assert!(
            *size <= limit,
            "read {i} of {size} bytes over {limit}: {sizes:?}"
        );
    }
    assert!(sizes[3] > 2 * first, "the limit grew: {sizes:?}");
    // Together they cover the span exactly, in order.
    assert_eq!(reads[0].want.start, 0);
    assert_eq!(reads.last().expect("reads").want.end, meta.samples);
    assert!(reads.windows(2).all(
        |w| w[0].want.end == w[1].want.start && w[0].ranges()[0].end == w[1].ranges()[0].start
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unshuffled_reading_gives_every_sample_once_across_ranks_with_either_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 60 samples in shards of 16: 7 ranks do not divide them.
    let dataset = packed(dir.path(), Compression::NONE, 16).await;
    for world in [1usize, 2, 3, 7] {
        for tail in [Tail::Uneven, Tail::Pad] {
            let mut real = Vec::new();
            let mut lengths = Vec::new();
            for rank in 0..world {
                let batches = read_with(
                    dataset.clone(),
                    LoaderConfig {
                        plan: PlanConfig {
                            rank,
                            world,
                            shuffle: false,
                            tail,
                            ..config(2).plan
                        },
                        decode: DecodeConfig {
                            transform: Transform {
                                preset: Preset::Eval,
                                ..config(2).decode.transform
                            },
                            ..config(2).decode
                        },
                    },
                )
                .await
                .expect("read");
                let mut mine = Vec::new();
                let mut count = 0;
                for batch in &batches {
                    count += batch.len();
                    for (id, valid) in batch.ids.iter().zip(batch.valid()) {
                        if valid {
                            mine.push(*id);
                        }
                    }
                    // Padding only ever trails the real samples.
                    assert!(batch.padded <= batch.len());
                }
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "manifest order");
                lengths.push(count);
                real.extend(mine);
            }
            real.sort_unstable();
            assert_eq!(real, (0..60).collect::<Vec<u64>>(), "{world} ranks, {tail}");
            match tail {
                Tail::Pad => assert!(lengths.iter().all(|&l| l == 60usize.div_ceil(world))),
                Tail::Uneven => assert_eq!(lengths.iter().sum::<usize>(), 60),
            }
        }
    }
}

/// A trainer that stops pulling (a long step) leaves parsed reads waiting
/// for downstream; that wait is not parse time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_pulling_adds_nothing_to_the_parse_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dataset = packed(dir.path(), Compression::NONE, 4).await;
    let mut config = config(1);
    config.plan.batch_size = 2;
    config.plan.shuffle_buffer = 2;
    config.decode.prefetch_batches = 1;
    let metrics = Arc::new(tributary_worker::pipeline::metrics::Metrics::default());
    let mut loader = Loader::builder(dataset)
        .config(config)
        .metrics(Arc::clone(&metrics))
        .build()
        .await
        .expect("loader");
    loader.next().await.expect("a batch").expect("decoded");
    // The trainer's step: the stall under test, not a wait for an event.
    let step = std::time::Duration::from_millis(800);
    tokio::time::sleep(step).await;
    let mut samples = 2;
    while let Some(batch) = loader.next().await {
        samples += batch.expect("batch").len();
    }
    assert_eq!(samples, 60);
    let m = metrics.snapshot();
    assert_eq!(m.parsed_samples, 60);
    // Parsing these 15 reads of 4 small images takes milliseconds; timed
    // up to the moment each result was pulled, reads parsed during the
    // stall counted it.
    assert!(
        m.parse_time < step / 4,
        "parse time {:?} for 60 samples",
        m.parse_time
    );
}
