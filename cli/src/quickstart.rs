//! `tributary quickstart`: the whole system on one machine in under a
//! minute. Synthesizes a small ImageFolder dataset in a temporary directory,
//! packs it into shards, starts a coordinator in-process (in-memory store,
//! reached over gRPC on loopback), and runs one epoch as torchrun would:
//! the ranks read half their parts and checkpoint, a node is preempted, the
//! group restarts one rank smaller from the checkpoint and finishes. Then it
//! checks that every sample of the epoch was trained exactly once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tributary_common::ids::{Epoch, Generation};
use tributary_common::invariants;
use tributary_common::plan::generation::{generation_cut, CommitPoint, GenerationRecord};
use tributary_common::plan::shuffle::ShuffleSpec;
use tributary_common::plan::{self, epoch_spans, Remainder};
use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_tools::pack::PackOptions;
use tributary_tools::progress::NoProgress;
use tributary_tools::synth;
use tributary_worker::coordinated::{self, Client, Identity};
use tributary_worker::pipeline::limits;
use tributary_worker::rank::{self, Coordinator, JobSpec, Mode, RankConfig};
use tributary_worker::{Dataset, DecodeConfig, Location, StoreOptions};

use crate::pipeline_args::{u32_in, usize_in};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Images to synthesize.
    #[arg(long, default_value_t = 1024, value_parser = usize_in(1, synth::MAX_IMAGES))]
    images: usize,
    #[arg(long, default_value_t = 8, value_parser = usize_in(1, synth::MAX_CLASSES))]
    classes: usize,
    /// Ranks sharing the epoch.
    #[arg(long, default_value_t = 2, value_parser = usize_in(1, 64))]
    ranks: usize,
    #[arg(long, default_value_t = 32, value_parser = usize_in(1, limits::MAX_BATCH_SIZE))]
    batch_size: usize,
    #[arg(long, default_value_t = 224, value_parser = u32_in(1, limits::MAX_IMAGE_SIZE))]
    image_size: u32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Work in this directory (kept) instead of a temporary one.
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.ranks >= 1, "--ranks must be at least 1");
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
        "1/4 synth      {} photo-like images, {} classes, {:.1} MB      {:>6.2} s",
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
        jpeg: Some(tributary_worker::jpeg_with_restart_markers),
        ..PackOptions::default()
    };
    let packed =
        tributary_tools::pack::pack(&images_dir, &dest, &pack_options, Arc::new(NoProgress))
            .await?;
    println!(
        "2/4 pack       {} shards of up to 128 samples, {:.1} MB             {:>6.2} s",
        packed.shards,
        packed.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );

    let dataset = Dataset::from_location(dest).await?;
    let started = Instant::now();
    let coordinator = LocalCoordinator::start(StoreOptions::default()).await?;
    let client = Client::new(&[coordinator.address().to_owned()])?;
    // Every rank of either generation: its identity, and its share of the
    // machine's cores.
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let config = |rank: usize, world: usize, restart: u64| {
        let identity = Identity::Torchrun {
            rank: rank as u32,
            world: world as u32,
            run_id: JOB.to_owned(),
            restart,
            dp: None,
        };
        let coordinator = Coordinator::Shared(vec![coordinator.address().to_owned()]);
        let spec = JobSpec {
            seed: args.seed,
            batch_size: args.batch_size as u32,
            epochs: Some(1),
            mode: Mode::Sync,
            shuffle_buffer: SHUFFLE_BUFFER as u32,
            ..JobSpec::new(shards_dir.display().to_string())
        };
        RankConfig {
            decode: DecodeConfig {
                decode_threads: (threads / world).max(1),
                transform: tributary_worker::Transform {
                    size: tributary_worker::Size::square(args.image_size),
                    ..Default::default()
                },
                ..DecodeConfig::default()
            },
            ..RankConfig::new(spec, coordinator, JOB, identity)
        }
    };
    let created = coordinated::create_job(&client, JOB, (&config(0, 1, 0).spec).into()).await?;
    println!(
        "3/4 coordinator in-process at {}, in-memory store; sync job of {} samples  {:>6.2} s",
        coordinator.address(),
        created.samples,
        started.elapsed().as_secs_f64()
    );

    // Generation 0: the whole group reads half its part, checkpoints
    // (commits), and reads a little further before a node is preempted.
    let started = Instant::now();
    let group = |world: usize, restart: u64| {
        (0..world)
            .map(|rank| tokio::spawn(train(config(rank, world, restart), restart == 0)))
            .collect::<Vec<_>>()
    };
    let mut first = Vec::new();
    for rank in group(args.ranks, 0) {
        first.push(rank.await??);
    }
    // Generation 1: torchrun restarts the group one node smaller; it
    // resumes from the commit and finishes the epoch.
    let survivors = (args.ranks - 1).max(1);
    let mut second = Vec::new();
    for rank in group(survivors, 1) {
        second.push(rank.await??);
    }
    let elapsed = started.elapsed();
    let checkpoint = first[0].committed.len();
    let after = first[0].after.len();
    println!(
        "4/4 load       generation 0: {} ranks x {} samples; checkpoint at {checkpoint}, {after} more each, then a node is preempted",
        args.ranks, first[0].part
    );
    println!(
        "               generation 1: torchrun restarts {survivors} rank(s), resuming from the checkpoint: {} x {} samples {:>6.2} s",
        survivors,
        second[0].part,
        elapsed.as_secs_f64()
    );
    println!();
    let ranks: Vec<&Rank> = first.iter().chain(&second).collect();
    let delivered: usize = ranks
        .iter()
        .map(|r| r.committed.len() + r.after.len())
        .sum();
    println!(
        "throughput     {:.0} samples/s over {threads} decode threads",
        delivered as f64 / elapsed.as_secs_f64(),
    );
    let first_batch = ranks
        .iter()
        .map(|r| r.first_batch)
        .min()
        .unwrap_or_default();
    println!(
        "first batch    {:.0} ms after a rank called the coordinator",
        first_batch.as_secs_f64() * 1e3
    );

    // Expected: the epoch's samples minus what the last generation's
    // drop-last left out, replayed by the planner from the job's history.
    let status = client
        .send(&v1::JobRequest { job: JOB.into() }, |mut c, r| async move {
            c.get_status(r).await
        })
        .await?;
    let counts: Vec<u32> = dataset.manifest.shards.iter().map(|s| s.samples).collect();
    let history: Vec<GenerationRecord> = status.generations.iter().map(record).collect();
    let last = history.last().context("the job has no generation")?;
    let cut = generation_cut(
        &counts,
        args.seed,
        Remainder::Drop,
        ShuffleSpec::new(SHUFFLE_BUFFER),
        &history,
        last.generation,
    )?;
    let tail = plan::dropped(&cut, last.world as usize, Remainder::Drop);
    let expected = epoch_spans(&counts, args.seed, 0).subtract(&tail);
    let expected: Vec<u64> = expected
        .samples()
        .map(|(shard, i)| dataset.manifest.sample_id(shard as usize, i))
        .collect();
    let committed = ranks.iter().flat_map(|r| r.committed.iter().copied());
    invariants::check_exactly_once(expected.iter().copied(), committed)
        .context("exactly-once check failed")?;
    let parts: Vec<u64> = ranks.iter().map(|r| r.part).collect();
    anyhow::ensure!(
        parts[..args.ranks].iter().all(|&p| p == parts[0])
            && parts[args.ranks..].iter().all(|&p| p == parts[args.ranks]),
        "ranks of one generation received unequal parts: {parts:?}"
    );
    println!(
        "exactly once   ok: {} of {} samples trained once across 2 generations; {} read after the checkpoint were discarded with the preempted group, {} dropped by drop-last",
        expected.len(),
        dataset.manifest.samples,
        after * args.ranks,
        tail.len()
    );
    coordinator.stop().await?;
    if let Some(dir) = &args.dir {
        println!("kept           {}", dir.display());
    }
    Ok(())
}

