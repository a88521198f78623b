//! Object-store settings: flags plus the usual cloud environment variables,
//! read here, once, and passed down as plain data.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use tributary_io::cache::parse_bytes;
use tributary_io::{CacheConfig, S3Settings, ShardCache, StoreOptions};

/// Flags shared by every command that opens a URL.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// S3-compatible endpoint, e.g. http://127.0.0.1:9000 (or AWS_ENDPOINT_URL).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub s3_endpoint: Option<String>,
    /// S3 region (or AWS_REGION / AWS_DEFAULT_REGION).
    #[arg(long)]
    pub s3_region: Option<String>,
    /// Address buckets as ENDPOINT/BUCKET rather than BUCKET.ENDPOINT.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub s3_path_style: bool,
}

impl StoreArgs {
    /// Options for opening `url`.
    pub fn options(&self, url: &str) -> StoreOptions {
        let s3 = S3Settings {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            path_style: self.s3_path_style,
        };
        StoreOptions::from_vars(std::env::vars()).with_s3(url, &s3)
    }
}

/// The local shard cache of the commands that read a dataset.
#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    /// Keep fetched shards in this local directory, within --cache-limit;
    /// the ranks of a node may share it. It must be yours, not a symbolic
    /// link, and not writable by group or others (created with mode 0700).
    #[arg(long, env = "TRIBUTARY_CACHE_DIR", requires = "cache_limit")]
    pub cache_dir: Option<PathBuf>,
    /// The cache's size limit: bytes, or with a binary unit (64MiB, 10GiB).
    #[arg(long, env = "TRIBUTARY_CACHE_LIMIT", requires = "cache_dir", value_parser = cache_limit)]
    pub cache_limit: Option<u64>,
}

impl CacheArgs {
    /// The cache's settings, when asked for.
    pub fn config(&self) -> Option<CacheConfig> {
        Some(CacheConfig {
            dir: self.cache_dir.clone()?,
            limit: self.cache_limit?,
        })
    }

    /// Opens the cache (creating its directory), when asked for.
    pub fn open(&self) -> anyhow::Result<Option<Arc<ShardCache>>> {
        Ok(self.config().map(|c| c.open()).transpose()?)
    }
}

fn cache_limit(text: &str) -> Result<u64, String> {
    match parse_bytes(text)? {
        0 => Err("the cache limit must be at least 1 byte".into()),
        bytes => Ok(bytes),
    }
}
