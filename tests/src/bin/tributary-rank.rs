//! A trainer rank for the end-to-end tests: joins a coordinator job through
//! `tributary_worker::rank` (torchrun identity from the environment, or `--name`),
//! reads its assignment from the object store, and prints what it does, one
//! line per event, flushed, so a test that kills it knows how far it got.
//! The coordinator credentials come from the environment, as the Python
//! `Loader`'s do (`TRIBUTARY_AUTH_TOKEN_FILE` or `TRIBUTARY_AUTH_TOKEN`,
//! `TRIBUTARY_TLS_CA`, `TRIBUTARY_TLS_DOMAIN`, `TRIBUTARY_TLS_CLIENT_CERT`
//! and `TRIBUTARY_TLS_CLIENT_KEY`).
//!
//! ```text
//! gen GENERATION EPOCH RANK WORLD SAMPLES     sync: an assignment
//! batch GENERATION EMITTED ID...              sync: a batch delivered
//! commit GENERATION SAMPLES                   sync: a commit the coordinator accepted
//! resumed GENERATION EPOCH                    sync: load_state_dict(--resume) took
//! rows CRC...                                 token jobs: after each batch/got, each row's CRC-32C of input_ids
//! error MESSAGE                               the rank failed (then it exits non-zero)
//! lease EPOCH UNIT UNIX_MS                    dynamic: a unit leased
//! ack EPOCH UNIT...                           dynamic: acks the coordinator confirmed
//! rejoin MEMBER                               dynamic: joined again after losing its lease
//! done
//! ```

#![allow(clippy::print_stdout, reason = "the test reads stdout")]

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use tributary_common::proto::v1;
use tributary_common::tokens::{Packing, SequenceSpec};
use tributary_io::S3Settings;
use tributary_worker::coordinated::{self, DynamicOptions, Identity, LoaderState, OnLeaseLost};
use tributary_worker::pipeline::decode::fields::Arrays;
use tributary_worker::rank::{
    Coordinator, Credentials, InProcess, JobSpec, Mode, Rank, RankConfig, Source,
};
use tributary_worker::{Batch, Column, DecodeConfig, StoreOptions, WorkerError};
use tributary_worker::{Size, Transform};

#[derive(Debug, Parser)]
struct Args {
    /// Coordinator addresses, comma-separated; `in-process`: one started
    /// in this process on the in-memory store (Python's `coordinator=None`).
    #[arg(long)]
    coordinator: String,
    /// Sync: after each accepted commit, save the state committed (the
    /// loader's checkpoint) as JSON to DIR/rank-RANK-GENERATION-SAMPLES.json.
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Sync: before reading, resume from the loader state saved in FILE
    /// (`load_state_dict`).
    #[arg(long)]
    resume: Option<PathBuf>,
    #[arg(long)]
    job: String,
    /// The dataset (empty with --mix).
    #[arg(long, default_value = "")]
    dataset: String,
    /// A dataset to mix, `URL=weight:W|samples:N|repeat:R` (repeatable);
    /// batches then print `src SOURCE...` after `got`/`batch` lines.
    #[arg(long)]
    mix: Vec<Source>,
    /// Weighted --mix: samples per epoch (0: all).
    #[arg(long, default_value_t = 0)]
    epoch_samples: u64,
    /// S3 endpoint of the dataset.
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// Join by name (dynamic jobs) instead of the torchrun environment.
    #[arg(long)]
    name: Option<String>,
    #[arg(long, default_value = "sync")]
    mode: String,
    /// Epochs of the job (sync and dynamic alike).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    epochs: u64,
    /// Dynamic: samples leased ahead of the trainer (default: the pipeline's depth).
    #[arg(long)]
    lookahead: Option<u64>,
    /// Dynamic: what a member whose lease expired does: rejoin or raise.
    #[arg(long, default_value = "rejoin")]
    on_lease_lost: OnLeaseLost,
    #[arg(long, default_value_t = 16)]
    batch_size: u32,
    #[arg(long, default_value_t = 64)]
    shuffle_buffer: u32,
    #[arg(long, default_value_t = 32)]
    unit_samples: u32,
    #[arg(long, default_value_t = 3)]
    member_ttl_s: u32,
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Sync: commit every this many samples (0: never).
    #[arg(long, default_value_t = 64)]
    commit_every: u64,
    /// Simulated training time per batch.
    #[arg(long, default_value_t = 0)]
    step_ms: u64,
    /// Sync: `SAMPLES:FILE`: once the first generation has consumed (and
    /// committed, when due) SAMPLES, print `holding SAMPLES` and wait until
    /// FILE exists. Lets a test act at a known point of every rank.
    #[arg(long, value_parser = parse_hold)]
    hold: Vec<(u64, PathBuf)>,
    /// A token job: rows of this many tokens (`--packing` says how).
    #[arg(long)]
    sequence_length: Option<u32>,
    #[arg(long, default_value = "concat")]
    packing: Packing,
    /// Serve the rank's metrics at /metrics here (host:port); prints
    /// `metrics ADDRESS` once bound.
    #[arg(long)]
    metrics_listen: Option<String>,
}

