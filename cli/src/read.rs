//! `tributary read`: the samples one rank reads in one epoch, in delivery
//! order, as `id<TAB>key<TAB>label` lines (`<TAB>pad` after a padding
//! sample of `--no-shuffle --tail pad`; label -1 without a `cls` field;
//! `<TAB>src=S` after the label when reading a mix: the sample's dataset,
//! its position among the `--mix` flags). A token dataset read with
//! `--sequence-length` prints `id<TAB>key<TAB>crc` per row instead (`crc`:
//! the CRC-32C of the row's `input_ids`). Keys come from the dataset: their
//! backslashes and control characters are escaped (`\\`, `\n`, `\t`,
//! `\u{1b}`), so one sample is one line. A debugging aid, and the way
//! end-to-end tests see what the loader delivered.

use std::io::Write;

use tributary_common::text::printable;
use tributary_worker::pipeline::decode::fields::Arrays;
use tributary_worker::pipeline::limits;
use tributary_worker::rank::Source;
use tributary_worker::{Batch, Column, Datasets, DecodeConfig, Loader, LoaderConfig, PlanConfig};

use crate::pipeline_args::{usize_in, PipelineArgs, SequenceArgs};
use crate::storage::{CacheArgs, StoreArgs};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The dataset's manifest URL (or --mix).
    #[arg(required_unless_present = "mix", conflicts_with = "mix")]
    url: Option<String>,
    /// Read a mix instead: a dataset and what an epoch takes from it,
    /// `URL=weight:W`, `URL=samples:N` or `URL=repeat:R` (repeat the flag
    /// for each dataset).
    #[arg(long)]
    mix: Vec<Source>,
    /// A weighted mix's samples per epoch (0: every dataset's samples).
    #[arg(long, default_value_t = 0, requires = "mix")]
    epoch_samples: u64,
    #[arg(long, default_value_t = 0, value_parser = usize_in(0, limits::MAX_WORLD - 1))]
    rank: usize,
    #[arg(long, default_value_t = 1, value_parser = usize_in(1, limits::MAX_WORLD))]
    world: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, default_value_t = 0)]
    epoch: u64,
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
    let cache = args.cache.open()?;
    let mixed = !args.mix.is_empty();
    let urls: Vec<String> = match &args.url {
        Some(url) => vec![url.clone()],
        None => args.mix.iter().map(|s| s.manifest_url.clone()).collect(),
    };
    let opened = futures::future::try_join_all(urls.iter().map(|url| {
        let options = args.store.options(url);
        async move { anyhow::Ok(tributary_io::open_any(url, &options).await?) }
    }))
    .await?;
    let takes: Vec<_> = args.mix.iter().map(|source| source.take).collect();
    let sequence = args.sequence.sequence();
    let datasets =
        Datasets::open(opened, &takes, args.epoch_samples, sequence, cache.clone()).await?;
    let config = LoaderConfig {
        plan: PlanConfig {
            seed: args.seed,
            epoch: args.epoch,
            rank: args.rank,
            world: args.world,
            ..args.pipeline.config().plan
        },
        decode: DecodeConfig {
            token_ids: args.sequence.token_dtype,
            ..args.pipeline.config().decode
        },
    };
    let mut loader = Loader::builder(datasets).config(config).build().await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    while let Some(batch) = loader.next().await {
        let batch = batch?;
        if sequence.is_some() {
            write_rows(&mut out, &batch, mixed)?;
            continue;
        }
        write_samples(&mut out, &batch, mixed)?;
    }
    out.flush()?;
    let m = loader.metrics();
    eprintln!(
        "read {} samples in {} batches, {} range requests, {:.1} MB, in {:.3} s",
        m.samples,
        m.batches,
        m.fetch_requests,
        m.fetched_bytes as f64 / 1e6,
        m.elapsed.as_secs_f64()
    );
    if let Some(cache) = cache {
        // Background fills finish before the process ends, or are lost.
        let started = std::time::Instant::now();
        cache.idle().await;
        let s = cache.stats();
        eprintln!(
            "cache: {} hits ({:.1} MB), {} misses ({:.1} MB), {} files cached (shards and their indexes, {:.1} MB), {} evicted, {} corrupt, {} errors; waited {:.3} s for fills",
            s.hits,
            s.hit_bytes as f64 / 1e6,
            s.misses,
            s.miss_bytes as f64 / 1e6,
            s.fills,
            s.fill_bytes as f64 / 1e6,
            s.evictions,
            s.corrupt,
            s.errors,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// A batch's samples as `id<TAB>key<TAB>label[<TAB>src=S][<TAB>pad]` lines.
fn write_samples(out: &mut impl Write, batch: &Batch, mixed: bool) -> anyhow::Result<()> {
    let labels = batch
        .labels()
        .map(<[i64]>::to_vec)
        .unwrap_or_else(|| vec![-1; batch.len()]);
    let valid = batch.valid();
    for (i, (id, key)) in batch.ids.iter().zip(&batch.keys).enumerate() {
        let label = labels[i];
        let source = if mixed {
            format!("\tsrc={}", batch.sources[i])
        } else {
            String::new()
        };
        // Padding (`--tail pad`) is marked, never counted as a sample.
        let pad = if valid[i] { "" } else { "\tpad" };
        let key = printable(key);
        writeln!(out, "{id}\t{key}\t{label}{source}{pad}")?;
    }
    Ok(())
}

/// A token batch's rows as `id<TAB>key<TAB>crc` lines: `crc` the CRC-32C
/// of the row's first column (`input_ids` by default) as stored, so two
/// reads that deliver the same rows print the same lines.
fn write_rows(out: &mut impl Write, batch: &Batch, mixed: bool) -> anyhow::Result<()> {
    let Some(Column::Arrays(Arrays::Stacked { data, count, .. })) = batch.columns.first() else {
        anyhow::bail!("a token batch without a stacked first column");
    };
    let per = data.len() / (*count).max(1);
    for (i, (id, key)) in batch.ids.iter().zip(&batch.keys).enumerate() {
        let crc = crc32c::crc32c(&data[i * per..(i + 1) * per]);
        let source = if mixed {
            format!("\tsrc={}", batch.sources[i])
        } else {
            String::new()
        };
        let key = printable(key);
        writeln!(out, "{id}\t{key}\t{crc:08x}{source}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tributary_worker::Column;

    use super::*;

    fn batch(keys: &[&str]) -> Batch {
        Batch {
            index: 0,
            columns: vec![Column::Labels(vec![0; keys.len()])],
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            ids: (0..keys.len() as u64).collect(),
            sources: vec![0; keys.len()],
            skipped_ids: Vec::new(),
            padded: 0,
        }
    }

    #[test]
    fn a_key_with_a_newline_prints_on_one_line() {
        // A key made to forge a second sample line, then to recolour the
        // terminal.
        let forged = "cat/1\t0\n999\tcat/999\t3\u{1b}[2J\\";
        let mut out = Vec::new();
        write_samples(&mut out, &batch(&[forged, "cat/2"]), false).expect("write");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "0\tcat/1\\t0\\n999\\tcat/999\\t3\\u{1b}[2J\\\\\t0",
                "1\tcat/2\t0"
            ],
            "{text}"
        );
        assert!(!text.contains('\u{1b}'));
    }
}
