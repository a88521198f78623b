//! Writing objects of any size: one PUT up to a limit, a multipart upload
//! above it, with a hard bound on memory.
//!
//! An [`Upload`] takes bytes as they are made (a shard as it is packed) and
//! cuts them into parts of [`UploadOptions::part_bytes`]:
//!
//! - an object of at most [`UploadOptions::single_put_limit`] bytes is
//!   written with one PUT ([`Location::put`]'s retries), as before;
//! - a larger one becomes a multipart upload, up to
//!   [`UploadOptions::parts_in_flight`] parts sent at once, each part retried
//!   alone on transient failures under the location's
//!   `RetryPolicy` (stores that number parts
//!   themselves, the local filesystem, get no per-part retries: their
//!   failures are not transient);
//! - an upload that fails, is aborted or is dropped unfinished aborts its
//!   multipart upload: no object appears and no parts are left behind
//!   (unless the abort itself fails, which is logged: a bucket lifecycle rule
//!   for incomplete multipart uploads is the backstop).
//!
//! **Memory.** The bytes an upload holds (the part being filled, parts
//! waiting for a slot, parts in flight) never exceed
//! [`UploadOptions::memory_bound`] =
//! `max(single_put_limit, part_bytes × parts_in_flight) + part_bytes`:
//! [`Upload::write`] waits for a part to finish before it starts a new one.
//! An [`UploadMeter`] counts them (and the most ever held), shared by as many
//! uploads as the caller likes.
//!
//! **Limits.** S3 (and what imitates it) takes parts of 5 MiB to 5 GiB
//! (the last may be smaller), at most 10,000 of them, and single PUTs of at
//! most 5 GiB; GCS and Azure take as much or more. [`UploadOptions::new`]
//! holds every store to S3's limits, so options that work on one work on
//! all, and an object that would need more parts is an error that says so.
//!
//! [`BlockingUpload`] is the same upload as a [`std::io::Write`], for code
//! on a blocking thread: a shard built on rayon streams into it.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartId, MultipartUpload, ObjectStoreExt, PutMultipartOptions, PutPayload};
use tokio::runtime::Handle;
use tokio::task::JoinSet;

use crate::error::{IoError, Result};
use crate::location::Location;
use crate::read::{retry, RetryPolicy};

use options::Held;
pub use options::{
    UploadMeter, UploadOptions, MAX_PARTS, MAX_PARTS_IN_FLIGHT, MAX_PART_BYTES,
    MAX_SINGLE_PUT_BYTES, MIN_PART_BYTES,
};

mod options;

/// A full part (or the last one) and the memory it holds.
#[derive(Debug)]
struct Chunk {
    data: Bytes,
    _held: Held,
}

/// Called with the bytes of each part (or single PUT) once it is stored.
pub type OnUploaded = Arc<dyn Fn(u64) + Send + Sync>;

/// What a finished upload wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uploaded {
    pub bytes: u64,
    /// Parts of the multipart upload; 0: one PUT.
    pub parts: u64,
}

/// Where parts go.
enum Target {
    /// Parts numbered here, each retried alone (S3, GCS, Azure, memory).
    Numbered {
        store: Arc<dyn MultipartStore>,
        id: MultipartId,
        ids: Arc<Mutex<Vec<Option<PartId>>>>,
    },
    /// Parts numbered by the store's own upload (the local filesystem): a
    /// part cannot be sent twice, so a failed part fails the upload.
    Sequential(Box<dyn MultipartUpload>),
}

/// A multipart upload in progress.
struct Multipart {
    target: Target,
    in_flight: JoinSet<Result<()>>,
    next: usize,
}

/// One object being written; see the module docs. Finish it with
/// [`Upload::finish`]; an upload dropped unfinished is aborted.
pub struct Upload {
    dest: Location,
    name: String,
    path: Path,
    url: String,
    options: UploadOptions,
    meter: Arc<UploadMeter>,
    on_uploaded: Option<OnUploaded>,
    /// The part being filled (capacity at most one part).
    filling: Vec<u8>,
    filling_held: Held,
    /// Full parts not yet sent.
    waiting: Vec<Chunk>,
    written: u64,
    multipart: Option<Multipart>,
    done: bool,
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upload")
            .field("url", &self.url)
            .field("written", &self.written)
            .field("multipart", &self.multipart.is_some())
            .finish()
    }
}