fn parse_hold(text: &str) -> Result<(u64, PathBuf), String> {
    let (samples, file) = text
        .split_once(':')
        .ok_or_else(|| format!("--hold {text:?} is not SAMPLES:FILE"))?;
    let samples = samples
        .parse()
        .map_err(|e| format!("--hold {text:?}: {e}"))?;
    Ok((samples, PathBuf::from(file)))
}

/// Waits at each hold point reached, until its file exists.
async fn hold(holds: &mut Vec<(u64, PathBuf)>, samples: u64) {
    while let Some(i) = holds.iter().position(|(at, _)| samples >= *at) {
        let (at, file) = holds.remove(i);
        emit(&format!("holding {at}"));
        while !file.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn emit(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let env: HashMap<String, String> = std::env::vars().collect();
    let identity = match &args.name {
        Some(name) => Identity::Name(name.clone()),
        None => Identity::from_torchrun_env(&env)?
            .context("set RANK/WORLD_SIZE (torchrun) or pass --name")?,
    };
    let s3 = S3Settings {
        endpoint: args.s3_endpoint.clone(),
        ..S3Settings::default()
    };
    let url = args
        .mix
        .first()
        .map_or(args.dataset.as_str(), |m| m.manifest_url.as_str());
    let store = StoreOptions::from_vars(std::env::vars()).with_s3(url, &s3);
    let mode = match args.mode.as_str() {
        "dynamic" => Mode::Dynamic,
        _ => Mode::Sync,
    };
    let step = Duration::from_millis(args.step_ms);
    let coordinator = match args.coordinator.as_str() {
        "in-process" => in_process(),
        addresses => Coordinator::Shared(addresses.split(',').map(str::to_owned).collect()),
    };
    let spec = JobSpec {
        seed: args.seed,
        batch_size: args.batch_size,
        epochs: Some(args.epochs),
        mode,
        shuffle_buffer: args.shuffle_buffer,
        unit_samples: args.unit_samples,
        member_ttl_s: args.member_ttl_s,
        sources: args.mix.clone(),
        epoch_samples: args.epoch_samples,
        sequence: args.sequence_length.map(|length| SequenceSpec {
            length,
            packing: args.packing,
        }),
        ..JobSpec::new(args.dataset.clone())
    };
    let config = RankConfig {
        store,
        credentials: Credentials::Env {
            env,
            auth_token: None,
        },
        decode: DecodeConfig {
            decode_threads: 1,
            transform: Transform {
                size: Size::square(16),
                ..Transform::default()
            },
            ..DecodeConfig::default()
        },
        dynamic: dynamic_options(args.lookahead, args.on_lease_lost),
        metrics_listen: args.metrics_listen.clone(),
        ..RankConfig::new(spec, coordinator, &args.job, identity)
    };
    let result = run(config, &args, mode, step).await;
    match &result {
        Ok(()) => emit("done"),
        Err(error) => emit(&format!("error {error:#}")),
    }
    result
}

async fn run(config: RankConfig, args: &Args, mode: Mode, step: Duration) -> anyhow::Result<()> {
    let mixed = !args.mix.is_empty();
    let mut rank = Rank::start(config).await?;
    if let Some(address) = rank.metrics_address() {
        emit(&format!("metrics {address}"));
    }
    if let Some(file) = &args.resume {
        let text = std::fs::read(file).with_context(|| format!("read {}", file.display()))?;
        let state: LoaderState = serde_json::from_slice(&text)
            .with_context(|| format!("the loader state in {}", file.display()))?;
        rank.load_state_dict(&state).await?;
        let place = rank.describe();
        emit(&format!("resumed {} {}", place.generation, place.epoch));
    }
    match mode {
        Mode::Dynamic => run_dynamic(rank, step, mixed).await,
        Mode::Sync => {
            let checkpoints = Checkpoints {
                every: args.commit_every,
                dir: args.state_dir.clone(),
            };
            run_sync(rank, step, checkpoints, args.hold.clone(), mixed).await
        }
    }
}

/// A coordinator in this process, on the in-memory store.
fn in_process() -> Coordinator {
    Coordinator::InProcess(Arc::new(|store: StoreOptions| {
        Box::pin(async move {
            let local = tributary_coordinator::LocalCoordinator::start(store)
                .await
                .map_err(|e| WorkerError::Stopped(format!("cannot start a coordinator: {e}")))?;
            Ok(InProcess {
                address: local.address().to_owned(),
                guard: Box::new(local),
            })
        })
    }))
}

/// When a sync rank commits, and where it saves what it committed.
struct Checkpoints {
    /// Every this many samples (0: never).
    every: u64,
    dir: Option<PathBuf>,
}

impl Checkpoints {
    /// Saves `state` (the checkpoint) before it is committed.
    fn save(&self, rank: u32, state: &LoaderState) -> anyhow::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let name = format!("rank-{rank}-{}-{}.json", state.generation, state.samples);
        let (tmp, file) = (dir.join(format!(".{name}")), dir.join(name));
        std::fs::write(&tmp, serde_json::to_vec(state)?)?;
        std::fs::rename(&tmp, &file)?;
        Ok(())
    }
}

async fn run_sync(
    mut rank: Rank,
    step: Duration,
    checkpoints: Checkpoints,
    mut holds: Vec<(u64, PathBuf)>,
    mixed: bool,
) -> anyhow::Result<()> {
    let commit_every = checkpoints.every;
    while !rank.finished() {
        let place = rank.describe();
        emit(&format!(
            "gen {} {} {} {} {}",
            place.generation,
            place.epoch,
            place.rank,
            place.world,
            rank.samples().unwrap_or_default()
        ));
        let mut next_commit = commit_every;
        while let Some(batch) = rank.next().await {
            let batch = batch?;
            tokio::time::sleep(step).await;
            let state = rank.state_dict()?;
            let ids: Vec<String> = batch.ids.iter().map(u64::to_string).collect();
            emit(&format!(
                "batch {} {} {}",
                state.generation,
                state.samples,
                ids.join(" ")
            ));
            if mixed {
                emit_sources(&batch.sources);
            }
            emit_rows(&batch);
            if commit_every > 0 && state.samples >= next_commit {
                next_commit += commit_every;
                checkpoints.save(place.rank, &state)?;
                rank.commit(&state).await?;
                emit(&format!("commit {} {}", state.generation, state.samples));
            }
            if state.generation == 0 {
                hold(&mut holds, state.samples).await;
            }
        }
        // The part is read to its end (and reported): the next epoch opens
        // once every rank of the generation says so.
        emit(&format!("end {} {}", place.generation, place.epoch));
        if !rank.next_epoch().await? {
            break;
        }
    }
    Ok(())
}

/// The dynamic options asked for, with hooks that print each lease,
/// confirmed ack and rejoin.
fn dynamic_options(lookahead: Option<u64>, on_lease_lost: OnLeaseLost) -> DynamicOptions {
    let on_lease: coordinated::dynamic::OnLease =
        Arc::new(|unit: &v1::Unit| emit(&format!("lease {} {} {}", unit.epoch, unit.id, now_ms())));
    let on_ack: coordinated::dynamic::OnAck = Arc::new(|units: &[v1::UnitRef]| {
        for unit in units {
            emit(&format!("ack {} {}", unit.epoch, unit.id));
        }
    });
    let on_rejoin: coordinated::dynamic::OnRejoin =
        Arc::new(|member: &str| emit(&format!("rejoin {member}")));
    DynamicOptions {
        on_lease: Some(on_lease),
        on_ack: Some(on_ack),
        on_rejoin: Some(on_rejoin),
        lookahead,
        on_lease_lost,
    }
}

/// A token batch's rows, `rows CRC...`: each row's CRC-32C of its
/// `input_ids` as delivered (nothing for a batch of samples).
fn emit_rows(batch: &Batch) {
    if let Some(Column::Arrays(Arrays::Stacked { data, count, .. })) = batch.columns.first() {
        if batch.keys.first().is_some_and(|k| k.contains('#')) {
            let per = data.len() / (*count).max(1);
            let crcs: Vec<String> = data
                .chunks(per.max(1))
                .map(|row| format!("{:08x}", crc32c::crc32c(row)))
                .collect();
            emit(&format!("rows {}", crcs.join(" ")));
        }
    }
}

fn emit_sources(sources: &[u32]) {
    let sources: Vec<String> = sources.iter().map(u32::to_string).collect();
    emit(&format!("src {}", sources.join(" ")));
}

async fn run_dynamic(mut rank: Rank, step: Duration, mixed: bool) -> anyhow::Result<()> {
    loop {
        while let Some(batch) = rank.next().await {
            let batch = batch?;
            let ids: Vec<String> = batch.ids.iter().map(u64::to_string).collect();
            emit(&format!("got {}", ids.join(" ")));
            if mixed {
                emit_sources(&batch.sources);
            }
            emit_rows(&batch);
            tokio::time::sleep(step).await;
        }
        if !rank.next_epoch().await? {
            break;
        }
    }
    rank.leave().await?;
    Ok(())
}
