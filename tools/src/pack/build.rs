//! Building shards in parallel, each streamed to the store as it is made.
//!
//! The calling thread makes the second pass over the source, cut into the
//! planned shards ([`Replay`]), and hands each shard's samples (where
//! their bytes are, not the bytes) to one of
//! [`PackOptions::uploads_in_flight`] threads as soon as one is free; no
//! more shards are read ahead than there are threads. Each thread builds its
//! shard straight into a [`BlockingUpload`]: the bytes go out in parts while
//! later samples are still being read and compressed, so a shard never sits
//! whole in memory. Memory is bounded by `uploads_in_flight` ×
//! [`UploadOptions::memory_bound`] for the uploads, plus one sample (or zstd
//! block) per thread, whatever `--max-bytes` is.
//!
//! The first shard that fails (or a source that fails, or changed since it
//! was planned) stops the others: shards not yet begun are not begun,
//! shards being built stop at their next sample, and every unfinished
//! upload is aborted (no object, no multipart parts left behind).
//!
//! [`UploadOptions::memory_bound`]: tributary_io::UploadOptions::memory_bound
//! [`Replay`]: super::plan::Replay

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};

use tokio::runtime::Handle;
use tributary_common::format::shard::ShardWriter;
use tributary_common::manifest::ShardMeta;
use tributary_io::upload::OnUploaded;
use tributary_io::{BlockingUpload, Location, Upload, UploadMeter};

use super::options::PackOptions;
use super::plan::{PlannedShard, Replay};
use super::source::{read_field, Source, SourceSample};
use crate::error::{Result, ToolsError};
use crate::progress::Progress;

/// What the builders share.
pub(super) struct Builder {
    pub source: Box<dyn Source>,
    /// Where the source is, for messages.
    pub src: PathBuf,
    pub plan: Vec<PlannedShard>,
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

/// What the builders made.
pub(super) struct Built {
    /// Each shard's entry, by index.
    pub shards: Vec<ShardMeta>,
    /// The extensions of every field packed.
    pub fields: BTreeSet<String>,
}

/// The first error of a run, and the flag that stops the rest of it.
struct Stop {
    stop: AtomicBool,
    first: Mutex<Option<ToolsError>>,
}

impl Stop {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Stops the run; the first failure is the one to report (the shards
    /// it stops fail because of it).
    fn fail(&self, error: ToolsError) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            if let Ok(mut first) = self.first.lock() {
                *first = Some(error);
            }
        }
    }
}

impl Builder {
    /// Builds and uploads every shard; call on a blocking thread (not a
    /// runtime worker): the uploads run on `handle`.
    pub fn run(&self, handle: &Handle) -> Result<Built> {
        let stop = Stop {
            stop: AtomicBool::new(false),
            first: Mutex::new(None),
        };
        let (jobs, queue) = sync_channel::<(usize, Vec<SourceSample>)>(0);
        let queue = Mutex::new(queue);
        let built = Mutex::new(Vec::with_capacity(self.plan.len()));
        let mut replay = Replay::new(self.source.as_ref(), &self.plan, &self.src);
        std::thread::scope(|scope| {
            // Dropped when this closure ends (or unwinds): the builders
            // then run out of shards and return.
            let jobs = jobs;
            for i in 0..self.options.uploads_in_flight {
                let spawned = std::thread::Builder::new()
                    .name(format!("tributary-pack-{i}"))
                    .spawn_scoped(scope, || self.build_from(&queue, handle, &stop, &built));
                if let Err(error) = spawned {
                    stop.fail(ToolsError::Config(format!(
                        "cannot start the packing threads: {error}"
                    )));
                    return;
                }
            }
            while !stop.stopped() {
                match replay.next_shard() {
                    Ok(Some(shard)) => {
                        if jobs.send(shard).is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(error) => stop.fail(error),
                }
            }
        });
        if let Some(error) = stop.first.into_inner().ok().flatten() {
            return Err(error);
        }
        let mut shards = built.into_inner().unwrap_or_default();
        if shards.len() != self.plan.len() {
            return Err(ToolsError::Stopped("shard building stopped early".into()));
        }
        shards.sort_by_key(|(index, _)| *index);
        Ok(Built {
            shards: shards.into_iter().map(|(_, meta)| meta).collect(),
            fields: replay.fields,
        })
    }

    /// One builder thread: builds the shards it takes from `queue` until
    /// there are no more.
    fn build_from(
        &self,
        queue: &Mutex<std::sync::mpsc::Receiver<(usize, Vec<SourceSample>)>>,
        handle: &Handle,
        stop: &Stop,
        built: &Mutex<Vec<(usize, ShardMeta)>>,
    ) {
        loop {
            let job = match queue.lock() {
                Ok(queue) => queue.recv(),
                Err(_) => return,
            };
            let Ok((index, samples)) = job else { return };
            if stop.stopped() {
                continue;
            }
            let name = &self.names[index];
            if let Ok(mut started) = self.started.lock() {
                started.push(name.clone());
            }
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                self.shard(name, &samples, handle, &stop.stop)
            }))
            .unwrap_or_else(|_| Err(ToolsError::Stopped(format!("{name}: the builder panicked"))));
            match result {
                Ok(meta) => {
                    if let Ok(mut built) = built.lock() {
                        built.push((index, meta));
                    }
                }
                Err(error) => stop.fail(error),
            }
        }
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
            Err(error) => Err(sink.abort().map_or(error, ToolsError::from)),
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
                return Err(ToolsError::Stopped(format!(
                    "{name}: stopped, another shard failed"
                )));
            }
            let mut data = sample
                .fields
                .iter()
                .map(read_field)
                .collect::<Result<Vec<_>>>()?;
            if let Some(transcode) = self.options.jpeg {
                for (field, data) in sample.fields.iter().zip(&mut data) {
                    let ext = &field.ext;
                    if ext.eq_ignore_ascii_case("jpg") || ext.eq_ignore_ascii_case("jpeg") {
                        if let Some(transcoded) = transcode(data) {
                            *data = std::borrow::Cow::Owned(transcoded);
                        }
                    }
                }
            }
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
