//! `tributary quickstart`: the whole data path on one machine in under a
//! minute. Synthesizes a small ImageFolder dataset in a temporary directory,
//! packs it into shards, runs one epoch for two ranks in-process (sharing one
//! decode pool), and checks that every sample of the epoch was delivered
//! exactly once across the ranks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tributary_common::invariants;
use tributary_common::plan::epoch_spans;
use tributary_worker::pack::PackOptions;
use tributary_worker::progress::NoProgress;
use tributary_worker::{synth, Dataset, Loader, LoaderConfig, Location, StoreOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Images to synthesize.
    #[arg(long, default_value_t = 1024)]
    images: usize,
    #[arg(long, default_value_t = 8)]
    classes: usize,
    /// Ranks sharing the epoch.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    #[arg(long, default_value_t = 224)]
    image_size: u32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Work in this directory (kept) instead of a temporary one.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let temp = tempfile::tempdir().context("creating a temporary directory")?;
    let root = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    let images_dir = root.join("images");
    let shards_dir = root.join("shards");

    let started = Instant::now();
    let options = synth::SynthOptions {
        images: args.images,
        classes: args.classes,
        seed: args.seed,
    };
    let dir = images_dir.clone();
    let summary =
        tokio::task::spawn_blocking(move || synth::write_image_folder(&dir, &options, &|_| {}))
            .await??;
    println!(
        "1/3 synth      {} photo-like images, {} classes, {:.1} MB      {:>6.2} s",
        summary.images,
        args.classes,
        summary.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let dest = Location::open(
        &shards_dir.display().to_string(),
        &StoreOptions::default(),
        true,
    )?;
    let pack_options = PackOptions {
        max_samples: 128,
        ..PackOptions::default()
    };
    let packed =
        tributary_worker::pack::pack(&images_dir, &dest, &pack_options, Arc::new(NoProgress))
            .await?;
    println!(
        "2/3 pack       {} shards of up to 128 samples, {:.1} MB             {:>6.2} s",
        packed.shards,
        packed.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    let dataset = Dataset::from_location(dest).await?;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?,
    );
    let started = Instant::now();
    let mut ranks = Vec::new();
    for rank in 0..args.ranks {
        let config = LoaderConfig {
            seed: args.seed,
            rank,
            world: args.ranks,
            batch_size: args.batch_size,
            augment: tributary_worker::augment::AugmentConfig {
                size: args.image_size,
                ..Default::default()
            },
            ..LoaderConfig::default()
        };
        let loader = Loader::builder(dataset.clone())
            .config(config)
            .decode_pool(Arc::clone(&pool))
            .build()
            .await?;
        ranks.push(tokio::spawn(consume(loader)));
    }
    let mut delivered = Vec::new();
    let mut per_rank = Vec::new();
    let mut first_batch = Duration::MAX;
    for rank in ranks {
        let (ids, first) = rank.await??;
        per_rank.push(ids.len());
        first_batch = first_batch.min(first);
        delivered.extend(ids);
    }
    let elapsed = started.elapsed();
    println!(
        "3/3 load       1 epoch, {} ranks x {} samples, batch {}, {}x{} f32   {:>6.2} s",
        args.ranks,
        per_rank.first().copied().unwrap_or(0),
        args.batch_size,
        args.image_size,
        args.image_size,
        elapsed.as_secs_f64()
    );
    println!();
    println!(
        "throughput     {:.0} samples/s over {} decode threads",
        delivered.len() as f64 / elapsed.as_secs_f64(),
        threads
    );
    println!(
        "first batch    {:.0} ms after the loaders started",
        first_batch.as_secs_f64() * 1e3
    );

    // Expected: the epoch's samples in plan order, minus the drop-last tail.
    let counts: Vec<u32> = dataset.manifest.shards.iter().map(|s| s.samples).collect();
    let cut = epoch_spans(&counts, args.seed, 0);
    let per = cut.len() / args.ranks as u64;
    let (kept, dropped) = cut.split_at(per * args.ranks as u64);
    let expected: Vec<u64> = kept
        .samples()
        .map(|(shard, i)| dataset.manifest.sample_id(shard as usize, i))
        .collect();
    let equal = per_rank.iter().all(|&n| n as u64 == per);
    invariants::check_exactly_once(expected.iter().copied(), delivered.iter().copied())
        .context("exactly-once check failed")?;
    anyhow::ensure!(equal, "ranks received unequal sample counts: {per_rank:?}");
    println!(
        "exactly once   ok: {} of {} samples delivered once across {} ranks ({} each), {} dropped by drop-last",
        delivered.len(),
        dataset.manifest.samples,
        args.ranks,
        per,
        dropped.len()
    );
    if let Some(dir) = &args.dir {
        println!("kept           {}", dir.display());
    }
    Ok(())
}

async fn consume(mut loader: Loader) -> anyhow::Result<(Vec<u64>, Duration)> {
    let mut ids = Vec::new();
    while let Some(batch) = loader.next().await {
        ids.extend(batch?.ids);
    }
    let first = loader.metrics().first_batch.unwrap_or_default();
    Ok((ids, first))
}
