//! Retrying object-store operations, and reads that resume where they broke.
//!
//! One budget per operation: [`RetryPolicy::attempts`] requests, with
//! exponential backoff and jitter between them. The HTTP backends' own
//! retries are turned off (see `Location::open`) so that this budget is the
//! only one, and an error can say exactly how many requests were made.
//!
//! A read is driven here rather than by `GetResult::bytes`, because
//! - a body can break after some bytes arrived (a connection reset, a
//!   stall, a clean end before the range is complete, a `Content-Length`
//!   that disagrees with the range): the next attempt asks only for the
//!   bytes still missing, pinned to the first response's ETag, so the
//!   result is the same bytes a clean read returns;
//! - nothing is allocated from what the server claims: the buffer grows as
//!   bytes arrive, never past the range asked for (or, for a whole object,
//!   past the caller's limit).

use std::hash::{BuildHasher, RandomState};
use std::ops::Range;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};

use crate::bufpool::Filling;
use crate::error::{IoError, ReadError, Result};

/// How operations on a store retry transient failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests per operation, the first one included (at least 1).
    pub attempts: u32,
    /// Pause before the second attempt; it doubles for each next one.
    pub first_backoff: Duration,
    /// Longest pause between two attempts.
    pub max_backoff: Duration,
    /// A read whose body brings no byte for this long is abandoned and
    /// resumed by the next attempt.
    pub stall_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Ten attempts over about half a minute of backoff: enough to ride out
    /// an S3 `SlowDown` burst or a load balancer restart, short enough that
    /// a dead endpoint fails the job while someone is watching.
    fn default() -> Self {
        Self {
            attempts: 10,
            first_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The pause after failed attempt number `attempt` (1-based): the
    /// exponential delay, with its upper half drawn at random so that ranks
    /// that failed together do not retry together.
    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .first_backoff
            .saturating_mul(1 << attempt.saturating_sub(1).min(20));
        let delay = exp.min(self.max_backoff);
        let half = delay / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(RandomState::new().hash_one(attempt) % nanos)
    }
}

impl ReadError {
    fn transient(&self) -> bool {
        match self {
            Self::Store(error) => transient(error),
            Self::Truncated { .. }
            | Self::Overlong { .. }
            | Self::WrongRange { .. }
            | Self::Stalled(_) => true,
            Self::Changed { .. } => false,
        }
    }
}

/// Whether `error` may go away if the request is sent again.
pub(crate) fn transient(error: &object_store::Error) -> bool {
    if let object_store::Error::Generic { .. } = error {
        return !client_error(error)
            && crate::error::local_error(error).is_none()
            && !crate::error::no_credentials(error);
    }
    !matches!(
        error,
        object_store::Error::NotFound { .. }
            | object_store::Error::InvalidPath { .. }
            | object_store::Error::NotSupported { .. }
            | object_store::Error::AlreadyExists { .. }
            | object_store::Error::Precondition { .. }
            | object_store::Error::NotModified { .. }
            | object_store::Error::NotImplemented { .. }
            | object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. }
            | object_store::Error::UnknownConfigurationKey { .. }
    )
}

/// Whether a store's catch-all error is an HTTP client error (4xx, but 408
/// Request Timeout and 429 Too Many Requests): the request itself is wrong
/// (400 Bad Request, 405, 416, ...), so sending it again cannot help.
/// object_store keeps the status in a private type; its message carries it
/// (`... status code: 400 Bad Request: ...`). Without a status (a network
/// error, a 5xx, an error in a 200's body) the error stays transient.
fn client_error(error: &object_store::Error) -> bool {
    let message = error.to_string();
    let Some((_, rest)) = message.split_once("status code: ") else {
        return false;
    };
    rest.get(..3)
        .and_then(|code| code.parse::<u16>().ok())
        .is_some_and(|code| (400..500).contains(&code) && code != 408 && code != 429)
}

