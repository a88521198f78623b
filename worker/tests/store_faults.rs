//! Reads through a store that breaks them: errors before a body, bodies cut
//! by an error, cut short cleanly, stalled or too long. Reads resume from the
//! first missing byte, give the bytes (and samples) of a clean read, and
//! give up after their retry budget with an error that names the object,
//! the range and the attempts.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, GetResult, GetResultPayload, ObjectStoreExt};
use tributary_common::manifest::Compression;
use tributary_common::plan::span::{Span, SpanSet};
use tributary_common::sample::Sample;
use tributary_io::testing::{Intercept, InterceptStore};
use tributary_io::{IoError, RetryPolicy};
use tributary_tests::dataset::pack_local;
use tributary_tools::pack::PackOptions;
use tributary_worker::pipeline::fetch::FetchConfig;
use tributary_worker::pipeline::metrics::Metrics;
use tributary_worker::pipeline::span_samples;
use tributary_worker::{Dataset, Location, WorkerError};

/// One way to break a GET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Fail before any body (a 5xx, a refused connection).
    Error,
    /// Deliver this many bytes, then fail (a reset mid-body).
    CutAfter(usize),
    /// Deliver this many bytes, then end cleanly (a short body).
    EndAfter(usize),
    /// Deliver this many bytes, then nothing, ever.
    StallAfter(usize),
    /// Deliver the body and this many bytes more.
    Pad(usize),
    /// Deliver this many bytes, then more bytes than the range has left.
    Overrun(usize),
    /// Deliver this many bytes, replace the object, then fail.
    CutAndReplace(usize),
}

/// Breaks GETs: the queued faults first, then every `every`-th GET with
/// the faults of `cycle` in turn. Logs what each GET asked for.
#[derive(Debug, Default)]
struct Breaker {
    queue: Mutex<VecDeque<Fault>>,
    always: Option<Fault>,
    every: u64,
    cycle: Vec<Fault>,
    gets: AtomicU64,
    /// Faults decided in `before_get`, applied in `get_result`.
    pending: Mutex<VecDeque<Fault>>,
    /// With `every`: the reads (path, end of range) already given a fault;
    /// a read and its resumptions get at most one, so that however
    /// concurrent reads interleave, none runs out of attempts.
    faulted_reads: Mutex<HashSet<(String, u64)>>,
    /// With `every`: faults for the request of this (path, range), which
    /// concurrent requests must not take from one another.
    pending_for: Mutex<HashMap<(String, u64, u64), Fault>>,
    /// With `every`: the faults injected, in order.
    injected: Mutex<Vec<Fault>>,
    asked: Mutex<Vec<(Option<GetRange>, Option<String>)>>,
    /// The store that `CutAndReplace` replaces `ds/blob` in.
    inner: Option<Arc<InMemory>>,
}

impl Breaker {
    fn queued(faults: &[Fault]) -> Self {
        Self {
            queue: Mutex::new(faults.iter().copied().collect()),
            ..Self::default()
        }
    }

    /// With `every`: the fault for a bounded range read of `path`, if it
    /// is the `every`-th read and no fault has hit this read yet.
    fn read_fault(&self, path: &Path, range: &std::ops::Range<u64>) -> Option<Fault> {
        let n = self.gets.fetch_add(1, Ordering::Relaxed);
        if n % self.every != self.every - 1 {
            return None;
        }
        let read = (path.to_string(), range.end);
        if !self.faulted_reads.lock().expect("lock").insert(read) {
            return None;
        }
        let mut injected = self.injected.lock().expect("lock");
        let fault = self.cycle[injected.len() % self.cycle.len()];
        injected.push(fault);
        Some(fault)
    }

    fn next_fault(&self) -> Option<Fault> {
        let n = self.gets.fetch_add(1, Ordering::Relaxed);
        if let Some(fault) = self.queue.lock().expect("lock").pop_front() {
            return Some(fault);
        }
        if self.always.is_some() {
            return self.always;
        }
        if self.every > 0 && n % self.every == self.every - 1 {
            let turn = (n / self.every) as usize % self.cycle.len();
            return Some(self.cycle[turn]);
        }
        None
    }

    fn asked(&self) -> Vec<(Option<GetRange>, Option<String>)> {
        self.asked.lock().expect("lock").clone()
    }
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "breaker",
        source: format!("injected {what}").into(),
    }
}

/// The first `n` bytes of `body`.
fn first(
    body: BoxStream<'static, object_store::Result<Bytes>>,
    n: usize,
) -> BoxStream<'static, object_store::Result<Bytes>> {
    stream::unfold((body, n), |(mut body, left)| async move {
        if left == 0 {
            return None;
        }
        match body.next().await? {
            Ok(bytes) => {
                let take = bytes.len().min(left);
                Some((Ok(bytes.slice(..take)), (body, left - take)))
            }
            Err(error) => Some((Err(error), (body, 0))),
        }
    })
    .boxed()
}

