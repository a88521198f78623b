//! Filling the cache: background downloads of whole shards, at most
//! [`DEFAULT_FILLS`](super::DEFAULT_FILLS) at once per process, and the
//! reads that wait for a running fill instead of asking the store again.

use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::files::{blocking, local, Admit, FileSink, Progress, Tmp};
use super::guard::TAG;
use super::{locked, Counter, Shard, ShardCache, MAX_FILLS, MAX_PENDING};
use crate::error::{IoError, Result};
use crate::location::Location;

/// Announces a running fill's end to its readers, whatever ends it.
pub(super) struct Announced {
    cache: Arc<ShardCache>,
    entry: String,
    progress: watch::Sender<Progress>,
    committed: bool,
}

impl Drop for Announced {
    fn drop(&mut self) {
        locked(&self.cache.running).remove(&self.entry);
        self.progress.send_replace(Progress::Ended {
            committed: self.committed,
        });
    }
}

impl ShardCache {
    /// Lets at least `fills` (at most [`MAX_FILLS`]) shards fill at once,
    /// never fewer than now: a loader sizes it to its reads in flight (with
    /// 4 slots a 16-read loader's first epoch ran 68% slower than uncached).
    pub fn fill_at_least(&self, fills: usize) {
        let fills = fills.min(MAX_FILLS);
        let mut now = self.fill_slots.load(Ordering::SeqCst);
        while now < fills {
            match self
                .fill_slots
                .compare_exchange(now, fills, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => {
                    self.fills.add_permits(fills - now);
                    return;
                }
                Err(actual) => now = actual,
            }
        }
    }

    /// Fills that may run at once now.
    pub fn fill_slots(&self) -> usize {
        self.fill_slots.load(Ordering::SeqCst)
    }