/// Runs `op` up to `policy.attempts` times, with backoff, while it fails
/// with a transient error.
pub async fn retry<T, F, Fut>(url: &str, policy: &RetryPolicy, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    let mut attempt = 1;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(error) if attempt < policy.attempts && transient(&error) => {
                tracing::warn!(%url, attempt, %error, "transient object-store error, retrying");
                tokio::time::sleep(policy.backoff(attempt)).await;
                attempt += 1;
            }
            Err(error) if transient(&error) => {
                return Err(IoError::GaveUp {
                    url: url.to_owned(),
                    attempts: attempt,
                    error,
                })
            }
            Err(error) => return Err(IoError::store(url, error)),
        }
    }
}

/// What to read: a byte range, or a whole object of at most `limit` bytes.
#[derive(Debug, Clone)]
pub(crate) enum Want {
    Range(Range<u64>),
    Whole { limit: u64 },
}

/// Where a read's bytes go, in order: memory (a pooled buffer) or, for the
/// shard cache, a file written as the body streams in.
pub(crate) trait Sink: Send {
    /// Called once before the first byte with the bytes expected (capped:
    /// what a server claims never sizes an allocation).
    fn reserve(&mut self, bytes: u64);
    /// Appends the next bytes of the body. An error ends the read: it is
    /// not the store's, so another request would not help.
    fn append(&mut self, bytes: Bytes) -> impl std::future::Future<Output = Result<()>> + Send;
}

impl Sink for Filling {
    fn reserve(&mut self, bytes: u64) {
        Filling::reserve(self, usize::try_from(bytes).unwrap_or(0));
    }

    async fn append(&mut self, bytes: Bytes) -> Result<()> {
        Filling::append(self, &bytes);
        Ok(())
    }
}

/// A read in progress: the bytes received so far of the range wanted, and
/// the version they belong to.
struct Partial<S> {
    /// The absolute range wanted, once known (a whole-object read learns it
    /// from the first response).
    range: Option<Range<u64>>,
    sink: S,
    received: u64,
    reserved: bool,
    etag: Option<String>,
}

/// Buffers start at most this large and grow as bytes arrive.
const FIRST_BUFFER: u64 = 8 << 20;

impl<S> Partial<S> {
    fn received(&self) -> u64 {
        self.received
    }

    fn missing(&self) -> Option<Range<u64>> {
        self.range
            .as_ref()
            .map(|r| r.start + self.received()..r.end)
    }

    fn complete(&self) -> bool {
        self.missing().is_some_and(|m| m.is_empty())
    }
}

/// Reads `want` of the local file at `path` with one positioned read (the
/// store's local reads go by 8 KiB chunks, each on a blocking thread of its
/// own: hundreds of thread hand-offs for one shard range); `None` if it
/// cannot be read whole, for the store's read to report why.
pub(crate) fn read_local(path: &std::path::Path, want: &Want) -> Option<Bytes> {
    let file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    let range = match want {
        Want::Range(range) if range.start <= range.end && range.end <= size => range.clone(),
        Want::Whole { limit } if size <= *limit => 0..size,
        _ => return None,
    };
    crate::bufpool::read_exact_at(&file, range).ok()
}

/// Reads `want` of the object at `path`, resuming after failures.
pub(crate) async fn read(
    store: &dyn ObjectStore,
    path: &Path,
    url: &str,
    want: Want,
    policy: &RetryPolicy,
) -> Result<Bytes> {
    read_into(store, path, url, want, policy, Filling::default())
        .await
        .map(Filling::into_bytes)
}