impl Intercept for Breaker {
    fn before_get(&self, location: &Path, options: &GetOptions) -> object_store::Result<()> {
        self.asked
            .lock()
            .expect("lock")
            .push((options.range.clone(), options.if_match.clone()));
        if let (true, Some(GetRange::Bounded(range))) = (self.every > 0, &options.range) {
            return match self.read_fault(location, range) {
                Some(Fault::Error) => Err(injected("503")),
                Some(fault) => {
                    let key = (location.to_string(), range.start, range.end);
                    self.pending_for.lock().expect("lock").insert(key, fault);
                    Ok(())
                }
                None => Ok(()),
            };
        }
        match self.next_fault() {
            Some(Fault::Error) => Err(injected("503")),
            Some(fault) => {
                self.pending.lock().expect("lock").push_back(fault);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn get_result(&self, location: &Path, result: GetResult) -> object_store::Result<GetResult> {
        let key = (location.to_string(), result.range.start, result.range.end);
        let keyed = self.pending_for.lock().expect("lock").remove(&key);
        let Some(fault) = keyed.or_else(|| {
            if self.every > 0 {
                return None;
            }
            self.pending.lock().expect("lock").pop_front()
        }) else {
            return Ok(result);
        };
        let GetResult {
            meta,
            range,
            attributes,
            extensions,
            payload,
        } = result;
        let body = GetResult {
            payload,
            meta: meta.clone(),
            range: range.clone(),
            attributes: attributes.clone(),
            extensions: extensions.clone(),
        }
        .into_stream();
        let body = match fault {
            Fault::Error => unreachable!("failed in before_get"),
            Fault::CutAfter(n) => first(body, n)
                .chain(stream::once(async { Err(injected("connection reset")) }))
                .boxed(),
            Fault::EndAfter(n) => first(body, n),
            Fault::StallAfter(n) => first(body, n).chain(stream::pending()).boxed(),
            Fault::Pad(n) => body
                .chain(stream::once(async move { Ok(Bytes::from(vec![0xAA; n])) }))
                .boxed(),
            Fault::Overrun(n) => {
                let len = (range.end - range.start) as usize;
                first(body, n)
                    .chain(stream::once(
                        async move { Ok(Bytes::from(vec![0xAA; len])) },
                    ))
                    .boxed()
            }
            Fault::CutAndReplace(n) => {
                let inner = self
                    .inner
                    .clone()
                    .expect("a store to replace the object in");
                first(body, n)
                    .chain(stream::once(async move {
                        inner
                            .put(&Path::from("ds/blob"), vec![1u8; 100_000].into())
                            .await?;
                        Err(injected("connection reset"))
                    }))
                    .boxed()
            }
        };
        Ok(GetResult {
            payload: GetResultPayload::Stream(body),
            meta,
            range,
            attributes,
            extensions,
        })
    }
}

/// Fast retries, so that tests that exhaust them stay fast.
fn quick() -> RetryPolicy {
    RetryPolicy {
        attempts: 4,
        first_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
        stall_timeout: Duration::from_secs(5),
    }
}

const OBJECT: &str = "blob";

fn content() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// An in-memory store holding [`content`] at `ds/blob`, behind `breaker`.
async fn broken(breaker: Breaker) -> (Arc<InterceptStore<Breaker>>, Location) {
    let inner = Arc::new(InMemory::new());
    inner
        .put(&Path::from("ds/blob"), content().into())
        .await
        .expect("put");
    let store = Arc::new(InterceptStore::new(inner, breaker));
    let location = Location::from_store(store.clone(), "ds", "memory:///ds").with_retry(quick());
    (store, location)
}

fn range(asked: &Option<GetRange>) -> Option<std::ops::Range<u64>> {
    match asked {
        Some(GetRange::Bounded(r)) => Some(r.clone()),
        None => None,
        other => panic!("unexpected range request {other:?}"),
    }
}

#[tokio::test]
async fn a_read_cut_by_a_reset_resumes_from_the_first_missing_byte() {
    let (store, location) = broken(Breaker::queued(&[Fault::CutAfter(3000)])).await;
    let data = location
        .get_range(OBJECT, 1000..90_000)
        .await
        .expect("read");
    assert_eq!(&data[..], &content()[1000..90_000]);
    let asked = store.hooks.asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(range(&asked[0].0), Some(1000..90_000));
    assert_eq!(asked[0].1, None, "the first request pins no version");
    assert_eq!(
        range(&asked[1].0),
        Some(4000..90_000),
        "the retry asks only for what is missing"
    );
    assert!(
        asked[1].1.is_some(),
        "the retry pins the first response's ETag"
    );
}

#[tokio::test]
async fn a_body_that_ends_short_is_resumed_not_returned() {
    let (store, location) =
        broken(Breaker::queued(&[Fault::EndAfter(10), Fault::EndAfter(0)])).await;
    let data = location.get_range(OBJECT, 0..50_000).await.expect("read");
    assert_eq!(&data[..], &content()[..50_000]);
    let ranges: Vec<_> = store.hooks.asked().iter().map(|a| range(&a.0)).collect();
    assert_eq!(
        ranges,
        [Some(0..50_000), Some(10..50_000), Some(10..50_000)]
    );
}

#[tokio::test]
async fn a_read_stops_at_the_end_of_its_range_whatever_follows() {
    let (store, location) = broken(Breaker::queued(&[Fault::Pad(5)])).await;
    let data = location.get_range(OBJECT, 100..200).await.expect("read");
    assert_eq!(&data[..], &content()[100..200]);
    assert_eq!(store.hooks.asked().len(), 1, "complete before the padding");
}

#[tokio::test]
async fn a_body_that_overruns_its_range_is_read_again_from_where_it_was_right() {
    let (store, location) = broken(Breaker::queued(&[Fault::Overrun(64)])).await;
    let data = location.get_range(OBJECT, 100..5000).await.expect("read");
    assert_eq!(&data[..], &content()[100..5000]);
    let ranges: Vec<_> = store.hooks.asked().iter().map(|a| range(&a.0)).collect();
    assert_eq!(ranges, [Some(100..5000), Some(164..5000)]);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_body_is_abandoned_and_resumed() {
    let (store, location) = broken(Breaker::queued(&[Fault::StallAfter(700)])).await;
    let started = tokio::time::Instant::now();
    let data = location.get_range(OBJECT, 0..20_000).await.expect("read");
    assert_eq!(&data[..], &content()[..20_000]);
    assert!(
        started.elapsed() >= quick().stall_timeout,
        "waited for the stall timeout"
    );
    let ranges: Vec<_> = store.hooks.asked().iter().map(|a| range(&a.0)).collect();
    assert_eq!(ranges, [Some(0..20_000), Some(700..20_000)]);
}

#[tokio::test]
async fn reads_give_up_after_their_budget_naming_object_range_and_attempts() {
    let breaker = Breaker {
        always: Some(Fault::CutAfter(100)),
        ..Breaker::default()
    };
    let (store, location) = broken(breaker).await;
    let error = location
        .get_range(OBJECT, 1000..9000)
        .await
        .expect_err("every attempt breaks");
    assert!(
        matches!(
            error,
            IoError::ReadFailed {
                attempts: 4,
                received: 400,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    for part in [
        "memory:///ds/blob",
        "bytes 1000..9000",
        "after 4 attempts",
        "400 of 8000 bytes received",
        "injected connection reset",
    ] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
    assert_eq!(store.hooks.asked().len(), 4);
}

#[tokio::test]
async fn errors_before_any_body_also_give_up_after_the_budget() {
    let breaker = Breaker {
        always: Some(Fault::Error),
        ..Breaker::default()
    };
    let (store, location) = broken(breaker).await;
    let message = location
        .get_range(OBJECT, 0..10)
        .await
        .expect_err("every attempt fails")
        .to_string();
    assert!(
        message.contains("memory:///ds/blob (bytes 0..10): gave up after 4 attempts")
            && message.contains("injected 503"),
        "{message}"
    );
    assert_eq!(store.hooks.asked().len(), 4);
}

#[tokio::test]
async fn a_missing_object_is_not_retried() {
    let (store, location) = broken(Breaker::default()).await;
    let error = location
        .get_range("absent", 0..10)
        .await
        .expect_err("absent");
    assert!(matches!(error, IoError::NotFound { .. }), "{error:?}");
    assert_eq!(store.hooks.asked().len(), 1);
}

#[tokio::test]
async fn an_object_replaced_mid_read_is_not_stitched_together() {
    let inner = Arc::new(InMemory::new());
    inner
        .put(&Path::from("ds/blob"), content().into())
        .await
        .expect("put");
    let breaker = Breaker {
        inner: Some(Arc::clone(&inner)),
        ..Breaker::queued(&[Fault::CutAndReplace(500)])
    };
    let store = Arc::new(InterceptStore::new(inner, breaker));
    let location = Location::from_store(store.clone(), "ds", "memory:///ds").with_retry(quick());
    let error = location
        .get_range(OBJECT, 0..10_000)
        .await
        .expect_err("the object changed");
    let message = error.to_string();
    assert!(
        message.contains("memory:///ds/blob (bytes 0..10000): gave up after 2 attempts")
            && message.contains("the object changed while it was read"),
        "{message}"
    );
    assert_eq!(
        store.hooks.asked().len(),
        2,
        "a changed object is not retried"
    );
}

#[tokio::test]
async fn a_whole_object_over_its_limit_is_refused_before_its_body() {
    let (_, location) = broken(Breaker::default()).await;
    let error = location
        .get_at_most(OBJECT, 1000)
        .await
        .expect_err("too large");
    assert!(
        matches!(
            error,
            IoError::TooLarge {
                size: 100_000,
                limit: 1000,
                ..
            }
        ),
        "{error:?}"
    );
    let whole = location
        .get_at_most(OBJECT, 100_000)
        .await
        .expect("at the limit");
    assert_eq!(&whole[..], &content()[..]);
}

#[tokio::test]
async fn a_whole_object_read_resumes_with_a_range() {
    let (store, location) = broken(Breaker::queued(&[Fault::CutAfter(12_345)])).await;
    let whole = location.get(OBJECT).await.expect("read");
    assert_eq!(&whole[..], &content()[..]);
    let ranges: Vec<_> = store.hooks.asked().iter().map(|a| range(&a.0)).collect();
    assert_eq!(ranges, [None, Some(12_345..100_000)]);
}

/// A packed dataset in `dir/shards`, and the spans of all its samples.
async fn packed(dir: &std::path::Path) -> SpanSet {
    let src = dir.join("src");
    for c in 0..3u32 {
        let class_dir = src.join(format!("class{c}"));
        std::fs::create_dir_all(&class_dir).expect("mkdir");
        for i in 0..16u32 {
            let img = image::RgbImage::from_fn(40 + i, 32, |x, y| {
                image::Rgb([(x * 5 + c * 40) as u8, (y * 6 + i * 3) as u8, (x ^ y) as u8])
            });
            img.save(class_dir.join(format!("{i:04}.jpg")))
                .expect("save");
        }
    }
    let options = PackOptions {
        max_samples: 12,
        compression: Compression::ZSTD,
        block_bytes: 2048,
        ..PackOptions::default()
    };
    let dest = pack_local(&src, &dir.join("shards"), &options).await;
    let dataset = Dataset::from_location(dest).await.expect("open");
    let spans = dataset
        .manifest
        .shards
        .iter()
        .enumerate()
        .rev()
        .map(|(i, shard)| Span::new(i as u32, 1, shard.samples))
        .collect::<Vec<_>>();
    SpanSet::new(spans)
}

async fn samples(location: Location, spans: &SpanSet) -> Result<Vec<Sample>, WorkerError> {
    let dataset = Dataset::from_location(location).await?;
    let config = FetchConfig {
        max_requests: 4,
        first_read_bytes: 512,
        max_read_bytes: 2048,
        ..FetchConfig::default()
    };
    let fetched: Vec<_> = span_samples(dataset, spans, &config, Arc::new(Metrics::default()))
        .try_collect()
        .await?;
    Ok(fetched.into_iter().flat_map(|f| f.samples).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_under_faults_gives_the_samples_of_a_clean_run_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let spans = packed(dir.path()).await;
    let open = |breaker: Breaker| {
        let local = LocalFileSystem::new_with_prefix(dir.path().join("shards")).expect("local");
        let store = Arc::new(InterceptStore::new(Arc::new(local), breaker));
        (
            Arc::clone(&store),
            Location::from_store(store, "", "file:///shards").with_retry(quick()),
        )
    };
    let (_, clean) = open(Breaker::default());
    let expected = samples(clean, &spans).await.expect("clean read");
    assert!(expected.len() > 40, "{} samples", expected.len());

    let cycle = vec![
        Fault::Error,
        Fault::CutAfter(700),
        Fault::EndAfter(300),
        Fault::Pad(9),
        Fault::CutAfter(0),
        Fault::EndAfter(1),
    ];
    let (store, faulty) = open(Breaker {
        every: 2,
        cycle: cycle.clone(),
        ..Breaker::default()
    });
    let got = samples(faulty, &spans).await.expect("read under faults");
    assert_eq!(got, expected, "the same samples, in the same order");
    let injected = store.hooks.injected.lock().expect("lock").clone();
    for fault in &cycle {
        assert!(
            injected.contains(fault),
            "{fault:?} was never injected: {injected:?}"
        );
    }
}
