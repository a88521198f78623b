//! How `pack` packs: [`PackOptions`].

use tributary_common::format::shard::DEFAULT_BLOCK_BYTES;
use tributary_common::manifest::Compression;
use tributary_io::{ManifestVersion, UploadOptions};

use super::source::SourceFormat;

/// Packer settings.
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// A shard is closed before it would exceed this many bytes (a single
    /// larger sample still gets a shard of its own).
    pub max_bytes: u64,
    /// A shard holds at most this many samples.
    pub max_samples: u32,
    pub compression: Compression,
    /// Uncompressed size of one zstd block.
    pub block_bytes: usize,
    /// Shards built and uploaded at once, each on a thread of its own
    /// (default: the cores, 2 to 16). Upload memory peaks at this many
    /// times [`UploadOptions::memory_bound`].
    pub uploads_in_flight: usize,
    /// How each shard is uploaded: one PUT, or parts, in bounded memory.
    pub upload: UploadOptions,
    /// Replace a dataset already at the destination (see the
    /// [module docs](super)).
    pub force: bool,
    /// What the source is (`Auto`: decided from it, see [`SourceFormat`]).
    pub format: SourceFormat,
    /// The manifest version to write (2: an index object per shard; 1:
    /// every chunk inline, for readers older than version 2).
    pub manifest_version: ManifestVersion,
    /// Stores each `jpg`/`jpeg` field as this gives it back (`None` from
    /// it: as it is). The CLI passes the worker's lossless restart-marker
    /// transcode (`tributary_worker::jpeg_with_restart_markers`), so a
    /// crop decodes only its part; `None` (the default here, and `pack
    /// --keep-jpeg-bytes`) stores every file's bytes as they are.
    pub jpeg: Option<JpegTranscode>,
}

/// A lossless rewrite of a JPEG's bytes, or `None` to keep them.
pub type JpegTranscode = fn(&[u8]) -> Option<Vec<u8>>;

impl Default for PackOptions {
    fn default() -> Self {
        Self {
            max_bytes: 64 << 20,
            max_samples: u32::MAX,
            compression: Compression::NONE,
            block_bytes: DEFAULT_BLOCK_BYTES,
            uploads_in_flight: std::thread::available_parallelism()
                .map_or(4, |n| n.get())
                .clamp(2, 16),
            upload: UploadOptions::default(),
            force: false,
            format: SourceFormat::Auto,
            manifest_version: ManifestVersion::default(),
            jpeg: None,
        }
    }
}
