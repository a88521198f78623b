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
//! `steady rate` is the pipeline's rate from the first batch's arrival to
//! the last's. The whole-run rate also counts the start (the shuffle buffer
//! filled before the first batch, that batch decoded alone), a fixed cost
//! that weighs more the shorter the run (6000 samples take 0.75 s at 16
//! threads): on the 2-core box the whole-run rate of 1500 samples was
//! 0.85-0.94x that of 6000, their steady rates 0.93-0.99x. The steady rate
//! is what a long training run sees, and what rates at different thread
//! counts are best compared by; it leaves out the fetching done before the
//! first batch (up to `--shuffle-buffer` samples), so use many more samples
//! than that.
//!
//! With `--rounds N` the two phases alternate N times (the images of the
//! ceiling fetched once) and the line `pipeline / ceiling` gives the median
//! of the rounds' ratios, with their range. On a shared machine one round's
//! ratio moves by 10-20% from run to run (mostly the pipeline's phase; the
//! first round also pays the process's warm-up: buffers faulted in, decoders
//! made); `docs/src/performance.md` (round 7) reports medians of 7 rounds.
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
use tributary_common::plan::span::SpanSet;
use tributary_common::sample::Sample;
use tributary_worker::pipeline::decode::fields::Decoder;
use tributary_worker::pipeline::decode::pixels::{DecodeLimits, ImageKind, PixelBudget};
use tributary_worker::pipeline::decode::{image_field, jpeg, render};
use tributary_worker::pipeline::metrics::{Metrics, MetricsSnapshot};
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
    /// Rounds of the two phases, alternated (pipeline, ceiling, pipeline,
    /// ...): on a shared or noisy machine the median of the rounds' ratios
    /// is steadier than one round's. Image datasets only: a token dataset's
    /// bench (`--sequence-length`) has no ceiling to alternate with.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = crate::pipeline_args::u64_in(1, 100),
        conflicts_with = "sequence_length"
    )]
    rounds: u64,
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

    // 1. The pipeline, first round: its figures are printed in full.
    let rss_before = peak_rss_kib();
    let first_pipeline = pipeline_round(&dataset, &config, spans.clone(), &pool).await?;
    let rss_peak = peak_rss_kib();

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
    let ceiling_round = || ceiling_round(&encoded, &fields, &limits, on_error, &pool);
    let first = ceiling_round()?;
    let (decoded, skipped) = (first.decoded, first.skipped);
    // Each round: the pipeline's pass and the ceiling's samples/s.
    let mut rounds = vec![(first_pipeline, first.rate)];
    for _ in 1..args.rounds {
        let pipeline = pipeline_round(&dataset, &config, spans.clone(), &pool).await?;
        rounds.push((pipeline, ceiling_round()?.rate));
    }
    let m = &rounds[0].0.metrics;

    println!("tributary bench {}", args.url);
    println!(
        "  samples              {} ({} shards in the dataset), batch {}",
        m.samples,
        dataset.manifest.shards.len(),
        args.pipeline.batch_size,
    );
    println!("  transform            {}", args.pipeline.describe());
    println!("  decode threads       {threads}");
    let of_rounds = |values: Vec<f64>| Spread::of(values).describe(rounds.len());
    let first_round = if rounds.len() > 1 { ", round 1" } else { "" };
    let (rate, spread) = of_rounds(rounds.iter().map(|(p, _)| p.rate()).collect());
    println!(
        "  pipeline             {rate} ({:.1} MB/s fetched{first_round}{spread})",
        m.bytes_per_sec() / 1e6
    );
    // With one batch a round there is no steady rate (nor its ratio).
    let steady: Option<Vec<f64>> = rounds.iter().map(|(p, _)| p.steady).collect();
    if let Some(steady) = &steady {
        let (rate, spread) = of_rounds(steady.clone());
        println!("  steady rate          {rate} (from the first batch to the last{spread})");
    }
    println!(
        "  time to first batch  {:.1} ms{first_round}",
        m.first_batch.unwrap_or_default().as_secs_f64() * 1e3
    );
    println!(
        "  consumer waited      {:.2} s of {:.2} s ({:.0}%{first_round})",
        m.consumer_wait.as_secs_f64(),
        m.elapsed.as_secs_f64(),
        100.0 * m.consumer_wait.as_secs_f64() / m.elapsed.as_secs_f64().max(1e-9)
    );
    println!(
        "  stage time (summed)  fetch {:.2} s (reads in flight), parse {:.2} s, decode+augment {:.2} s{first_round}",
        m.fetch_time.as_secs_f64(),
        m.parse_time.as_secs_f64(),
        m.decode_time.as_secs_f64()
    );
    match (rss_before, rss_peak) {
        (Some(before), Some(peak)) => println!(
            "  peak RSS             {:.0} MiB (process at start {:.0} MiB{first_round})",
            peak as f64 / 1024.0,
            before as f64 / 1024.0
        ),
        _ => println!("  peak RSS             unavailable (no /proc/self/status)"),
    }
    let (rate, spread) = of_rounds(rounds.iter().map(|(_, ceiling)| *ceiling).collect());
    println!(
        "  decode-only ceiling  {rate} (whole-image decode alone, first {decoded} of the same images, {:.0} MiB, {threads} threads{spread})",
        held as f64 / (1 << 20) as f64
    );
    if skipped > 0 {
        println!("  skipped (ceiling)    {skipped} bad samples");
    }
    if rounds.len() > 1 {
        for (i, (pipeline, ceiling)) in rounds.iter().enumerate() {
            let steady = pipeline
                .steady
                .map_or(String::new(), |s| format!(", steady {s:.1}"));
            println!(
                "  round {:<3}            pipeline {:.1} (first batch {:.0} ms{steady}), ceiling {ceiling:.1}, ratio {:.3}",
                i + 1,
                pipeline.rate(),
                pipeline.metrics.first_batch.unwrap_or_default().as_secs_f64() * 1e3,
                pipeline.rate() / ceiling
            );
        }
    }
    let ratios = |ratios: Vec<f64>| {
        let ratios = Spread::of(ratios);
        let spread = if rounds.len() > 1 {
            format!(
                " (median of the {} rounds' ratios, {:.2}-{:.2})",
                rounds.len(),
                ratios.min,
                ratios.max
            )
        } else {
            String::new()
        };
        format!("{:.2}{spread}", ratios.median)
    };
    println!(
        "  pipeline / ceiling   {}",
        ratios(rounds.iter().map(|(p, c)| p.rate() / c).collect())
    );
    if let Some(steady) = steady {
        println!(
            "  steady / ceiling     {}",
            ratios(
                steady
                    .iter()
                    .zip(&rounds)
                    .map(|(s, (_, c))| s / c)
                    .collect()
            )
        );
    }
    Ok(())
}

