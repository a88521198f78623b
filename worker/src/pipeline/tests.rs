//! Loader tests that need this crate's test-only decode hook (a sample key
//! that makes the decoder panic), on small in-memory datasets: bad samples,
//! panics, formats by magic bytes, pixel limits.

use std::io::Cursor;
use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use tributary_common::format::shard::ShardWriter;
use tributary_common::manifest::{Compression, Manifest, MANIFEST_NAME};

use crate::pipeline::decode::bad_samples::OnError;
use crate::pipeline::decode::pixels::DecodeLimits;
use crate::pipeline::decode::transform::{Dtype, Layout, Size, Transform};
use crate::pipeline::decode::PANIC_KEY;
use crate::pipeline::ShuffleBytes;
use crate::{
    Batch, Dataset, DecodeConfig, Loader, LoaderConfig, Location, PlanConfig, WorkerError,
};

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Vec::new();
    image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x * 7) as u8, (y * 5) as u8, 90])
    })
    .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
    .expect("encode png");
    out
}

fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let pixels: Vec<u8> = (0..usize::from(width) * usize::from(height) * 3)
        .map(|i| (i * 13 % 251) as u8)
        .collect();
    let mut out = Vec::new();
    jpeg_encoder::Encoder::new(&mut out, 85)
        .encode(&pixels, width, height, jpeg_encoder::ColorType::Rgb)
        .expect("encode jpeg");
    out
}

/// A one-shard dataset of `(key, field extension, bytes)` samples, each
/// with class 0, in memory; chunks of one sample (uncompressed).
async fn dataset(samples: Vec<(String, &str, Vec<u8>)>) -> Dataset {
    let store = Arc::new(InMemory::new());
    let location = Location::from_store(store, "ds", "memory:///ds");
    let mut writer = ShardWriter::new("shard-000000.tar", Compression::NONE);
    for (key, ext, bytes) in &samples {
        writer
            .push(key, &[("cls", b"0"), (ext, bytes)])
            .expect("push");
    }
    let shard = writer.finish().expect("finish");
    let fields = shard.fields.iter().cloned().collect();
    location
        .put(&shard.meta.name, Bytes::from(shard.data))
        .await
        .expect("put shard");
    let manifest = Manifest::new(
        Compression::NONE.kind,
        fields,
        vec!["a".into()],
        vec![shard.meta],
    )
    .expect("manifest");
    location
        .put(MANIFEST_NAME, Bytes::from(manifest.to_json()))
        .await
        .expect("put manifest");
    Dataset::from_location(location).await.expect("open")
}

/// 16 good JPEG samples, with `bad` replacing the samples at those indices.
fn samples_with(bad: &[(usize, &str, Vec<u8>)]) -> Vec<(String, &'static str, Vec<u8>)> {
    let good = jpeg(40, 30);
    (0..16)
        .map(|i| {
            let key = format!("a/{i:03}");
            match bad.iter().find(|(at, _, _)| *at == i) {
                Some((_, name, bytes)) if *name == PANIC_KEY => {
                    (PANIC_KEY.to_owned(), "jpg", bytes.clone())
                }
                Some((_, ext, bytes)) => {
                    let ext: &'static str = if *ext == "png" { "png" } else { "jpg" };
                    (key, ext, bytes.clone())
                }
                None => (key, "jpg", good.clone()),
            }
        })
        .collect()
}

fn config(on_error: OnError, max_bad_fraction: f64) -> LoaderConfig {
    LoaderConfig {
        plan: PlanConfig {
            batch_size: 4,
            shuffle_buffer: 0,
            ..PlanConfig::default()
        },
        decode: DecodeConfig {
            decode_threads: 2,
            transform: Transform {
                size: Size::square(16),
                dtype: Dtype::U8,
                layout: Layout::Nhwc,
                ..Transform::default()
            },
            on_error,
            max_bad_fraction,
            ..DecodeConfig::default()
        },
    }
}

async fn read(
    dataset: impl Into<crate::Datasets>,
    config: LoaderConfig,
) -> (Vec<Batch>, Option<WorkerError>) {
    let mut loader = Loader::builder(dataset)
        .config(config)
        .build()
        .await
        .expect("build");
    let mut batches = Vec::new();
    while let Some(batch) = loader.next().await {
        match batch {
            Ok(batch) => batches.push(batch),
            Err(error) => return (batches, Some(error)),
        }
    }
    (batches, None)
}

