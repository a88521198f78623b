//! # tributary
//!
//! The command line of Tributary: make sample data, pack it into shards,
//! index foreign WebDataset shards, verify datasets, and run the loader
//! (`quickstart`, `bench`, `read`).
//!
//! ## Layout
//!
//! - `main.rs`: argument parsing and dispatch (this file).
//! - `storage.rs`: object-store flags and environment, read once at the edge.
//! - `tokens.rs`: `pack --tokenizer`, `index --tokens` and `inspect` of
//!   token datasets.
//! - `upload_args.rs`: `pack`'s upload flags (single-PUT limit, parts).
//! - `bar.rs`: progress bars with samples/s and MB/s.
//! - `quickstart.rs`: the README's first command, end to end.
//! - `bench.rs`: loader throughput against the decode-only ceiling.
//! - `read.rs`: one rank's view of an epoch, as keys.
//! - `serve.rs`: `tributary coordinator`, one coordinator replica.
//! - `pipeline_args.rs`: loader flags shared by `bench` and `read`.
//! - `status.rs`: `tributary status`, the jobs a coordinator runs, watched.
//! - `job.rs`: `tributary job list|delete`.
//! - `remote.rs`: reaching a coordinator from `status` and `job`.

#![allow(clippy::print_stdout, reason = "a command line prints its results")]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tributary_common::manifest::Compression;
use tributary_common::text::printable;
use tributary_io::ManifestVersion;
use tributary_tools::pack::{PackOptions, SourceFormat};
use tributary_tools::synth;
use tributary_worker::{Dataset, Location};

mod bar;
mod bench;
mod bench_tokens;
mod job;
mod pipeline_args;
mod process_stats;
mod quickstart;
mod read;
mod remote;
mod serve;
mod status;
mod storage;
mod tokens;
mod upload_args;

use pipeline_args::{u32_in, u64_in, usize_in};
use storage::StoreArgs;

/// The largest `pack --max-bytes`: 64 GiB. Shards stream to the store as
/// they are built, so memory does not limit it; a shard needs at most
/// 10,000 parts of `--part-size`.
const MAX_SHARD_BYTES: u64 = 64 << 30;

