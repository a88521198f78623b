//! `tributary bench URL`: the loader's throughput against the ceiling of
//! what the CPU can decode, measured in the same run on the same images with
//! the same threads.
//!
//! 1. Pipeline: one loader reads the first `--samples` samples of epoch 0
//!    (fetch, verify, shuffle, decode, RandomResizedCrop, flip, resize,
//!    normalise, batch); the consumer takes batches as fast as they come.
//! 2. Ceiling: the first of the same samples, up to [`CEILING_BYTES`] of
//!    encoded images held in memory (not the whole dataset), are only
//!    decoded, whole and at full size, with the fastest decoder the loader
//!    uses (libjpeg-turbo for JPEG); no crop, resize, normalisation or
//!    batching; on a pool of the same size, fetched under the same byte
//!    budget and decoded under the same pixel limits as the loader's (an
//!    image over `--max-image-pixels` is a bad sample; the threads hold at
//!    most `--max-decode-pixels` at once). Bad samples end the run, or
//!    with `--on-error skip` are skipped and counted, as in the pipeline.
//!
//! With `--sequence-length` it measures a token dataset instead
//! ([`crate::bench_tokens`]).
//!
//! Peak RSS is read after the pipeline phase, before the ceiling phase loads
//! its images into memory.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use futures::StreamExt;
use rayon::prelude::*;
use tributary_common::plan::epoch_spans;
use tributary_common::sample::Sample;
use tributary_worker::pipeline::decode::fields::Decoder;
use tributary_worker::pipeline::decode::pixels::{DecodeLimits, ImageKind, PixelBudget};
use tributary_worker::pipeline::decode::{image_field, jpeg, render};
use tributary_worker::pipeline::metrics::Metrics;
use tributary_worker::pipeline::{span_samples_with, Datasets};
use tributary_worker::{Dataset, Fields, Loader, OnError};

use crate::pipeline_args::{PipelineArgs, SequenceArgs};
use crate::process_stats::peak_rss_kib;

/// The most encoded image bytes the ceiling phase holds in memory (256 MiB):
/// it measures decoding, which needs a few thousand images, not a dataset.
pub const CEILING_BYTES: usize = 256 << 20;
use crate::storage::{CacheArgs, StoreArgs};

