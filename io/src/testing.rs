//! A store wrapper that calls hooks around the requests it forwards: the
//! request counter tests assert I/O with, and the fault injectors tests break
//! uploads and reads with, share this one delegation.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// Hooks an [`InterceptStore`] calls.
pub trait Intercept: fmt::Debug + Send + Sync + 'static {
    /// Before a PUT of `bytes` bytes to `location`; an error fails the PUT.
    fn before_put(&self, _location: &Path, _bytes: u64) -> object_store::Result<()> {
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
#[derive(Debug)]
pub struct InterceptStore<H> {
    inner: Arc<dyn ObjectStore>,
    pub hooks: H,
}

impl<H: Intercept> InterceptStore<H> {
    pub fn new(inner: Arc<dyn ObjectStore>, hooks: H) -> Self {
        Self { inner, hooks }
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
}
