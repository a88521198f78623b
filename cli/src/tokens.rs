//! Token datasets on the command line: `pack --tokenizer`, `index
//! --tokens` and `inspect` of a `tributary-tokens` manifest.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use tributary_common::manifest::MANIFEST_NAME;
use tributary_common::text::printable;
use tributary_common::tokens::manifest::{is_token_manifest, TokenManifest};
use tributary_common::tokens::TokenDtype;
use tributary_io::dataset::{dataset_url, MAX_MANIFEST_BYTES};
use tributary_tools::tokens::{
    index_tokens, inspect_tokens, pack_tokens, IndexTokensOptions, TokenPackOptions,
};
use tributary_worker::Location;

use crate::bar::Bar;
use crate::pipeline_args::u64_in;
use crate::storage::StoreArgs;
use crate::upload_args::UploadArgs;

/// The largest `--shard-tokens`: 2^40.
const MAX_SHARD_TOKENS: u64 = 1 << 40;

/// `pack`'s token flags.
#[derive(Debug, Clone, Args)]
pub struct PackArgs {
    /// Pack a text corpus into a token dataset with this tokenizer: `bytes`
    /// (built in: a token per byte, end-of-document 256, u16) or the path
    /// of a Hugging Face tokenizer.json.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// The JSONL field holding each document's text.
    #[arg(long, default_value = "text", requires = "tokenizer")]
    pub text_field: String,
    /// The end-of-document id appended to every document (default: the
    /// tokenizer's: 256 for bytes; a tokenizer.json's `<|endoftext|>`,
    /// `</s>`, `<|end_of_text|>` or `<eos>`).
    #[arg(long, requires = "tokenizer")]
    pub eos_id: Option<u32>,
    /// Close a token shard once it holds this many tokens (documents are
    /// never split) [default: 32 Mi].
    #[arg(long, value_parser = u64_in(1, MAX_SHARD_TOKENS), requires = "tokenizer")]
    pub shard_tokens: Option<u64>,
}

/// `index`'s token flags.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// Index token files (the default when URL holds no .tar files).
    #[arg(long)]
    pub tokens: bool,
    /// The dtype of raw .bin token files (u16 or u32).
    #[arg(long)]
    pub dtype: Option<TokenDtype>,
    /// The id ending each document in .npy and raw token files (it stays
    /// at the end of its document).
    #[arg(long = "eos-id")]
    pub index_eos_id: Option<u32>,
}