#[derive(Debug, Parser)]
#[command(
    name = "tributary",
    version,
    about = "Streams sharded datasets from object storage into training ranks."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text, or as JSON objects (one per line, with the
    /// fields and spans: job, member, rank, generation) for log pipelines.
    #[arg(
        long,
        global = true,
        env = "TRIBUTARY_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a photo-like synthetic ImageFolder tree (DIR/CLASS/N.jpg).
    Synth {
        dir: PathBuf,
        #[arg(long, default_value_t = 1000, value_parser = usize_in(1, synth::MAX_IMAGES))]
        images: usize,
        #[arg(long, default_value_t = 10, value_parser = usize_in(1, synth::MAX_CLASSES))]
        classes: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Pack SRC into shards and a manifest at URL. SRC is an ImageFolder
    /// tree (SRC/CLASS/IMAGE.jpg), a directory of WebDataset-style files
    /// (KEY.EXT; files sharing a key form a sample, any extension a field),
    /// or a .csv/.jsonl listing of `path,label[,caption]`.
    ///
    /// With --tokenizer, SRC is a text corpus (one or more JSONL files,
    /// .txt files, or directories of them) packed into a token dataset:
    /// each document's token ids and an end-of-document id, in Megatron
    /// .bin/.idx shards of about --shard-tokens tokens.
    ///
    /// A CSV listing starts with a header naming its columns, in any order:
    /// `path` (required), `label`, `caption`. A JSONL listing (.jsonl,
    /// .ndjson) holds one object per line with the keys `path` (a string,
    /// required), `label` (a string, a non-negative integer or null) and
    /// `caption` (a string or null), e.g. {"path": "imgs/a.jpg", "label":
    /// "cat", "caption": "a cat"}; other keys are refused. A relative path is
    /// resolved against the listing's directory; the file becomes the
    /// jpg/png/webp field by its magic bytes (else its extension), the
    /// caption a `txt` field, the label a `cls` field (labels that are all
    /// integers are the class indices; others are class names, sorted).
    Pack {
        /// What to pack: one path, or several with --tokenizer.
        #[arg(required = true, num_args = 1..)]
        src: Vec<PathBuf>,
        url: String,
        #[command(flatten)]
        tokens: tokens::PackArgs,
        /// What SRC is: auto, imagefolder, webdataset, listing or parquet.
        /// auto: a .csv or .jsonl file is a listing; a .parquet file or a
        /// directory of them is Parquet (a row a sample: images, labels,
        /// text, binary columns as jpg/png, cls, txt, bin fields); a
        /// directory holding only subdirectories of images is an
        /// ImageFolder tree; any other directory holds WebDataset files.
        #[arg(long, default_value = "auto", conflicts_with = "tokenizer")]
        format: SourceFormat,
        /// Close a shard before it exceeds this many bytes.
        #[arg(long, default_value_t = 64 << 20, value_parser = u64_in(1, MAX_SHARD_BYTES), conflicts_with = "tokenizer")]
        max_bytes: u64,
        /// Close a shard once it holds this many samples.
        #[arg(long, default_value_t = u32::MAX, value_parser = u32_in(1, u32::MAX), conflicts_with = "tokenizer")]
        max_samples: u32,
        /// none, zstd or zstd:LEVEL.
        #[arg(long, default_value = "none", conflicts_with = "tokenizer")]
        compression: Compression,
        /// Replace a dataset already at URL: the new version is written
        /// under new shard names and its manifest last, so readers see the
        /// old dataset or the new one, never a mix; then the old shards are
        /// deleted.
        #[arg(long)]
        force: bool,
        /// Manifest version to write: 2 (an index object per shard beside
        /// it, the manifest itself small) or 1 (every chunk listed in the
        /// manifest, for readers older than version 2).
        #[arg(long, default_value = "2", conflicts_with = "tokenizer")]
        manifest_version: ManifestVersion,
        /// Store JPEG files byte for byte. By default a `.jpg`/`.jpeg`
        /// file is stored losslessly transcoded (the same pixels) with
        /// restart markers and optimised Huffman tables, so that a random
        /// crop decodes only the part it covers; one that would grow, or
        /// cannot be transcoded, is stored as it is.
        #[arg(long, conflicts_with = "tokenizer")]
        keep_jpeg_bytes: bool,
        #[command(flatten)]
        upload: upload_args::UploadArgs,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Build a manifest for WebDataset .tar shards at URL that have none,
    /// or (--tokens, or when URL holds no .tar) for token files read in
    /// place: Megatron .bin/.idx pairs, 1-D .npy files and raw .bin files
    /// of --dtype, whose documents end at --eos-id.
    Index {
        url: String,
        #[command(flatten)]
        tokens: tokens::IndexArgs,
        /// What the files are: `tar` (WebDataset shards), `parquet`
        /// (files read in place: a shard per file, a chunk per row group),
        /// or `auto`: Parquet when URL holds .parquet files and no .tar.
        #[arg(long, default_value = "auto", value_parser = ["auto", "tar", "parquet"])]
        format: String,
        /// Parquet: index only the files whose names (relative to URL)
        /// match this glob, e.g. 'train-*.parquet'.
        #[arg(long = "match", value_name = "GLOB")]
        pattern: Option<String>,
        /// Replace an existing manifest.
        #[arg(long)]
        force: bool,
        /// Manifest version to write: 2 (an index object per shard beside
        /// it, the manifest itself small) or 1 (every chunk listed in the
        /// manifest, for readers older than version 2).
        #[arg(long, default_value = "2", conflicts_with = "tokens")]
        manifest_version: ManifestVersion,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Print dataset statistics and verify every shard's checksums.
    Inspect {
        url: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Synthesize, pack and load a small dataset with two ranks, end to end.
    Quickstart(quickstart::Args),
    /// Measure the loader against the decode-only ceiling.
    Bench(bench::Args),
    /// Print the sample keys one rank reads in one epoch, in order.
    Read(read::Args),
    /// Run a coordinator replica (state in etcd with --etcd, else in memory).
    Coordinator(Box<serve::Args>),
    /// Show a coordinator's jobs and their members' progress (--watch to
    /// follow them).
    Status(status::Args),
    /// List or delete a coordinator's jobs.
    #[command(subcommand)]
    Job(job::Command),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return parse_error(&error),
    };
    // A server logs its jobs' events (info); a command, its warnings, but
    // not each retry of a coordinator call: its one-line error names the
    // address (RUST_LOG=warn shows the retries).
    let default_filter = match cli.command {
        Command::Coordinator(_) => "info",
        _ => "warn,tributary_worker::coordinated::client=error",
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        // Colours for a terminal only: not into a redirected log file.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command));
    // A read stuck in the kernel (a hung network filesystem) holds a
    // blocking thread: exit without waiting for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A bad flag value as one line (`error: invalid value '0' for '--world
/// <WORLD>': 0 is not in 1..=65536`) and exit status 2; other parse
/// outcomes (help, version, missing arguments) as clap renders them.
fn parse_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        error.exit();
    }
    let rendered = error.render().to_string();
    let line = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("{line}");
    ExitCode::from(2)
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Synth {
            dir,
            images,
            classes,
            seed,
        } => {
            let started = Instant::now();
            let bar = bar::Bar::new("synth", images as u64);
            let options = synth::SynthOptions {
                images,
                classes,
                seed,
            };
            let summary = {
                let bar = bar.clone();
                let dir = dir.clone();
                tokio::task::spawn_blocking(move || {
                    synth::write_image_folder(&dir, &options, &|bytes| {
                        tributary_tools::progress::Progress::advance(&bar, 1, bytes)
                    })
                })
                .await??
            };
            bar.finish();
            println!(
                "wrote {} images ({} PNG) in {} classes to {}: {:.1} MB, mean {:.0}x{:.0} px, mean {:.0} KB, {:.1} s",
                summary.images,
                summary.pngs,
                classes,
                dir.display(),
                summary.bytes as f64 / 1e6,
                summary.mean_width,
                summary.mean_height,
                summary.bytes as f64 / summary.images.max(1) as f64 / 1e3,
                started.elapsed().as_secs_f64()
            );
        }
        Command::Pack {
            src,
            url,
            tokens,
            format,
            max_bytes,
            max_samples,
            compression,
            force,
            upload,
            manifest_version,
            keep_jpeg_bytes,
            store,
        } => {
            if tokens.tokenizer.is_some() {
                return tokens::pack(&src, &url, &tokens, force, &upload, &store).await;
            }
            let [src] = &src[..] else {
                anyhow::bail!(
                    "pack takes one SRC unless --tokenizer is given (several corpus paths are for token datasets)"
                );
            };
            let started = Instant::now();
            let defaults = PackOptions::default();
            let options = PackOptions {
                max_bytes,
                max_samples,
                compression,
                force,
                format,
                upload: upload.options()?,
                uploads_in_flight: upload
                    .shards_in_flight
                    .unwrap_or(defaults.uploads_in_flight),
                manifest_version,
                jpeg: (!keep_jpeg_bytes)
                    .then_some(tributary_worker::jpeg_with_restart_markers as _),
                ..defaults
            };
            let dest = Location::open(&url, &store.options(&url), true)?;
            let bar = bar::Bar::new("pack", 0);
            let summary = tributary_tools::pack::pack(src, &dest, &options, Arc::new(bar.clone()))
                .await
                .with_context(|| format!("packing {} into {url}", src.display()))?;
            bar.finish();
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "packed {} samples of {} classes into {} shards ({:.1} MB, {compression}) at {url} in {seconds:.1} s ({} source, {:.1} MB/s, {} multipart parts, at most {:.1} MB held by uploads)",
                summary.samples,
                summary.classes,
                summary.shards,
                summary.bytes as f64 / 1e6,
                summary.format,
                summary.bytes as f64 / seconds.max(1e-3) / 1e6,
                summary.parts,
                summary.peak_upload_bytes as f64 / 1e6,
            );
        }
        Command::Index {
            url,
            tokens,
            format,
            pattern,
            force,
            manifest_version,
            store,
        } => {
            let location = Location::open(&url, &store.options(&url), false)?;
            let parquet = match format.as_str() {
                "parquet" => true,
                "tar" => false,
                _ => {
                    !tokens.tokens
                        && tributary_tools::table::index::looks_like_parquet(
                            &location.list().await?,
                        )
                }
            };
            if parquet {
                index_parquet(&url, &location, pattern.as_deref(), force).await?;
                return Ok(ExitCode::SUCCESS);
            }
            if tokens::index_as_tokens(&tokens, &location).await? {
                return tokens::index(&url, &location, &tokens, force).await;
            }
            let bar = bar::Bar::new("index", 0);
            let summary = tributary_tools::index::index(
                &location,
                force,
                manifest_version,
                Arc::new(bar.clone()),
            )
            .await?;
            bar.finish();
            println!(
                "indexed {} shards, {} samples ({:.1} MB), fields {}: wrote {url}/manifest.json",
                summary.shards,
                summary.samples,
                summary.bytes as f64 / 1e6,
                summary.fields.join(",")
            );
        }
        Command::Inspect { url, store } => return inspect(&url, &store).await,
        Command::Quickstart(args) => quickstart::run(args).await?,
        Command::Bench(args) => bench::run(args).await?,
        Command::Read(args) => read::run(args).await?,
        Command::Coordinator(args) => serve::run(*args).await?,
        Command::Status(args) => status::run(args).await?,
        Command::Job(command) => job::run(command).await?,
    }
    Ok(ExitCode::SUCCESS)
}

async fn inspect(url: &str, store: &StoreArgs) -> anyhow::Result<ExitCode> {
    if let Some(code) = tokens::inspect(url, store).await? {
        return Ok(code);
    }
    let dataset = Dataset::open(url, &store.options(url)).await?;
    let m = &dataset.manifest;
    // The manifest's strings and the problems (naming shards and sample
    // keys) come from the dataset: escaped, one line each.
    println!("dataset      {url}");
    println!(
        "format       {} v{}, compression {}",
        printable(&m.format),
        m.version,
        m.compression.as_str()
    );
    println!("fields       {}", printable(&m.fields.join(", ")));
    println!("classes      {}", m.classes.len());
    println!(
        "shards       {} ({} to {} samples each)",
        m.shards.len(),
        m.shards.iter().map(|s| s.samples).min().unwrap_or(0),
        m.shards.iter().map(|s| s.samples).max().unwrap_or(0)
    );
    println!("samples      {}", m.samples);
    println!(
        "bytes        {:.1} MB ({:.1} KB per sample)",
        m.bytes as f64 / 1e6,
        m.bytes as f64 / m.samples.max(1) as f64 / 1e3
    );
    let bar = bar::Bar::new("verify", 0);
    let report = tributary_tools::inspect::inspect(&dataset, Arc::new(bar.clone())).await;
    bar.finish();
    println!(
        "verified     {} of {} shards, {} of {} samples",
        report.verified_shards, report.shards, report.verified_samples, report.samples
    );
    if report.problems.is_empty() {
        println!("checksums    ok");
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &report.problems {
        eprintln!("error: {}", printable(problem));
    }
    eprintln!(
        "error: {} of {} shards failed verification",
        report.problems.len(),
        report.shards
    );
    Ok(ExitCode::FAILURE)
}

/// `tributary index URL --format parquet`: a manifest for the Parquet
/// files at URL, with a progress bar, and what it found.
async fn index_parquet(
    url: &str,
    location: &Location,
    pattern: Option<&str>,
    force: bool,
) -> anyhow::Result<()> {
    let bar = bar::Bar::new("index", 0);
    let summary =
        tributary_tools::table::index::index(location, pattern, force, Arc::new(bar.clone()))
            .await?;
    bar.finish();
    let columns: Vec<String> = summary
        .columns
        .iter()
        .map(|c| format!("{} ({}: {})", c.name, c.parquet_type, c.kind.as_str()))
        .collect();
    println!(
        "indexed {} Parquet files, {} rows ({:.1} MB), columns {}{}: wrote {url}/manifest.json",
        summary.files,
        summary.rows,
        summary.bytes as f64 / 1e6,
        columns.join(", "),
        if summary.classes > 0 {
            format!(", {} classes", summary.classes)
        } else {
            String::new()
        }
    );
    for name in &summary.empty {
        println!("left out {name}: it holds no rows");
    }
    Ok(())
}