    /// The range from the file this process is filling for `shard` (whose
    /// fill's `progress` [`Self::spawn_fill`] gave), once the fill has
    /// written it; `None` if it ends without the range (the store serves
    /// then).
    pub(super) async fn from_fill(
        self: &Arc<Self>,
        shard: &Shard,
        range: Range<u64>,
        mut progress: watch::Receiver<Progress>,
    ) -> Option<Bytes> {
        loop {
            let now = progress.borrow_and_update().clone();
            let read: Box<dyn FnOnce() -> io::Result<Option<Bytes>> + Send> = match now {
                Progress::Writing { written, file } if written >= range.end => {
                    let range = range.clone();
                    Box::new(move || {
                        let mut buf = vec![0; (range.end - range.start) as usize];
                        file.read_exact_at(&mut buf, range.start)?;
                        Ok(Some(Bytes::from(buf)))
                    })
                }
                Progress::Ended { committed: true } => {
                    let (this, shard, range) = (Arc::clone(self), shard.clone(), range.clone());
                    Box::new(move || this.read_local(&shard, range))
                }
                Progress::Ended { committed: false } => return None,
                Progress::Starting | Progress::Writing { .. } => {
                    // Every fill ends with `Ended`, sent before its sender
                    // goes: an error means that value was seen already.
                    if progress.changed().await.is_err() {
                        return None;
                    }
                    continue;
                }
            };
            return match tokio::task::spawn_blocking(read).await {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(error)) => {
                    self.counters.add(Counter::Errors, 1);
                    tracing::warn!(shard = %shard.name, %error, "cannot read a shard being cached; reading the store");
                    None
                }
                Err(_) => None,
            };
        }
    }

    /// Fills `shard` in the background: now if a fill slot is free, else
    /// when one frees (queued, up to [`MAX_PENDING`] shards); nothing if it
    /// is already queued or being filled in this process. The progress of
    /// the fill running for it, if one does, for [`Self::from_fill`]: taken
    /// before a fill started here can end (a small shard's fill could end,
    /// and leave `running`, before its reader looked it up: that read then
    /// went to the store beside a fill that had just cached it).
    pub(super) fn spawn_fill(
        self: &Arc<Self>,
        location: &Location,
        shard: Shard,
    ) -> Option<watch::Receiver<Progress>> {
        if !locked(&self.filling).insert(shard.entry.clone()) {
            return locked(&self.running).get(&shard.entry).cloned();
        }
        let Ok(permit) = Arc::clone(&self.fills).try_acquire_owned() else {
            let mut pending = locked(&self.pending);
            if pending.len() < MAX_PENDING {
                pending.push_back((location.clone(), shard));
            } else {
                drop(pending);
                locked(&self.filling).remove(&shard.entry);
            }
            return None;
        };
        let announced = self.announce(&shard.entry);
        let progress = announced.progress.subscribe();
        let (this, location) = (Arc::clone(self), location.clone());
        tokio::spawn(this.run_fills(permit, (location, shard, announced)));
        Some(progress)
    }

    /// Publishes the progress of a fill of `entry` starting now, for reads
    /// of it to wait on.
    fn announce(self: &Arc<Self>, entry: &str) -> Announced {
        let (progress, receiver) = watch::channel(Progress::Starting);
        locked(&self.running).insert(entry.to_owned(), receiver);
        Announced {
            cache: Arc::clone(self),
            entry: entry.to_owned(),
            progress,
            committed: false,
        }
    }

    /// The next queued shard, announced.
    fn next_pending(self: &Arc<Self>) -> Option<(Location, Shard, Announced)> {
        let (location, shard) = locked(&self.pending).pop_front()?;
        let announced = self.announce(&shard.entry);
        Some((location, shard, announced))
    }

    /// Fills `first`, then queued shards while there are any.
    async fn run_fills(
        self: Arc<Self>,
        mut permit: tokio::sync::OwnedSemaphorePermit,
        first: (Location, Shard, Announced),
    ) {
        let mut next = Some(first);
        loop {
            while let Some((location, shard, mut announced)) = next {
                let result = self.fill(&location, &shard, &mut announced).await;
                drop(announced);
                locked(&self.filling).remove(&shard.entry);
                if let Err(error) = result {
                    self.counters.add(Counter::Errors, 1);
                    tracing::warn!(%error, shard = %shard.name, "cannot cache a shard");
                }
                next = self.next_pending();
            }
            drop(permit);
            // A shard queued while this task was finishing: take it if no
            // other task will (one that holds a slot pops it when done).
            if locked(&self.pending).is_empty() {
                return;
            }
            let Ok(again) = Arc::clone(&self.fills).try_acquire_owned() else {
                return;
            };
            permit = again;
            next = self.next_pending();
        }
    }

    /// Downloads `shard` into the cache if admission lets it in, telling
    /// `announced`'s readers how far it got.
    async fn fill(
        self: &Arc<Self>,
        location: &Location,
        shard: &Shard,
        announced: &mut Announced,
    ) -> Result<()> {
        let this = Arc::clone(self);
        let (entry, bytes) = (shard.entry.clone(), shard.bytes);
        let tmp_path = self.tmp.join(&shard.entry);
        let admitted = blocking(&tmp_path, move || {
            // The object, then its tag.
            let admitted = this.admit(&entry, bytes + TAG)?;
            let reader = match &admitted {
                Admit::Write(file) => Some(file.try_clone()?),
                _ => None,
            };
            Ok((admitted, reader))
        })
        .await?;
        let (file, reader) = match admitted {
            (Admit::Write(file), Some(reader)) => (file, reader),
            (other, _) => {
                // On disk already (readers here check it), being written
                // by another process, or no room: readers here go to the
                // store.
                announced.committed = matches!(other, Admit::Exists);
                return Ok(());
            }
        };
        // Deletes the file unless it is committed (also when this task is
        // dropped, e.g. at runtime shutdown).
        let mut tmp = Tmp(Some(tmp_path.clone()));
        let sink = FileSink {
            file: tokio::fs::File::from_std(file),
            crc32c: 0,
            digest: self.seal.start(&shard.entry),
            checked_from: shard.checked_from,
            path: tmp_path.clone(),
            written: 0,
            reader: Arc::new(reader),
            progress: announced.progress.clone(),
        };
        let mut sink = location
            .get_range_into(&shard.name, 0..shard.bytes, sink)
            .await?;
        sink.file.flush().await.map_err(|e| local(&tmp_path, e))?;
        let file = sink.file.into_std().await;
        if sink.crc32c != shard.crc32c {
            return Err(IoError::Cache {
                path: location.url_of(&shard.name),
                reason: format!(
                    "the object's crc32c is {:08x}, the manifest says {:08x}",
                    sink.crc32c, shard.crc32c
                ),
            });
        }
        let tag = sink.digest.sign();
        let this = Arc::clone(self);
        let (entry, bytes) = (shard.entry.clone(), shard.bytes);
        let file = blocking(&tmp_path, move || {
            file.write_all_at(tag.as_ref(), bytes)?;
            this.commit(&entry, file)
        })
        .await?;
        tmp.0 = None;
        self.keep(&shard.entry, file);
        announced.committed = true;
        self.counters.add(Counter::Fills, 1);
        self.counters.add(Counter::FillBytes, shard.bytes);
        Ok(())
    }
}
