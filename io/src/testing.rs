//! A store wrapper that calls hooks around the requests it forwards: the
//! request counter tests assert I/O with, and the fault injectors tests break
//! uploads and reads with, share this one delegation.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartId, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Hooks an [`InterceptStore`] calls.
pub trait Intercept: fmt::Debug + Send + Sync + 'static {
    /// Before a PUT of `bytes` bytes to `location`; an error fails the PUT.
    fn before_put(&self, _location: &Path, _bytes: u64) -> object_store::Result<()> {
        Ok(())
    }

    /// Before part `part` (0-based) of `bytes` bytes of a multipart upload
    /// to `location` is sent by number ([`MultipartStore::put_part`]); an
    /// error fails that attempt.
    fn before_put_part(
        &self,
        _location: &Path,
        _part: usize,
        _bytes: u64,
    ) -> object_store::Result<()> {
        Ok(())
    }

    /// After a multipart upload to `location` was completed or aborted.
    fn after_multipart(&self, _location: &Path, _completed: bool) {}

    /// Before a multipart upload to `location` is completed; an error fails
    /// that attempt (nothing completed).
    fn before_complete(&self, _location: &Path) -> object_store::Result<()> {
        Ok(())
    }

    /// The reply to a complete that went through: an error stands for a
    /// reply lost on the way back (the object is there all the same).
    fn complete_reply(&self, _location: &Path) -> object_store::Result<()> {
        Ok(())
    }

    /// Before a GET of `location` with `options`; an error fails the GET.
    fn before_get(&self, _location: &Path, _options: &GetOptions) -> object_store::Result<()> {
        Ok(())
    }

    /// After a successful GET request that returned `bytes` bytes.
    fn after_get(&self, _location: &Path, _bytes: u64) {}

    /// The response of a successful GET, on its way to the caller: a fault
    /// injector cuts, stalls or pads its body here.
    fn get_result(&self, _location: &Path, result: GetResult) -> object_store::Result<GetResult> {
        Ok(result)
    }
}

/// Forwards every request to `inner`, calling `hooks` around PUTs and GETs.
pub struct InterceptStore<H> {
    inner: Arc<dyn ObjectStore>,
    /// `inner` when it takes parts by number ([`InterceptStore::with_parts`]).
    parts: Option<Arc<dyn MultipartStore>>,
    pub hooks: H,
}

impl<H: Intercept> InterceptStore<H> {
    pub fn new(inner: Arc<dyn ObjectStore>, hooks: H) -> Self {
        Self {
            inner,
            parts: None,
            hooks,
        }
    }

    /// Wraps a store that takes parts by number: this one does too, calling
    /// [`Intercept::before_put_part`] before each (wrap it in a `Location`
    /// with `Location::from_multipart_store`).
    pub fn with_parts<S: ObjectStore + MultipartStore>(inner: Arc<S>, hooks: H) -> Self {
        Self {
            inner: inner.clone(),
            parts: Some(inner),
            hooks,
        }
    }

    fn parts(&self) -> object_store::Result<&dyn MultipartStore> {
        self.parts
            .as_deref()
            .ok_or_else(|| object_store::Error::NotImplemented {
                operation: "multipart parts by number".into(),
                implementer: "an InterceptStore made with `new`".into(),
            })
    }
}

#[async_trait::async_trait]
impl<H: Intercept> MultipartStore for InterceptStore<H> {
    async fn create_multipart(&self, path: &Path) -> object_store::Result<MultipartId> {
        self.parts()?.create_multipart(path).await
    }

    async fn put_part(
        &self,
        path: &Path,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> object_store::Result<PartId> {
        self.hooks
            .before_put_part(path, part_idx, data.content_length() as u64)?;
        self.parts()?.put_part(path, id, part_idx, data).await
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> object_store::Result<PutResult> {
        self.hooks.before_complete(path)?;
        let result = self.parts()?.complete_multipart(path, id, parts).await?;
        self.hooks.after_multipart(path, true);
        self.hooks.complete_reply(path)?;
        Ok(result)
    }

    async fn abort_multipart(&self, path: &Path, id: &MultipartId) -> object_store::Result<()> {
        self.parts()?.abort_multipart(path, id).await?;
        self.hooks.after_multipart(path, false);
        Ok(())
    }
}

impl<H: fmt::Debug> fmt::Debug for InterceptStore<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InterceptStore")
            .field("inner", &self.inner)
            .field("parts", &self.parts.is_some())
            .field("hooks", &self.hooks)
            .finish()
    }
}

impl<H> fmt::Display for InterceptStore<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Intercept({})", self.inner)
    }
}

#[async_trait::async_trait]
impl<H: Intercept> ObjectStore for InterceptStore<H> {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.hooks
            .before_put(location, payload.content_length() as u64)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.hooks.before_get(location, &options)?;
        let result = self.inner.get_opts(location, options).await?;
        self.hooks
            .after_get(location, result.range.end - result.range.start);
        self.hooks.get_result(location, result)
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let out = self.inner.get_ranges(location, ranges).await?;
        for bytes in &out {
            self.hooks.after_get(location, bytes.len() as u64);
        }
        Ok(out)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// Request and byte counters: wrap a store in a [`CountingStore`] and
/// assert on the I/O a read causes.
#[derive(Debug, Default)]
pub struct IoCounters {
    pub gets: AtomicU64,
    pub get_bytes: AtomicU64,
    pub puts: AtomicU64,
    pub put_bytes: AtomicU64,
    /// Multipart parts sent by number (attempts, failed ones included).
    pub parts: AtomicU64,
    pub completed: AtomicU64,
    pub aborted: AtomicU64,
}

impl IoCounters {
    /// `(GET requests, bytes read)` so far.
    pub fn reads(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::Relaxed),
            self.get_bytes.load(Ordering::Relaxed),
        )
    }
}

impl Intercept for IoCounters {
    fn before_put(&self, _location: &Path, bytes: u64) -> object_store::Result<()> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.put_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn before_put_part(
        &self,
        _location: &Path,
        _part: usize,
        bytes: u64,
    ) -> object_store::Result<()> {
        self.parts.fetch_add(1, Ordering::Relaxed);
        self.put_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn after_multipart(&self, _location: &Path, completed: bool) {
        let counter = if completed {
            &self.completed
        } else {
            &self.aborted
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn after_get(&self, _location: &Path, bytes: u64) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.get_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A store that counts its requests.
pub type CountingStore = InterceptStore<IoCounters>;

impl CountingStore {
    /// Wraps `inner` with fresh counters.
    pub fn counting(inner: Arc<dyn ObjectStore>) -> Self {
        Self::new(inner, IoCounters::default())
    }

    /// Wraps `inner`, which takes parts by number, with fresh counters.
    pub fn counting_parts<S: ObjectStore + MultipartStore>(inner: Arc<S>) -> Self {
        Self::with_parts(inner, IoCounters::default())
    }
}

/// `n` bytes of noise (incompressible, no two parts of an upload alike),
/// different for each `seed`: xorshift64, the low byte of each step.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