const JOB: &str = "quickstart";
const SHUFFLE_BUFFER: usize = 1024;

/// What one rank did: its part's size, the samples up to its commit (or
/// all of them when it finished), those after, and its time to first batch.
struct Rank {
    part: u64,
    committed: Vec<u64>,
    after: Vec<u64>,
    first_batch: Duration,
}

/// One torchrun rank: joins, reads its part and, when `preempted`, commits
/// half-way and stops two batches later.
async fn train(config: RankConfig, preempted: bool) -> anyhow::Result<Rank> {
    let started = Instant::now();
    let mut loader = rank::Rank::start(config).await?;
    let batch = loader
        .session()
        .context("a coordinated rank has a membership")?
        .spec()?
        .batch_size as u64;
    let part = loader.samples().context("a sync rank reads a part")?;
    let checkpoint = preempted.then_some(part / 2 / batch * batch);
    let mut rank = Rank {
        part,
        committed: Vec::new(),
        after: Vec::new(),
        first_batch: Duration::ZERO,
    };
    while let Some(batch) = loader.next().await {
        let batch = batch?;
        if rank.first_batch.is_zero() {
            rank.first_batch = started.elapsed();
        }
        let state = loader.state_dict()?;
        match checkpoint {
            Some(at) if state.samples > at => {
                rank.after.extend(&batch.ids);
                if rank.after.len() as u64 >= 2 * batch.len() as u64 {
                    break;
                }
            }
            _ => rank.committed.extend(&batch.ids),
        }
        if checkpoint == Some(state.samples) || state.samples == part {
            loader.commit(&state).await?;
        }
    }
    Ok(rank)
}

fn record(info: &v1::GenerationInfo) -> GenerationRecord {
    GenerationRecord {
        generation: Generation(info.generation),
        epoch: Epoch(info.epoch),
        world: info.world,
        from: info.from_generation.map(|g| CommitPoint {
            generation: Generation(g),
            samples: info.from_samples,
        }),
    }
}
