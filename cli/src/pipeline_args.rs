//! Loader flags shared by the commands that run the pipeline.

use tributary_worker::augment::{AugmentConfig, Layout};
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
            ..defaults
        }
    }
}
