//! `tributary bench URL --sequence-length L`: a token dataset's rows
//! through the whole token path (document index, ranged reads, rows
//! assembled, shuffled, built into `input_ids`, `labels`, `position_ids`,
//! `document_ids`), as tokens/s and CPU seconds per million tokens, with
//! the time to the first batch.

use std::time::Instant;

use tributary_common::plan::epoch_spans;
use tributary_common::tokens::rows::IdType;
use tributary_common::tokens::SequenceSpec;
use tributary_worker::{Datasets, DecodeConfig, Loader, LoaderConfig};

use crate::pipeline_args::PipelineArgs;
use crate::process_stats::{cpu_seconds, peak_rss_kib};
use crate::storage::StoreArgs;

pub async fn run(
    url: &str,
    rows: Option<u64>,
    pipeline: &PipelineArgs,
    store: &StoreArgs,
    sequence: SequenceSpec,
    token_ids: IdType,
) -> anyhow::Result<()> {
    let cpu_start = cpu_seconds();
    let opened_at = Instant::now();
    let opened = tributary_io::open_any(url, &store.options(url)).await?;
    let datasets = Datasets::open(vec![opened], &[], 0, Some(sequence), None).await?;
    let open_time = opened_at.elapsed();
    let config = pipeline.config();
    let config = LoaderConfig {
        decode: DecodeConfig {
            token_ids,
            ..config.decode
        },
        ..config
    };
    let threads = config.decode.decode_threads;
    let layout = datasets.layout();
    let counts: Vec<u32> = (0..layout.concatenated_shards())
        .map(|s| layout.shard_samples(s).unwrap_or(0))
        .collect();
    let all = epoch_spans(&counts, config.plan.seed, 0);
    let wanted = rows.unwrap_or(all.len()).min(all.len());
    let spans = all.split_at(wanted).0;
    let shards = counts.len();
    let rss_before = peak_rss_kib();
    let mut loader = Loader::builder(datasets)
        .config(config)
        .spans(spans)
        .build()
        .await?;
    let mut checksum = 0u64;
    while let Some(batch) = loader.next().await {
        let batch = batch?;
        checksum = checksum.wrapping_add(batch.ids.iter().sum::<u64>());
    }
    let m = loader.metrics();
    let cpu = cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);
    let tokens = m.samples as f64 * f64::from(sequence.length);
    let seconds = m.elapsed.as_secs_f64().max(1e-9);
    println!("tributary bench {url} (tokens)");
    println!(
        "  rows                 {} of {} tokens ({}, {shards} shards), batch {}",
        m.samples, sequence.length, sequence.packing, pipeline.batch_size
    );
    println!("  threads              {threads}");
    println!(
        "  pipeline             {:.2} M tokens/s ({:.0} rows/s, {:.1} MB/s fetched)",
        tokens / seconds / 1e6,
        m.samples as f64 / seconds,
        m.bytes_per_sec() / 1e6
    );
    if let Some(cpu) = cpu {
        println!(
            "  CPU                  {:.3} s per million tokens ({cpu:.2} s in all, opening included)",
            cpu / (tokens / 1e6).max(1e-9)
        );
    }
    println!(
        "  open + first batch   {:.1} ms (manifest and indexes {:.1} ms, first batch {:.1} ms)",
        (open_time + m.first_batch.unwrap_or_default()).as_secs_f64() * 1e3,
        open_time.as_secs_f64() * 1e3,
        m.first_batch.unwrap_or_default().as_secs_f64() * 1e3
    );
    println!(
        "  consumer waited      {:.2} s of {:.2} s",
        m.consumer_wait.as_secs_f64(),
        m.elapsed.as_secs_f64()
    );
    println!(
        "  stage time (summed)  fetch {:.2} s (reads in flight), rows {:.2} s, build {:.2} s",
        m.fetch_time.as_secs_f64(),
        m.parse_time.as_secs_f64(),
        m.decode_time.as_secs_f64()
    );
    if let (Some(before), Some(peak)) = (rss_before, peak_rss_kib()) {
        println!(
            "  peak RSS             {:.0} MiB (at start {:.0} MiB)",
            peak as f64 / 1024.0,
            before as f64 / 1024.0
        );
    }
    tracing::debug!(checksum, "output checksum");
    Ok(())
}