/// `pack SRC... URL --tokenizer T`.
pub async fn pack(
    src: &[PathBuf],
    url: &str,
    args: &PackArgs,
    force: bool,
    upload: &UploadArgs,
    store: &StoreArgs,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let defaults = TokenPackOptions::default();
    let options = TokenPackOptions {
        tokenizer: args.tokenizer.clone().unwrap_or(defaults.tokenizer),
        text_field: args.text_field.clone(),
        eos_id: args.eos_id,
        shard_tokens: args.shard_tokens.unwrap_or(defaults.shard_tokens),
        upload: upload.options()?,
        force,
        ..defaults
    };
    let dest = Location::open(url, &store.options(url), true)?;
    let bar = Bar::documents("pack");
    let sources = src
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let summary = pack_tokens(src, &dest, &options, Arc::new(bar.clone()))
        .await
        .with_context(|| format!("packing {sources} into {url}"))?;
    bar.finish();
    let seconds = started.elapsed().as_secs_f64().max(1e-3);
    println!(
        "packed {} documents, {} tokens ({}, eos {}, vocabulary {}) into {} shards ({:.1} MB) at {url} in {seconds:.1} s ({:.0} documents/s, {:.2} M tokens/s)",
        summary.documents,
        summary.tokens,
        summary.dtype,
        summary.eos_id,
        summary.vocab_size,
        summary.shards,
        summary.bytes as f64 / 1e6,
        (summary.documents + summary.empty_documents) as f64 / seconds,
        summary.tokens as f64 / seconds / 1e6,
    );
    if summary.empty_documents > 0 {
        println!(
            "skipped {} empty documents (no tokens)",
            summary.empty_documents
        );
    }
    if summary.skipped_files > 0 {
        println!(
            "skipped {} files in corpus directories that are not .jsonl, .ndjson, .json, .txt or .parquet",
            summary.skipped_files
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `index` indexes token files: asked to, or the location holds no
/// `.tar` but some `.bin`/`.npy`.
pub async fn index_as_tokens(args: &IndexArgs, location: &Location) -> anyhow::Result<bool> {
    if args.tokens || args.dtype.is_some() || args.index_eos_id.is_some() {
        return Ok(true);
    }
    let objects = location.list().await?;
    let tars = objects.iter().any(|(name, _)| name.ends_with(".tar"));
    let tokens = objects
        .iter()
        .any(|(name, _)| name.ends_with(".bin") || name.ends_with(".npy"));
    Ok(!tars && tokens)
}

/// `index URL --tokens`.
pub async fn index(
    url: &str,
    location: &Location,
    args: &IndexArgs,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let options = IndexTokensOptions {
        dtype: args.dtype,
        eos_id: args.index_eos_id,
        force,
    };
    let bar = Bar::documents("index");
    let summary = index_tokens(location, &options, Arc::new(bar.clone())).await?;
    bar.finish();
    println!(
        "indexed {} token files ({} Megatron pairs read in place, {} scanned, an index written beside each): {} documents, {} {} tokens ({:.1} MB) in {:.1} s: wrote {url}/manifest.json",
        summary.shards,
        summary.megatron,
        summary.scanned,
        summary.documents,
        summary.tokens,
        summary.dtype,
        summary.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    if summary.unterminated > 0 {
        println!(
            "{} files end with a document without the end-of-document id; it is indexed as a document",
            summary.unterminated
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `inspect URL` of a token dataset; `None` when the dataset is not one.
pub async fn inspect(url: &str, store: &StoreArgs) -> anyhow::Result<Option<ExitCode>> {
    let url = dataset_url(url);
    let location = Location::open(url, &store.options(url), false)?;
    let bytes = match location
        .get_at_most(MANIFEST_NAME, MAX_MANIFEST_BYTES)
        .await
    {
        Ok(bytes) => bytes,
        // The dataset reader says what is missing, in its words.
        Err(_) => return Ok(None),
    };
    if !is_token_manifest(&bytes) {
        return Ok(None);
    }
    let m = TokenManifest::from_json(&bytes).with_context(|| location.url_of(MANIFEST_NAME))?;
    // The manifest's strings come from the dataset: escaped, one line each.
    let optional = |v: Option<String>| v.map_or_else(|| "-".into(), |v| printable(&v).into_owned());
    println!("dataset      {url}");
    println!("format       {} v{}", printable(&m.format), m.version);
    println!(
        "tokens       {} ({}, eos {}, vocabulary {}, tokenizer {})",
        m.tokens,
        m.dtype,
        optional(m.eos_id.map(|e| e.to_string())),
        optional(m.vocab_size.map(|v| v.to_string())),
        optional(m.tokenizer.clone())
    );
    println!(
        "documents    {} ({:.1} tokens each on average)",
        m.documents,
        m.tokens as f64 / m.documents.max(1) as f64
    );
    println!(
        "shards       {} ({} to {} tokens each)",
        m.shards.len(),
        m.shards.iter().map(|s| s.tokens).min().unwrap_or(0),
        m.shards.iter().map(|s| s.tokens).max().unwrap_or(0)
    );
    println!("bytes        {:.1} MB", m.bytes as f64 / 1e6);
    let bar = Bar::documents("verify");
    let report = inspect_tokens(&location, &m, Arc::new(bar.clone())).await;
    bar.finish();
    if let (Some(shortest), Some(longest)) = (report.shortest, report.longest) {
        println!("documents    {shortest} to {longest} tokens long");
    }
    println!(
        "verified     {} of {} shards' indexes and sizes",
        report.verified_shards, report.shards
    );
    if report.problems.is_empty() {
        println!("indexes      ok");
        return Ok(Some(ExitCode::SUCCESS));
    }
    for problem in &report.problems {
        eprintln!("error: {}", printable(problem));
    }
    eprintln!(
        "error: {} of {} shards failed verification",
        report.problems.len(),
        report.shards
    );
    Ok(Some(ExitCode::FAILURE))
}
