//! Object-store settings: flags plus the usual cloud environment variables,
//! read here, once, and passed down as plain data.

use clap::Args;
use tributary_io::{S3Settings, StoreOptions};

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
