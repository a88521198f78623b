//! Object-store settings: flags plus the usual cloud environment variables,
//! read here, once, and passed down as plain data.

use clap::Args;
use tributary_worker::StoreOptions;

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
        let mut options = StoreOptions::from_vars(std::env::vars());
        if url.starts_with("s3://") || url.starts_with("s3a://") {
            if let Some(endpoint) = &self.s3_endpoint {
                options.set("aws_endpoint", endpoint.clone());
                if endpoint.starts_with("http://") {
                    options.set("aws_allow_http", "true");
                }
            }
            if let Some(region) = &self.s3_region {
                options.set("aws_region", region.clone());
            }
            options.set(
                "aws_virtual_hosted_style_request",
                (!self.s3_path_style).to_string(),
            );
        }
        options
    }
}