#[tokio::test]
async fn a_panic_in_a_decode_thread_is_an_error_naming_the_shard_not_an_abort() {
    let data = dataset(samples_with(&[(5, PANIC_KEY, jpeg(8, 8))])).await;
    let (batches, error) = read(data.clone(), config(OnError::Raise, 0.0)).await;
    let error = error.expect("the panic is an error");
    let text = error.to_string();
    assert!(matches!(error, WorkerError::BadSample { .. }), "{text}");
    assert!(text.contains("shard-000000.tar"), "{text}");
    assert!(text.contains(PANIC_KEY), "{text}");
    assert!(text.contains("panicked"), "{text}");
    assert_eq!(batches.len(), 1, "the batch before the panic came out");
    // Skipped, the process goes on and the rest of the epoch comes out.
    let (batches, error) = read(data, config(OnError::Skip, 0.1)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 15);
}

#[tokio::test]
async fn image_formats_are_chosen_by_magic_bytes_not_the_extension() {
    // A PNG in a `jpg` field and a JPEG in a `png` field: both decode.
    let data = dataset(samples_with(&[
        (2, "jpg", png(33, 21)),
        (9, "png", jpeg(24, 24)),
    ]))
    .await;
    assert_eq!(data.manifest.shards.len(), 1);
    let (batches, error) = read(data, config(OnError::Raise, 0.0)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 16);
}

#[tokio::test]
async fn a_bad_sample_raises_by_default_naming_shard_key_and_byte_offset() {
    let data = dataset(samples_with(&[(6, "jpg", b"GIF89a not an image".to_vec())])).await;
    let offset = data.shard_meta(0).await.expect("index").chunk_offsets[6];
    assert!(offset > 0);
    let (_, error) = read(
        data,
        LoaderConfig {
            plan: config(OnError::Raise, 0.5).plan,
            decode: DecodeConfig {
                on_error: OnError::default(),
                ..config(OnError::Raise, 0.5).decode
            },
        },
    )
    .await;
    let error = error.expect("raised");
    let text = error.to_string();
    assert!(text.contains("shard shard-000000.tar"), "{text}");
    assert!(text.contains(&format!("chunk at byte {offset}")), "{text}");
    assert!(text.contains("a/006"), "{text}");
    assert!(text.contains("not a JPEG, PNG or WebP"), "{text}");
}

