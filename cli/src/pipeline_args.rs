//! Loader flags shared by the commands that run the pipeline.

use tributary_worker::augment::{AugmentConfig, Layout};
use tributary_worker::fetch::FetchConfig;
use tributary_worker::LoaderConfig;

#[derive(Debug, Clone, clap::Args)]
pub struct PipelineArgs {
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Output side length after RandomResizedCrop.
    #[arg(long, default_value_t = 224)]
    pub image_size: u32,
    /// Samples held by the shuffle buffer.
    #[arg(long, default_value_t = 1024)]
    pub shuffle_buffer: usize,
    /// Output u8 NHWC instead of normalised f32 NCHW.
    #[arg(long)]
    pub u8: bool,
    /// Decode threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Range requests in flight at once.
    #[arg(long, default_value_t = FetchConfig::default().max_requests)]
    pub max_requests: usize,
    /// Largest range request, in KiB.
    #[arg(long, default_value_t = FetchConfig::default().max_read_bytes >> 10)]
    pub max_read_kib: u64,
    /// Bytes fetched and not yet in the shuffle buffer, in MiB.
    #[arg(long, default_value_t = FetchConfig::default().max_bytes_in_flight >> 20)]
    pub max_in_flight_mib: u64,
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
            ..defaults
        }
    }
}