/// One pass of the loader over `spans`.
struct PipelineRound {
    metrics: MetricsSnapshot,
    /// Samples per second from the first batch's arrival to the last's:
    /// the rate without the start (the shuffle buffer's first fill, the
    /// first batch decoded alone), which a short run at many threads is
    /// mostly made of. `None` with a single batch.
    steady: Option<f64>,
}

impl PipelineRound {
    fn rate(&self) -> f64 {
        self.metrics.samples_per_sec()
    }
}

/// The steady rate of batches `(arrival, samples)`, in order: the samples
/// after the first batch over the time from its arrival to the last's.
fn steady_rate(arrivals: &[(Instant, usize)]) -> Option<f64> {
    let (&(first, _), rest) = arrivals.split_first()?;
    let &(last, _) = rest.last()?;
    let samples: usize = rest.iter().map(|&(_, n)| n).sum();
    Some(samples as f64 / last.duration_since(first).as_secs_f64().max(1e-9))
}

/// One pass of the loader over `spans`; its metrics and steady rate.
async fn pipeline_round(
    dataset: &Dataset,
    config: &tributary_worker::LoaderConfig,
    spans: SpanSet,
    pool: &Arc<rayon::ThreadPool>,
) -> anyhow::Result<PipelineRound> {
    let mut loader = Loader::builder(dataset.clone())
        .config(config.clone())
        .spans(spans)
        .decode_pool(Arc::clone(pool))
        .build()
        .await?;
    let mut checksum = 0f64;
    let mut arrivals = Vec::new();
    while let Some(batch) = loader.next().await {
        let batch = batch?;
        arrivals.push((Instant::now(), batch.len()));
        // Touch the output so nothing is optimised away.
        checksum += match batch.images().map(|(images, _)| images) {
            Some(tributary_worker::Images::F32(v)) => f64::from(v[v.len() / 2]),
            Some(tributary_worker::Images::U8(v)) => f64::from(v[v.len() / 2]),
            None => 0.0,
        };
    }
    tracing::debug!(checksum, "output checksum");
    Ok(PipelineRound {
        metrics: loader.metrics(),
        steady: steady_rate(&arrivals),
    })
}

/// One decode-only pass over `encoded`.
struct CeilingRound {
    rate: f64,
    decoded: usize,
    skipped: usize,
}

fn ceiling_round(
    encoded: &[Sample],
    fields: &Fields,
    limits: &DecodeLimits,
    on_error: OnError,
    pool: &rayon::ThreadPool,
) -> anyhow::Result<CeilingRound> {
    let budget = PixelBudget::new(limits.max_pixels_in_flight);
    let started = Instant::now();
    let outcomes: Vec<anyhow::Result<u32>> = pool.install(|| {
        encoded
            .par_iter()
            .with_max_len(1)
            .map(|sample| {
                decode_whole(sample, fields, limits, &budget).with_context(|| sample.key.clone())
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
    Ok(CeilingRound {
        rate: decoded as f64 / started.elapsed().as_secs_f64(),
        decoded,
        skipped,
    })
}

/// The median and range of some rounds' figures.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    /// Of one figure per round: never empty (`--rounds` is at least 1).
    fn of(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Spread {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }

    /// `1234.5 samples/s` and, with several rounds, what to add inside
    /// the line's parentheses: `; median of 5 rounds, 1100.0-1300.0`.
    fn describe(&self, rounds: usize) -> (String, String) {
        let rate = format!("{:.1} samples/s", self.median);
        if rounds > 1 {
            let spread = format!(
                "; median of {rounds} rounds, {:.1}-{:.1}",
                self.min, self.max
            );
            (rate, spread)
        } else {
            (rate, String::new())
        }
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_steady_rate_leaves_out_the_first_batch_and_its_wait() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        // A slow start (the first batch at 900 ms), then 96 samples in 2 s.
        let arrivals = [(at(900), 64), (at(1900), 64), (at(2900), 32)];
        let steady = steady_rate(&arrivals).expect("three batches");
        assert!((steady - 48.0).abs() < 1e-9, "{steady}");
        assert_eq!(steady_rate(&arrivals[..1]), None);
        assert_eq!(steady_rate(&[]), None);
    }
}