impl Upload {
    /// An upload of object `name` under `dest`, counting its memory on
    /// `meter`.
    pub fn new(
        dest: &Location,
        name: &str,
        options: UploadOptions,
        meter: Arc<UploadMeter>,
    ) -> Self {
        Self {
            dest: dest.clone(),
            name: name.to_owned(),
            path: dest.path(name),
            url: dest.url_of(name),
            options,
            filling: Vec::new(),
            filling_held: Held::new(&meter),
            meter,
            on_uploaded: None,
            waiting: Vec::new(),
            written: 0,
            multipart: None,
            done: false,
        }
    }

    /// Calls `f` with the bytes of each part once it is stored.
    pub fn on_uploaded(mut self, f: OnUploaded) -> Self {
        self.on_uploaded = Some(f);
        self
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends `data`, waiting for room when parts are in flight.
    pub async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let n = self.fill(data);
            data = &data[n..];
            if self.filling.len() == self.options.part_bytes() {
                self.seal().await?;
            }
        }
        Ok(())
    }

    /// Copies what fits of `data` into the part being filled; returns how
    /// many bytes that was. The buffer grows by doubling, up to one part.
    fn fill(&mut self, data: &[u8]) -> usize {
        let n = (self.options.part_bytes() - self.filling.len()).min(data.len());
        let need = self.filling.len() + n;
        if need > self.filling.capacity() {
            let target = need
                .max(self.filling.capacity() * 2)
                .max(64 << 10)
                .min(self.options.part_bytes());
            self.filling.reserve_exact(target - self.filling.len());
            self.filling_held.set(self.filling.capacity() as u64);
        }
        self.filling.extend_from_slice(&data[..n]);
        self.written += n as u64;
        n
    }

    fn take_filling(&mut self) -> Chunk {
        let held = std::mem::replace(&mut self.filling_held, Held::new(&self.meter));
        Chunk {
            data: Bytes::from(std::mem::take(&mut self.filling)),
            _held: held,
        }
    }

    /// The part being filled is full: it waits, or goes out.
    async fn seal(&mut self) -> Result<()> {
        let chunk = self.take_filling();
        self.waiting.push(chunk);
        if self.multipart.is_some() || self.written > self.options.single_put_limit() {
            self.send_waiting().await?;
        }
        Ok(())
    }

    /// Starts the multipart upload if need be and sends the waiting parts,
    /// each once a slot is free.
    async fn send_waiting(&mut self) -> Result<()> {
        if self.multipart.is_none() {
            self.multipart = Some(self.start().await?);
        }
        for chunk in std::mem::take(&mut self.waiting) {
            self.send(chunk).await?;
        }
        Ok(())
    }

    async fn start(&self) -> Result<Multipart> {
        let path = &self.path;
        let target = match &self.dest.multipart {
            Some(store) => {
                let id =
                    retry(&self.url, &self.dest.retry, || store.create_multipart(path)).await?;
                Target::Numbered {
                    store: Arc::clone(store),
                    id,
                    ids: Arc::default(),
                }
            }
            None => {
                let upload = retry(&self.url, &self.dest.retry, || {
                    self.dest
                        .store
                        .put_multipart_opts(path, PutMultipartOptions::default())
                })
                .await?;
                Target::Sequential(upload)
            }
        };
        tracing::debug!(url = %self.url, "multipart upload started");
        Ok(Multipart {
            target,
            in_flight: JoinSet::new(),
            next: 0,
        })
    }

    /// Sends one part once fewer than `parts_in_flight` are in flight.
    async fn send(&mut self, chunk: Chunk) -> Result<()> {
        let Some(multipart) = self.multipart.as_mut() else {
            return Err(self.failed("a part was sent before the upload started".into()));
        };
        while multipart.in_flight.len() >= self.options.parts_in_flight() {
            join_one(&mut multipart.in_flight, &self.url).await?;
        }
        let index = multipart.next;
        if index as u64 >= MAX_PARTS {
            let reason = format!(
                "the object needs more than {MAX_PARTS} parts of {} bytes: raise the part size",
                self.options.part_bytes()
            );
            return Err(self.failed(reason));
        }
        multipart.next += 1;
        let bytes = chunk.data.len() as u64;
        let url = format!("{} (part {})", self.url, index + 1);
        let (meter, on_uploaded) = (Arc::clone(&self.meter), self.on_uploaded.clone());
        let stored = move || {
            meter.parts.fetch_add(1, Ordering::SeqCst);
            if let Some(f) = on_uploaded {
                f(bytes);
            }
        };
        match &mut multipart.target {
            Target::Numbered { store, id, ids } => {
                let (store, id, ids) = (Arc::clone(store), id.clone(), Arc::clone(ids));
                let (path, policy) = (self.path.clone(), self.dest.retry.clone());
                multipart.in_flight.spawn(async move {
                    let part = retry(&url, &policy, || {
                        let (store, path, id) = (&store, &path, &id);
                        let payload = PutPayload::from(chunk.data.clone());
                        async move { store.put_part(path, id, index, payload).await }
                    })
                    .await?;
                    drop(chunk);
                    if let Ok(mut ids) = ids.lock() {
                        if ids.len() <= index {
                            ids.resize(index + 1, None);
                        }
                        ids[index] = Some(part);
                    }
                    stored();
                    Ok(())
                });
            }
            Target::Sequential(upload) => {
                let put = upload.put_part(PutPayload::from(chunk.data.clone()));
                multipart.in_flight.spawn(async move {
                    put.await.map_err(|error| IoError::store(url, error))?;
                    drop(chunk);
                    stored();
                    Ok(())
                });
            }
        }
        Ok(())
    }

    fn failed(&self, reason: String) -> IoError {
        IoError::Upload {
            url: self.url.clone(),
            reason,
        }
    }

    /// Writes what is left and completes the object; on failure, aborts.
    pub async fn finish(mut self) -> Result<Uploaded> {
        let finished = self.try_finish().await;
        if finished.is_err() {
            self.abort_now().await;
        }
        self.done = true;
        finished
    }

    async fn try_finish(&mut self) -> Result<Uploaded> {
        if self.multipart.is_none() && self.written <= self.options.single_put_limit() {
            let mut chunks = std::mem::take(&mut self.waiting);
            chunks.push(self.take_filling());
            let payload: PutPayload = chunks.iter().map(|c| c.data.clone()).collect();
            self.dest.put_payload(&self.name, payload).await?;
            drop(chunks);
            if let Some(f) = &self.on_uploaded {
                f(self.written);
            }
            return Ok(Uploaded {
                bytes: self.written,
                parts: 0,
            });
        }
        if !self.filling.is_empty() {
            let chunk = self.take_filling();
            self.waiting.push(chunk);
        }
        self.send_waiting().await?;
        let Some(multipart) = self.multipart.as_mut() else {
            return Err(self.failed("no multipart upload to complete".into()));
        };
        while !multipart.in_flight.is_empty() {
            join_one(&mut multipart.in_flight, &self.url).await?;
        }
        let parts = multipart.next as u64;
        match &mut multipart.target {
            Target::Numbered { store, id, ids } => {
                let ids = ids.lock().map(|ids| ids.clone()).unwrap_or_default();
                let ids: Option<Vec<PartId>> = ids.into_iter().collect();
                let ids = match ids {
                    Some(ids) if ids.len() == multipart.next => ids,
                    _ => {
                        let reason = format!("not all {parts} parts were recorded");
                        return Err(IoError::Upload {
                            url: self.url.clone(),
                            reason,
                        });
                    }
                };
                let (store, path, id) = (&*store, &self.path, &*id);
                let (dest, url, written) = (&self.dest, &self.url, self.written);
                let before = object_version(dest, path, url).await?;
                let completed = retry(url, &dest.retry, || {
                    store.complete_multipart(path, id, ids.clone())
                })
                .await;
                if let Err(error) = completed {
                    // A complete whose reply was lost is sent again and
                    // finds no upload: it went through if the object is
                    // now ours, a new version of our size.
                    let after = object_version(dest, path, url).await?;
                    if after.is_none()
                        || after == before
                        || after.as_ref().map(|v| v.0) != Some(written)
                    {
                        return Err(error);
                    }
                    tracing::info!(%url, %error, "the multipart upload had completed (its reply was lost)");
                }
            }
            Target::Sequential(upload) => {
                upload
                    .complete()
                    .await
                    .map_err(|error| IoError::store(self.url.clone(), error))?;
            }
        }
        self.multipart = None;
        Ok(Uploaded {
            bytes: self.written,
            parts,
        })
    }

    /// Drops what is buffered and aborts the multipart upload, if one was
    /// started: no object, no parts left.
    pub async fn abort(mut self) {
        self.abort_now().await;
        self.done = true;
    }

    async fn abort_now(&mut self) {
        self.waiting.clear();
        drop(self.take_filling());
        if let Some(multipart) = self.multipart.take() {
            abort(multipart, &self.path, &self.url, &self.dest.retry).await;
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        let Some(multipart) = self.multipart.take() else {
            return;
        };
        if self.done {
            return;
        }
        let (path, url, policy) = (self.path.clone(), self.url.clone(), self.dest.retry.clone());
        match Handle::try_current() {
            Ok(handle) => {
                tracing::warn!(%url, "an unfinished upload was dropped; aborting it");
                handle.spawn(async move { abort(multipart, &path, &url, &policy).await });
            }
            Err(_) => tracing::warn!(
                %url,
                "an unfinished upload was dropped outside a runtime; its parts are left"
            ),
        }
    }
}

