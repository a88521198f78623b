//! Loader flags shared by the commands that run the pipeline. Each numeric
//! flag is ranged with the loader's own limits, so a typo is a one-line
//! error naming the flag, never an allocation the machine cannot make.

use clap::builder::RangedU64ValueParser;
use tributary_worker::pipeline::decode::augment::{AugmentConfig, Layout};
use tributary_worker::pipeline::decode::pixels::{DecodeLimits, MAX_PIXELS_LIMIT};
use tributary_worker::pipeline::fetch::FetchConfig;
use tributary_worker::pipeline::limits;
use tributary_worker::{LoaderConfig, OnError};

/// A `usize` flag between `min` and `max`.
pub fn usize_in(min: usize, max: usize) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(min as u64..=max as u64)
}

/// A `u64` flag between `min` and `max`.
pub fn u64_in(min: u64, max: u64) -> RangedU64ValueParser<u64> {
    RangedU64ValueParser::new().range(min..=max)
}

/// A `u32` flag between `min` and `max`.
pub fn u32_in(min: u32, max: u32) -> RangedU64ValueParser<u32> {
    RangedU64ValueParser::new().range(u64::from(min)..=u64::from(max))
}

/// A fraction between 0 and 1.
fn fraction(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is not between 0 and 1"))
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct PipelineArgs {
    #[arg(long, default_value_t = 64, value_parser = usize_in(1, limits::MAX_BATCH_SIZE))]
    pub batch_size: usize,
    /// Output side length after RandomResizedCrop.
    #[arg(long, default_value_t = 224, value_parser = u32_in(1, limits::MAX_IMAGE_SIZE))]
    pub image_size: u32,
    /// Samples held by the shuffle buffer.
    #[arg(long, default_value_t = 1024, value_parser = usize_in(0, limits::MAX_SHUFFLE_BUFFER))]
    pub shuffle_buffer: usize,
    /// Output u8 NHWC instead of normalised f32 NCHW.
    #[arg(long)]
    pub u8: bool,
    /// Decode threads (default: all cores).
    #[arg(long, value_parser = usize_in(1, limits::MAX_QUEUE))]
    pub threads: Option<usize>,
    /// Range requests in flight at once.
    #[arg(long, default_value_t = FetchConfig::default().max_requests,
          value_parser = usize_in(1, limits::MAX_REQUESTS))]
    pub max_requests: usize,
    /// Largest range request, in KiB.
    #[arg(long, default_value_t = FetchConfig::default().max_read_bytes >> 10,
          value_parser = u64_in(1, limits::MAX_READ_BYTES >> 10))]
    pub max_read_kib: u64,
    /// Bytes fetched and not yet in the shuffle buffer, in MiB.
    #[arg(long, default_value_t = FetchConfig::default().max_bytes_in_flight >> 20,
          value_parser = u64_in(1, limits::MAX_BYTES_IN_FLIGHT >> 20))]
    pub max_in_flight_mib: u64,
    /// Largest image, in pixels (width x height from its header); a larger
    /// one is a bad sample.
    #[arg(long, default_value_t = DecodeLimits::default().max_image_pixels,
          value_parser = u64_in(1, MAX_PIXELS_LIMIT))]
    pub max_image_pixels: u64,
    /// Pixels all decode threads may hold at once (an image larger than
    /// this decodes alone).
    #[arg(long, default_value_t = DecodeLimits::default().max_pixels_in_flight,
          value_parser = u64_in(1, MAX_PIXELS_LIMIT))]
    pub max_decode_pixels: u64,
    /// What a sample that cannot be decoded does: `raise` (end with an error
    /// naming its shard and offset) or `skip` (leave it out of its batch,
    /// which comes out one sample short, and log it).
    #[arg(long, default_value_t = OnError::Raise, value_parser = str::parse::<OnError>)]
    pub on_error: OnError,
    /// With `--on-error skip`, the largest fraction of the samples that may
    /// be skipped before the run fails.
    #[arg(long, default_value_t = LoaderConfig::default().max_bad_fraction, value_parser = fraction)]
    pub max_bad_fraction: f64,
}

impl PipelineArgs {
    /// The loader configuration these flags describe.
    pub fn config(&self) -> LoaderConfig {
        let defaults = LoaderConfig::default();
        LoaderConfig {
            batch_size: self.batch_size,
            shuffle_buffer: self.shuffle_buffer,
            decode_threads: self.threads.unwrap_or(defaults.decode_threads),
            augment: AugmentConfig {
                size: self.image_size,
                layout: if self.u8 {
                    Layout::NhwcU8
                } else {
                    Layout::NchwF32
                },
                ..AugmentConfig::default()
            },
            fetch: FetchConfig {
                max_requests: self.max_requests,
                max_read_bytes: self.max_read_kib << 10,
                max_bytes_in_flight: self.max_in_flight_mib << 20,
                ..FetchConfig::default()
            },
            decode_limits: DecodeLimits {
                max_image_pixels: self.max_image_pixels,
                max_pixels_in_flight: self.max_decode_pixels,
            },
            on_error: self.on_error,
            max_bad_fraction: self.max_bad_fraction,
            ..defaults
        }
    }
}
