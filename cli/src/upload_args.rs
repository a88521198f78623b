//! `pack`'s upload flags: how each shard goes to the store.

use clap::Args;
use tributary_io::upload::{
    MAX_PARTS_IN_FLIGHT, MAX_PART_BYTES, MAX_SINGLE_PUT_BYTES, MIN_PART_BYTES,
};
use tributary_io::UploadOptions;

use crate::pipeline_args::{u64_in, usize_in};

/// Shard uploads: one PUT up to a size, parts above it, in bounded memory.
#[derive(Debug, Clone, Args)]
pub struct UploadArgs {
    /// Upload a shard of at most this many bytes with one PUT; a larger
    /// one as a multipart upload (at most 5 GiB).
    #[arg(
        long,
        env = "TRIBUTARY_PACK_SINGLE_PUT_LIMIT",
        default_value_t = 64 << 20,
        value_parser = u64_in(0, MAX_SINGLE_PUT_BYTES)
    )]
    pub single_put_limit: u64,
    /// Bytes per part of a multipart upload (5 MiB to 5 GiB, S3's limits;
    /// a shard may have at most 10,000 parts).
    #[arg(
        long,
        env = "TRIBUTARY_PACK_PART_SIZE",
        default_value_t = 16 << 20,
        value_parser = u64_in(MIN_PART_BYTES, MAX_PART_BYTES)
    )]
    pub part_size: u64,
    /// Parts of one shard sent at once. Each shard being written holds at
    /// most max(single-put-limit, part-size × parts-in-flight) + part-size
    /// bytes in memory.
    #[arg(
        long,
        env = "TRIBUTARY_PACK_PARTS_IN_FLIGHT",
        default_value_t = 4,
        value_parser = usize_in(1, MAX_PARTS_IN_FLIGHT)
    )]
    pub parts_in_flight: usize,
    /// Shards built and uploaded at once, each on a thread of its own
    /// [default: the cores, 2 to 16].
    #[arg(long, env = "TRIBUTARY_PACK_SHARDS_IN_FLIGHT", value_parser = usize_in(1, 256))]
    pub shards_in_flight: Option<usize>,
}

impl UploadArgs {
    /// The validated upload options.
    pub fn options(&self) -> anyhow::Result<UploadOptions> {
        Ok(UploadOptions::new(
            self.single_put_limit,
            self.part_size,
            self.parts_in_flight,
        )?)
    }
}