/// Reads `want` of the object at `path` into `sink`, resuming after
/// failures: the sink sees each byte once, in order.
pub(crate) async fn read_into<S: Sink>(
    store: &dyn ObjectStore,
    path: &Path,
    url: &str,
    want: Want,
    policy: &RetryPolicy,
    sink: S,
) -> Result<S> {
    let mut partial = Partial {
        range: match &want {
            Want::Range(range) => Some(range.clone()),
            Want::Whole { .. } => None,
        },
        sink,
        received: 0,
        reserved: false,
        etag: None,
    };
    if partial.complete() {
        return Ok(partial.sink);
    }
    let name = match &want {
        Want::Range(range) => format!("{url} (bytes {}..{})", range.start, range.end),
        Want::Whole { .. } => url.to_owned(),
    };
    let mut attempt = 1;
    loop {
        let error = match read_once(store, path, url, &want, &mut partial, policy).await {
            Ok(()) => return Ok(partial.sink),
            Err(Attempt::Final(error)) => return Err(error),
            Err(Attempt::Failed(error)) => error,
        };
        if attempt < policy.attempts && error.transient() {
            tracing::warn!(
                url = %name, attempt, received = partial.received(), %error,
                "object read failed, resuming"
            );
            tokio::time::sleep(policy.backoff(attempt)).await;
            attempt += 1;
            continue;
        }
        return Err(match error {
            ReadError::Store(error) if !transient(&error) => IoError::store(name.clone(), error),
            error => IoError::ReadFailed {
                url: name.clone(),
                attempts: attempt,
                received: partial.received(),
                expected: partial.range.as_ref().map(|r| r.end - r.start),
                error: Box::new(error),
            },
        });
    }
}

/// How one attempt failed: worth another attempt, or not.
enum Attempt {
    Failed(ReadError),
    Final(IoError),
}

impl From<object_store::Error> for Attempt {
    fn from(error: object_store::Error) -> Self {
        Self::Failed(ReadError::Store(error))
    }
}

/// One request: asks for the bytes still missing and appends what arrives.
async fn read_once<S: Sink>(
    store: &dyn ObjectStore,
    path: &Path,
    url: &str,
    want: &Want,
    partial: &mut Partial<S>,
    policy: &RetryPolicy,
) -> std::result::Result<(), Attempt> {
    let asked = partial.missing();
    let options = GetOptions {
        range: asked.clone().map(GetRange::Bounded),
        if_match: partial.etag.clone(),
        ..GetOptions::default()
    };
    let result = match store.get_opts(path, options).await {
        Ok(result) => result,
        Err(object_store::Error::Precondition { .. }) if partial.etag.is_some() => {
            let etag = partial.etag.clone().unwrap_or_default();
            return Err(Attempt::Failed(ReadError::Changed { etag }));
        }
        Err(error) => return Err(error.into()),
    };
    match (&asked, want) {
        (Some(asked), _) if result.range != *asked => {
            return Err(Attempt::Failed(ReadError::WrongRange {
                asked: asked.clone(),
                got: result.range.clone(),
            }));
        }
        (Some(_), _) => {}
        (None, Want::Whole { limit }) => {
            let size = result.range.end.saturating_sub(result.range.start);
            if size > *limit {
                return Err(Attempt::Final(IoError::TooLarge {
                    url: url.to_owned(),
                    size,
                    limit: *limit,
                }));
            }
            partial.range = Some(result.range.clone());
        }
        (None, Want::Range(_)) => unreachable!("a range read knows its range"),
    }
    if partial.etag.is_none() {
        partial.etag = result.meta.e_tag.clone();
    }
    let expected = partial.range.as_ref().map_or(0, |r| r.end - r.start);
    if !partial.reserved {
        partial.reserved = true;
        partial.sink.reserve(expected.min(FIRST_BUFFER));
    }
    let mut body = result.into_stream();
    while !partial.complete() {
        let next = tokio::time::timeout(policy.stall_timeout, body.next())
            .await
            .map_err(|_| Attempt::Failed(ReadError::Stalled(policy.stall_timeout)))?;
        match next {
            Some(Ok(bytes)) => {
                if partial.received() + bytes.len() as u64 > expected {
                    return Err(Attempt::Failed(ReadError::Overlong { expected }));
                }
                partial.received += bytes.len() as u64;
                partial.sink.append(bytes).await.map_err(Attempt::Final)?;
            }
            Some(Err(error)) => return Err(error.into()),
            None => {
                return Err(Attempt::Failed(ReadError::Truncated {
                    received: partial.received(),
                    expected,
                }))
            }
        }
    }
    Ok(())
}
