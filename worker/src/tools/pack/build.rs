//! Building shards in parallel, each streamed to the store as it is made.
//!
//! Every shard is built on a rayon thread of a pool of
//! [`PackOptions::uploads_in_flight`] threads, straight into a
//! [`BlockingUpload`]: the bytes go out in parts while later samples are
//! still being read and compressed, so a shard never sits whole in memory.
//! Memory is bounded by `uploads_in_flight` × [`UploadOptions::memory_bound`]
//! for the uploads, plus one sample (or zstd block) per thread, whatever
//! `--max-bytes` is.
//!
//! The first shard that fails stops the others: shards not yet begun are not
//! begun, shards being built stop at their next sample, and every unfinished
//! upload is aborted (no object, no multipart parts left behind).
//!
//! [`UploadOptions::memory_bound`]: tributary_io::UploadOptions::memory_bound

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tributary_common::format::shard::ShardWriter;
use tributary_common::manifest::ShardMeta;
use tributary_io::upload::OnUploaded;
use tributary_io::{BlockingUpload, Location, Upload, UploadMeter};

use super::{source, PackOptions, SourceSample};
use crate::error::{Result, WorkerError};
use crate::tools::progress::Progress;

/// What the builders share.
pub(super) struct Builder {
    pub samples: Arc<Vec<SourceSample>>,
    pub plan: Vec<Range<usize>>,
    /// Each shard's object name, by index.
    pub names: Vec<String>,
    pub options: PackOptions,
    pub dest: Location,
    pub progress: Arc<dyn Progress>,
    pub meter: Arc<UploadMeter>,
    /// Names of the shards whose upload began (to remove them when a run
    /// that replaces a dataset fails).
    pub started: Arc<Mutex<Vec<String>>>,
}

impl Builder {
    /// Builds and uploads every shard; call on a blocking thread (not a
    /// runtime worker): the uploads run on `handle`.
    pub fn run(&self, handle: &Handle) -> Result<Vec<ShardMeta>> {
        use rayon::prelude::*;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.options.uploads_in_flight)
            .thread_name(|i| format!("tributary-pack-{i}"))
            .build()
            .map_err(|e| WorkerError::Config(format!("cannot start the packing threads: {e}")))?;
        let stop = AtomicBool::new(false);
        let first_error = Mutex::new(None);
        let shards: Vec<Option<ShardMeta>> = pool.install(|| {
            self.plan
                .par_iter()
                .zip(&self.names)
                .map(|(range, name)| {
                    if stop.load(Ordering::SeqCst) {
                        return None;
                    }
                    if let Ok(mut started) = self.started.lock() {
                        started.push(name.clone());
                    }
                    match self.shard(name, &self.samples[range.clone()], handle, &stop) {
                        Ok(meta) => Some(meta),
                        Err(error) => {
                            // The first failure is the one to report; the
                            // shards it stops fail because of it.
                            if !stop.swap(true, Ordering::SeqCst) {
                                if let Ok(mut first) = first_error.lock() {
                                    *first = Some(error);
                                }
                            }
                            None
                        }
                    }
                })
                .collect()
        });
        if let Some(error) = first_error.into_inner().ok().flatten() {
            return Err(error);
        }
        shards
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| WorkerError::Stopped("shard building stopped early".into()))
    }

    /// Builds shard `name` from `samples` straight into its upload.
    fn shard(
        &self,
        name: &str,
        samples: &[SourceSample],
        handle: &Handle,
        stop: &AtomicBool,
    ) -> Result<ShardMeta> {
        let on_uploaded: OnUploaded = {
            let progress = Arc::clone(&self.progress);
            Arc::new(move |bytes| progress.uploaded(bytes, 0))
        };
        let upload = Upload::new(
            &self.dest,
            name,
            self.options.upload,
            Arc::clone(&self.meter),
        )
        .on_uploaded(on_uploaded);
        let mut sink = BlockingUpload::new(upload, handle.clone());
        match self.write(name, samples, &mut sink, stop) {
            Ok(meta) => {
                sink.finish()?;
                self.progress.uploaded(0, 1);
                Ok(meta)
            }
            // A write that failed because the upload did reports the
            // store's error, which names the object and the part.
            Err(error) => Err(sink.abort().map_or(error, WorkerError::from)),
        }
    }

    fn write(
        &self,
        name: &str,
        samples: &[SourceSample],
        sink: &mut BlockingUpload,
        stop: &AtomicBool,
    ) -> Result<ShardMeta> {
        let mut writer = ShardWriter::with_sink(name, self.options.compression, sink)
            .block_bytes(self.options.block_bytes);
        for sample in samples {
            if stop.load(Ordering::SeqCst) {
                return Err(WorkerError::Stopped(format!(
                    "{name}: stopped, another shard failed"
                )));
            }
            let data = sample
                .fields
                .iter()
                .map(source::read_field)
                .collect::<Result<Vec<_>>>()?;
            let fields: Vec<(&str, &[u8])> = sample
                .fields
                .iter()
                .zip(&data)
                .map(|(field, data)| (field.ext.as_str(), &data[..]))
                .collect();
            writer.push(&sample.key, &fields)?;
            self.progress
                .advance(1, data.iter().map(|d| d.len() as u64).sum());
        }
        Ok(writer.finish_sink()?.meta)
    }
}