/// Waits for one part in flight; its failure fails the upload.
async fn join_one(in_flight: &mut JoinSet<Result<()>>, url: &str) -> Result<()> {
    match in_flight.join_next().await {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(error))) => Err(error),
        Some(Err(error)) => Err(IoError::Upload {
            url: url.to_owned(),
            reason: format!("a part's task failed: {error}"),
        }),
    }
}

/// Stops the parts in flight and aborts the multipart upload.
async fn abort(mut multipart: Multipart, path: &Path, url: &str, policy: &RetryPolicy) {
    multipart.in_flight.shutdown().await;
    let aborted = match &mut multipart.target {
        Target::Numbered { store, id, .. } => {
            retry(url, policy, || store.abort_multipart(path, id)).await
        }
        Target::Sequential(upload) => upload
            .abort()
            .await
            .map_err(|error| IoError::store(url, error)),
    };
    match aborted {
        Ok(()) => tracing::debug!(%url, "multipart upload aborted"),
        Err(error) => tracing::warn!(
            %url, %error,
            "cannot abort the multipart upload; its parts stay until a lifecycle rule removes them"
        ),
    }
}

/// An [`Upload`] as a [`std::io::Write`] for a blocking thread (not a
/// runtime worker): writes copy into the part being filled and block on
/// `handle` only when a full part waits for a slot.
#[derive(Debug)]
pub struct BlockingUpload {
    upload: Upload,
    handle: Handle,
    error: Option<IoError>,
}