#[tokio::test]
async fn skipped_samples_shorten_their_batch_are_counted_and_keep_the_order() {
    let bad = [
        (1, "jpg", b"garbage".to_vec()),
        (6, "jpg", Vec::new()),
        (7, "png", png(4, 4)[..20].to_vec()),
    ];
    let data = dataset(samples_with(&bad)).await;
    let read_keys = |data: Dataset| async move {
        let mut loader = Loader::builder(data)
            .config(LoaderConfig {
                plan: PlanConfig {
                    shuffle_buffer: 8,
                    seed: 7,
                    ..config(OnError::Skip, 0.25).plan
                },
                decode: config(OnError::Skip, 0.25).decode,
            })
            .build()
            .await
            .expect("build");
        let mut sizes = Vec::new();
        let mut keys = Vec::new();
        let mut consumed = 0;
        while let Some(batch) = loader.next().await {
            let batch = batch.expect("skipped, not raised");
            consumed += batch.consumed();
            let (images, shape) = batch.images().expect("images");
            assert_eq!(shape[0], batch.len());
            assert_eq!(batch.labels().expect("labels").len(), batch.len());
            match images {
                crate::Images::U8(buf) => assert_eq!(buf.len(), batch.len() * 16 * 16 * 3),
                crate::Images::F32(_) => unreachable!("u8 layout"),
            }
            sizes.push(batch.len());
            keys.extend(batch.keys);
        }
        // Skipped samples still count as read, for commits and acks.
        assert_eq!(consumed, 16);
        (sizes, keys, loader.metrics().bad_samples)
    };
    let (sizes, keys, bad_count) = read_keys(data.clone()).await;
    assert_eq!(bad_count, 3);
    assert_eq!(sizes.len(), 4, "every batch comes out: {sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), 13);
    for gone in ["a/001", "a/006", "a/007"] {
        assert!(!keys.iter().any(|k| k == gone), "{gone} in {keys:?}");
    }
    let again = read_keys(data).await;
    assert_eq!((sizes, keys, bad_count), again, "same seed, same batches");
}

#[tokio::test]
async fn skipping_fails_once_more_than_max_bad_fraction_is_bad() {
    let bad = [
        (1, "jpg", b"garbage".to_vec()),
        (6, "jpg", b"garbage".to_vec()),
        (11, "jpg", b"garbage".to_vec()),
    ];
    let data = dataset(samples_with(&bad)).await;
    // 3 of 16 is over 1/8: the third fails, in the batch that holds it.
    let (batches, error) = read(data, config(OnError::Skip, 0.125)).await;
    let error = error.expect("over the cap");
    assert!(
        matches!(error, WorkerError::TooManyBadSamples { bad: 3, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("a/011"), "{error}");
    assert_eq!(batches.len(), 2);
}

#[tokio::test]
async fn an_image_over_the_pixel_limit_is_a_bad_sample() {
    let data = dataset(samples_with(&[(3, "png", png(64, 64))])).await;
    let limits = DecodeLimits {
        max_image_pixels: 64 * 63,
        max_pixels_in_flight: 2000,
    };
    let (_, error) = read(
        data.clone(),
        LoaderConfig {
            plan: config(OnError::Raise, 0.0).plan,
            decode: DecodeConfig {
                decode_limits: limits,
                ..config(OnError::Raise, 0.0).decode
            },
        },
    )
    .await;
    let text = error.expect("over the limit").to_string();
    assert!(text.contains("64x64 = 4096 pixels"), "{text}");
    assert!(text.contains("a/003"), "{text}");
    // Within the per-image limit but over the pool's budget: decodes alone.
    let (batches, error) = read(
        data,
        LoaderConfig {
            plan: config(OnError::Raise, 0.0).plan,
            decode: DecodeConfig {
                decode_limits: DecodeLimits {
                    max_image_pixels: 64 * 64,
                    ..limits
                },
                ..config(OnError::Raise, 0.0).decode
            },
        },
    )
    .await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 16);
}

#[tokio::test]
async fn out_of_range_settings_are_config_errors_naming_the_setting() {
    for (config, name) in [
        (
            LoaderConfig {
                plan: PlanConfig {
                    world: usize::MAX,
                    ..PlanConfig::default()
                },
                decode: DecodeConfig::default(),
            },
            "world",
        ),
        (
            LoaderConfig {
                plan: PlanConfig {
                    batch_size: 10_000_000_000,
                    ..PlanConfig::default()
                },
                decode: DecodeConfig::default(),
            },
            "batch_size",
        ),
        (
            LoaderConfig {
                plan: PlanConfig {
                    shuffle_buffer: 10_000_000_000,
                    ..PlanConfig::default()
                },
                decode: DecodeConfig::default(),
            },
            "shuffle_buffer",
        ),
        (
            LoaderConfig {
                plan: PlanConfig::default(),
                decode: DecodeConfig {
                    max_bad_fraction: 2.0,
                    ..DecodeConfig::default()
                },
            },
            "max_bad_fraction",
        ),
        (
            LoaderConfig {
                plan: PlanConfig::default(),
                decode: DecodeConfig {
                    transform: Transform {
                        size: Size::square(100_000),
                        ..Transform::default()
                    },
                    ..DecodeConfig::default()
                },
            },
            "image height",
        ),
        (
            LoaderConfig {
                plan: PlanConfig {
                    batch_size: 60_000,
                    ..PlanConfig::default()
                },
                decode: DecodeConfig {
                    transform: Transform {
                        size: Size::square(4096),
                        ..Transform::default()
                    },
                    ..DecodeConfig::default()
                },
            },
            "bytes",
        ),
    ] {
        let error = config.validate().expect_err(name).to_string();
        assert!(error.contains(name), "{name}: {error}");
    }
}

#[tokio::test]
async fn a_mix_takes_its_counts_and_each_sample_names_its_dataset() {
    use tributary_common::plan::mix::Take;
    let good = jpeg(24, 20);
    let samples = |prefix: &str, bad: Option<usize>| -> Vec<(String, &'static str, Vec<u8>)> {
        (0..16)
            .map(|i| {
                let bytes = if bad == Some(i) {
                    b"not an image".to_vec()
                } else {
                    good.clone()
                };
                (format!("{prefix}/{i:03}"), "jpg", bytes)
            })
            .collect()
    };
    let (a, b) = (
        dataset(samples("a", None)).await,
        dataset(samples("b", Some(3))).await,
    );
    let mixed = crate::Datasets::mixed(
        vec![a.clone(), b.clone()],
        &[Take::Samples(10), Take::Repeat(2.0)],
        0,
    )
    .expect("mix");
    let mut config = config(OnError::Skip, 0.5);
    config.plan.shuffle_buffer = 8;
    let (batches, error) = read(mixed.clone(), config.clone()).await;
    assert!(error.is_none(), "{error:?}");
    let mut per_source = [0usize; 2];
    for batch in &batches {
        assert_eq!(batch.sources.len(), batch.len());
        for (key, &source) in batch.keys.iter().zip(&batch.sources) {
            assert_eq!(&key[..1], ["a", "b"][source as usize], "{key}");
            per_source[source as usize] += 1;
        }
    }
    // Sample b/003 is bad and read twice (two passes): skipped twice.
    let skipped: usize = batches.iter().map(|b| b.skipped_ids.len()).sum();
    assert_eq!(skipped, 2);
    assert_eq!(per_source, [10, 30]);
    // A bad sample of a mix is named by its dataset's URL.
    let (_, error) = read(
        mixed,
        LoaderConfig {
            plan: config.plan,
            decode: DecodeConfig {
                on_error: OnError::Raise,
                ..config.decode
            },
        },
    )
    .await;
    let message = error.expect("a bad sample raises").to_string();
    assert!(
        message.contains("memory:///ds/shard-000000.tar"),
        "{message}"
    );
}

#[tokio::test]
async fn on_error_skip_skips_a_chunk_whose_checksum_fails_and_counts_its_samples() {
    let data = dataset(samples_with(&[])).await;
    // Damage the chunk of sample 5 (one sample per chunk) in the store.
    let meta = data.shard_meta(0).await.expect("meta");
    let name = data.manifest.shards[0].name.clone();
    let mut bytes = data.location.get(&name).await.expect("get").to_vec();
    let at = usize::try_from(meta.chunk_offsets[5]).expect("offset") + 600;
    bytes[at] ^= 0x40;
    data.location
        .put(&name, Bytes::from(bytes))
        .await
        .expect("put");
    let data = Dataset::from_location(data.location.clone())
        .await
        .expect("reopen");

    let (_, error) = read(data.clone(), config(OnError::Raise, 0.5)).await;
    let text = error
        .expect("raise: the damaged chunk ends the epoch")
        .to_string();
    assert!(text.contains("checksum mismatch"), "{text}");

    let (batches, error) = read(data.clone(), config(OnError::Skip, 0.1)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.len(), 4, "the rank's batch count does not change");
    let ids: Vec<u64> = batches.iter().flat_map(|b| b.ids.iter().copied()).collect();
    assert_eq!(ids.len(), 15);
    assert!(!ids.contains(&5), "{ids:?}");

    // The bad-fraction cap still applies: 1 of 16 is over 5%.
    let (_, error) = read(data, config(OnError::Skip, 0.05)).await;
    let error = error.expect("over the cap");
    let text = error.to_string();
    assert!(
        matches!(error, WorkerError::TooManyBadSamples { .. }),
        "{text}"
    );
    assert!(text.contains("checksum mismatch"), "{text}");
    assert!(text.contains("memory:///ds/shard-000000.tar"), "{text}");
}

#[tokio::test]
async fn a_truncated_jpeg_is_a_bad_sample_under_the_policy() {
    let mut cut = jpeg(40, 30);
    cut.truncate(cut.len() / 2);
    let data = dataset(samples_with(&[(3, "jpg", cut)])).await;
    let (_, error) = read(data.clone(), config(OnError::Raise, 0.0)).await;
    let error = error.expect("raise: the truncated JPEG ends the epoch");
    let text = error.to_string();
    assert!(matches!(error, WorkerError::BadSample { .. }), "{text}");
    assert!(text.contains("premature end"), "{text}");
    let (batches, error) = read(data, config(OnError::Skip, 0.1)).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.iter().map(Batch::len).sum::<usize>(), 15);
}

#[tokio::test]
async fn a_buffer_giving_out_by_count_fails_past_its_byte_bound_and_a_spilling_one_reads_on() {
    let ds = dataset(samples_with(&[])).await;
    let each = jpeg(40, 30).len() as u64;
    let mut bounded = config(OnError::Raise, 0.0);
    bounded.plan.shuffle_buffer = 8;
    // Room for three samples' payloads (and their labels), not eight.
    bounded.plan.shuffle_bytes = ShuffleBytes::Refuse(3 * each + 16);
    let (batches, error) = read(ds.clone(), bounded.clone()).await;
    let message = error.expect("over the bound").to_string();
    assert!(
        message.contains("Lower the job's shuffle_buffer"),
        "{message}"
    );
    assert!(
        batches.is_empty(),
        "{} batches before the error",
        batches.len()
    );
    // Given out early instead, every sample is read.
    bounded.plan.shuffle_bytes = ShuffleBytes::Spill(3 * each + 16);
    let (batches, error) = read(ds, bounded).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 16);
}

#[tokio::test]
async fn a_batch_whose_samples_carry_more_than_the_batch_budget_is_refused_naming_it() {
    let ds = dataset(samples_with(&[])).await;
    let each = jpeg(40, 30).len() as u64;
    let mut config = config(OnError::Raise, 0.0);
    config.decode.transform.size = Size::square(8);
    // Room for a batch's 8 x 8 images, not for its four samples' fields.
    config.decode.max_batch_bytes = 3 * each;
    let (batches, error) = read(ds.clone(), config.clone()).await;
    let message = error.expect("over the budget").to_string();
    assert!(message.contains("max_batch_bytes"), "{message}");
    assert!(message.contains("batch 0 of 4 samples"), "{message}");
    assert!(batches.is_empty());
    config.decode.max_batch_bytes = 4 * each + 64;
    let (batches, error) = read(ds, config).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(batches.len(), 4);
}