#[derive(Debug, clap::Args)]
pub struct Args {
    url: String,
    /// Samples to load (default: the whole dataset).
    #[arg(long, value_parser = crate::pipeline_args::u64_in(1, u64::MAX))]
    samples: Option<u64>,
    #[command(flatten)]
    pipeline: PipelineArgs,
    #[command(flatten)]
    sequence: SequenceArgs,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    cache: CacheArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Some(sequence) = args.sequence.sequence() {
        let token_ids = args.sequence.token_dtype;
        return crate::bench_tokens::run(
            &args.url,
            args.samples,
            &args.pipeline,
            &args.store,
            sequence,
            token_ids,
        )
        .await;
    }
    let dataset = Dataset::open(&args.url, &args.store.options(&args.url))
        .await?
        .with_cache(args.cache.open()?);
    let config = args.pipeline.config();
    // What the ceiling phase reads: of a Parquet dataset, the columns the
    // fields name (of tar shards, whole samples); and the fields, resolved.
    let (ceiling_data, fields) =
        Datasets::from(dataset.clone()).with_fields(&config.decode.fields)?;
    let threads = config.decode.decode_threads;
    let (fetch, limits, on_error) = (
        config.decode.fetch.clone(),
        config.decode.decode_limits,
        config.decode.on_error,
    );
    let counts: Vec<u32> = dataset.manifest.shards.iter().map(|s| s.samples).collect();
    let all = epoch_spans(&counts, 0, 0);
    let wanted = args.samples.unwrap_or(all.len()).min(all.len());
    let spans = all.split_at(wanted).0;
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?,
    );

    // 1. The pipeline.
    let rss_before = peak_rss_kib();
    let mut loader = Loader::builder(dataset.clone())
        .config(config)
        .spans(spans.clone())
        .decode_pool(Arc::clone(&pool))
        .build()
        .await?;
    let mut checksum = 0f64;
    while let Some(batch) = loader.next().await {
        let batch = batch?;
        // Touch the output so nothing is optimised away.
        checksum += match batch.images().map(|(images, _)| images) {
            Some(tributary_worker::Images::F32(v)) => f64::from(v[v.len() / 2]),
            Some(tributary_worker::Images::U8(v)) => f64::from(v[v.len() / 2]),
            None => 0.0,
        };
    }
    let m = loader.metrics();
    let rss_peak = peak_rss_kib();
    let pipeline_rate = m.samples_per_sec();

    // 2. The decode-only ceiling on the first of the same images, at most
    // CEILING_BYTES of them in memory.
    let mut encoded = Vec::new();
    let mut held = 0usize;
    let mut stream = std::pin::pin!(span_samples_with(
        ceiling_data,
        &spans,
        &fetch,
        on_error,
        Arc::new(Metrics::default())
    ));
    'fetch: while let Some(read) = stream.next().await {
        for sample in read?.samples {
            if held >= CEILING_BYTES {
                break 'fetch;
            }
            held += sample.payload_bytes();
            encoded.push(sample);
        }
    }
    let budget = PixelBudget::new(limits.max_pixels_in_flight);
    let started = Instant::now();
    let outcomes: Vec<anyhow::Result<u32>> = pool.install(|| {
        encoded
            .par_iter()
            .with_max_len(1)
            .map(|sample| {
                decode_whole(sample, &fields, &limits, &budget).with_context(|| sample.key.clone())
            })
            .collect()
    });
    let mut decoded = 0usize;
    let mut skipped = 0usize;
    for outcome in outcomes {
        match outcome {
            Ok(_) => decoded += 1,
            Err(error) if on_error == OnError::Skip => {
                tracing::warn!("decode-only ceiling: a bad sample is skipped: {error:#}");
                skipped += 1;
            }
            Err(error) => return Err(error),
        }
    }
    let ceiling = decoded as f64 / started.elapsed().as_secs_f64();

    println!("tributary bench {}", args.url);
    println!(
        "  samples              {} ({} shards in the dataset), batch {}",
        m.samples,
        dataset.manifest.shards.len(),
        args.pipeline.batch_size,
    );
    println!("  transform            {}", args.pipeline.describe());
    println!("  decode threads       {threads}");
    println!(
        "  pipeline             {pipeline_rate:.1} samples/s ({:.1} MB/s fetched)",
        m.bytes_per_sec() / 1e6
    );
    println!(
        "  time to first batch  {:.1} ms",
        m.first_batch.unwrap_or_default().as_secs_f64() * 1e3
    );
    println!(
        "  consumer waited      {:.2} s of {:.2} s ({:.0}%)",
        m.consumer_wait.as_secs_f64(),
        m.elapsed.as_secs_f64(),
        100.0 * m.consumer_wait.as_secs_f64() / m.elapsed.as_secs_f64().max(1e-9)
    );
    println!(
        "  stage time (summed)  fetch {:.2} s (reads in flight), parse {:.2} s, decode+augment {:.2} s",
        m.fetch_time.as_secs_f64(),
        m.parse_time.as_secs_f64(),
        m.decode_time.as_secs_f64()
    );
    match (rss_before, rss_peak) {
        (Some(before), Some(peak)) => println!(
            "  peak RSS             {:.0} MiB (process at start {:.0} MiB)",
            peak as f64 / 1024.0,
            before as f64 / 1024.0
        ),
        _ => println!("  peak RSS             unavailable (no /proc/self/status)"),
    }
    println!(
        "  decode-only ceiling  {ceiling:.1} samples/s (whole-image decode alone, first {decoded} of the same images, {:.0} MiB, {threads} threads)",
        held as f64 / (1 << 20) as f64
    );
    if skipped > 0 {
        println!("  skipped (ceiling)    {skipped} bad samples");
    }
    println!("  pipeline / ceiling   {:.2}", pipeline_rate / ceiling);
    tracing::debug!(checksum, "output checksum");
    Ok(())
}

/// Decodes `sample`'s image whole, with the fastest decoder the loader
/// uses, within `limits` (its header checked before any pixel is
/// decoded) and holding its pixels of `budget` meanwhile; its width.
fn decode_whole(
    sample: &Sample,
    fields: &Fields,
    limits: &DecodeLimits,
    budget: &PixelBudget,
) -> anyhow::Result<u32> {
    let bytes = image_bytes(sample, fields)?;
    let kind = ImageKind::of(bytes).map_err(anyhow::Error::msg)?;
    let dimensions = kind.dimensions(bytes).map_err(anyhow::Error::msg)?;
    let pixels = limits.check(kind, dimensions).map_err(anyhow::Error::msg)?;
    let _pixels = budget.acquire(pixels);
    match kind {
        ImageKind::Jpeg => jpeg::decode_whole(bytes).map(|(w, _)| w),
        _ => render::decode(bytes).map(|image| image.width),
    }
    .map_err(anyhow::Error::msg)
}

/// The sample's image: its first field with an image extension, or (a
/// Parquet row's fields are named by column) the first field an image
/// field of `fields` names.
fn image_bytes<'a>(sample: &'a Sample, fields: &Fields) -> anyhow::Result<&'a [u8]> {
    image_field(sample).map(|(_, bytes)| bytes).or_else(|e| {
        fields
            .0
            .iter()
            .filter(|spec| spec.decoder == Decoder::Image)
            .flat_map(|spec| &spec.extensions)
            .find_map(|name| {
                sample
                    .fields
                    .iter()
                    .find(|f| f.ext.eq_ignore_ascii_case(name))
            })
            .map(|f| &f.data[..])
            .ok_or_else(|| e.into())
    })
}