impl BlockingUpload {
    pub fn new(upload: Upload, handle: Handle) -> Self {
        Self {
            upload,
            handle,
            error: None,
        }
    }

    /// Completes the object (see [`Upload::finish`]).
    pub fn finish(self) -> Result<Uploaded> {
        let Self {
            upload,
            handle,
            error,
        } = self;
        match error {
            Some(error) => {
                handle.block_on(upload.abort());
                Err(error)
            }
            None => handle.block_on(upload.finish()),
        }
    }

    /// Aborts the upload; returns the error that broke a write, if one did
    /// (a caller that saw the write fail reports this, the store's error).
    pub fn abort(self) -> Option<IoError> {
        self.handle.block_on(self.upload.abort());
        self.error
    }
}

impl std::io::Write for BlockingUpload {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(error) = &self.error {
            return Err(std::io::Error::other(error.to_string()));
        }
        let n = self.upload.fill(buf);
        if self.upload.filling.len() == self.upload.options.part_bytes() {
            if let Err(error) = self.handle.block_on(self.upload.seal()) {
                let io = std::io::Error::other(error.to_string());
                self.error = Some(error);
                return Err(io);
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Object `path`'s size and version (ETag, else its version, else its
/// modification time) as the store at `dest` has it now, `None` if absent.
async fn object_version(dest: &Location, path: &Path, url: &str) -> Result<Option<(u64, String)>> {
    let store = &dest.store;
    match retry(url, &dest.retry, || store.head(path)).await {
        Ok(meta) => {
            let version = meta
                .e_tag
                .or(meta.version)
                .unwrap_or_else(|| meta.last_modified.to_rfc3339());
            Ok(Some((meta.size, version)))
        }
        Err(error) if error.is_not_found() => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
