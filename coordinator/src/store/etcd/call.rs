//! Deadlines and retries of etcd requests, and etcd's errors as
//! [`StoreError`]s.
//!
//! Every request gets a short deadline per attempt and a longer budget for
//! all its attempts. A member that dies takes the requests it was serving
//! with it, and a request forwarded by a follower to a dead raft leader is
//! dropped without an answer until etcd's own request timeout (7 s with a
//! 1 s election timeout). A short deadline gives up on such an attempt early
//! and sends the request again, usually to another member, which answers
//! once the cluster has elected a new leader.

use std::future::Future;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::store::{LeaseId, StoreError, StoreResult};

/// How long etcd requests may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// How long one copy of a request may go unanswered. Then a request
    /// that may safely be sent twice is sent again (the first copy keeps
    /// waiting, and whichever answers first wins); one that may not fails.
    pub attempt: Duration,
    /// Every copy of one call together, backoff included.
    pub budget: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            attempt: Duration::from_millis(500),
            budget: Duration::from_secs(5),
        }
    }
}

/// Whether a request may be sent again after an attempt that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// After any transient failure, and while an earlier copy is still
    /// unanswered: sending it twice has the effect of sending it once
    /// (reads, renewals, guarded transactions).
    Any,
    /// Only after an attempt that could not connect, so never reached a
    /// member (a plain put: one that timed out may still be applied, and
    /// applied late, after a retry and later writes).
    Unsent,
}

/// The longest pause between two attempts that failed at once.
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// The most copies of one request unanswered at once: a slow cluster sees
/// each request at most this many times.
const MAX_COPIES: usize = 3;

/// Runs `attempt` under `deadlines`: sends it again when `retry` allows,
/// after a transient failure or a copy that went unanswered for
/// `deadlines.attempt`, until one copy succeeds, one fails for good, or the
/// budget is spent; `lease` names the lease a "lease not found" answer is
/// about.
pub(crate) async fn call<T, F, Fut>(
    deadlines: Deadlines,
    retry: Retry,
    lease: Option<LeaseId>,
    mut attempt: F,
) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let start = Instant::now();
    let end = start + deadlines.budget;
    let max_copies = match retry {
        Retry::Any => MAX_COPIES,
        Retry::Unsent => 1,
    };
    let mut copies = FuturesUnordered::new();
    let mut tries: u32 = 0;
    let mut failures: u32 = 0;
    let mut last_error = None;
    // When the next copy may go out.
    let mut next = start;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if now >= next {
            if copies.len() < max_copies {
                tries += 1;
                // A copy is abandoned once `max_copies` newer ones could
                // have been sent: one forwarded to a dead raft leader
                // never answers.
                let copy = attempt();
                copies.push(async move {
                    tokio::time::timeout(deadlines.attempt * max_copies as u32, copy).await
                });
            } else if retry == Retry::Unsent {
                // The one copy went unanswered: it may still be applied.
                return Err(StoreError::Unavailable(format!(
                    "etcd request unanswered after {:?}",
                    deadlines.attempt
                )));
            }
            next = now + deadlines.attempt;
        }
        tokio::select! {
            Some(result) = copies.next() => {
                let error = match result {
                    Ok(Ok(value)) => return Ok(value),
                    Ok(Err(error)) => error,
                    Err(_) => {
                        let unanswered = StoreError::Unavailable(format!(
                            "etcd request unanswered after {:?}",
                            deadlines.attempt * max_copies as u32
                        ));
                        if retry == Retry::Unsent {
                            // It may still be applied.
                            return Err(unanswered);
                        }
                        tracing::debug!(tries, "an etcd request copy went unanswered; abandoned");
                        last_error = Some(unanswered);
                        next = Instant::now();
                        continue;
                    }
                };
                let unsent = never_sent(&error);
                let error = map_error(error, lease);
                let transient = matches!(error, StoreError::Unavailable(_));
                if !transient || (retry == Retry::Unsent && !unsent) {
                    return Err(error);
                }
                tracing::debug!(%error, tries, "etcd request failed; trying again");
                failures += 1;
                let backoff = (Duration::from_millis(20) * failures).min(MAX_BACKOFF);
                next = next.min(Instant::now() + backoff);
                last_error = Some(error);
            }
            _ = tokio::time::sleep_until(next.min(end)) => {}
        }
    }
    let last = match last_error {
        Some(error) => format!("; last error: {error}"),
        None => String::new(),
    };
    Err(StoreError::Unavailable(format!(
        "etcd request gave up after {tries} attempts in {:?}{last}",
        deadlines.budget
    )))
}

/// How many times [`retry_unsent`] tries.
const UNSENT_ATTEMPTS: u32 = 8;

/// Tries `attempt` again (up to 8 times) while it fails before reaching
/// any member, with no deadline: for a campaign, which waits as long as
/// another candidate leads.
pub(crate) async fn retry_unsent<T, F, Fut>(mut attempt: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(error) if tries < UNSENT_ATTEMPTS && never_sent(&error) => {
                tracing::debug!(%error, tries, "etcd request could not connect; trying again");
                tokio::time::sleep(Duration::from_millis(20) * tries).await;
                tries += 1;
            }
            result => return result,
        }
    }
}

/// Whether `error` says the request failed to connect (tonic turns
/// hyper's connect errors, timeouts included, into this status): it was
/// never sent, so trying it again is safe even for a write.
pub(crate) fn never_sent(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::Unavailable
            && status.message().starts_with("tcp connect error"))
}

/// Whether `error` is etcd's answer to a lease that does not exist.
pub(crate) fn is_lease_not_found(error: &StoreError) -> bool {
    match error {
        StoreError::LeaseNotFound(_) => true,
        StoreError::Other(message) => message.contains("lease not found"),
        _ => false,
    }
}

/// The one place etcd's errors become [`StoreError`]s.
pub(crate) fn map_error(error: etcd_client::Error, lease: Option<LeaseId>) -> StoreError {
    use etcd_client::Error as E;
    use tonic::Code;
    match error {
        E::GRpcStatus(status) => match (status.code(), lease) {
            (Code::NotFound, Some(lease)) if status.message().contains("lease not found") => {
                StoreError::LeaseNotFound(lease)
            }
            (
                Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Cancelled
                | Code::Aborted
                | Code::ResourceExhausted
                | Code::Unknown,
                _,
            ) => StoreError::Unavailable(format!("etcd: {}", status.message())),
            (code, _) => StoreError::Other(format!("etcd ({code:?}): {}", status.message())),
        },
        E::LeaseKeepAliveError(message) => match lease {
            Some(lease) if message.contains("not found") => StoreError::LeaseNotFound(lease),
            _ => StoreError::Unavailable(format!("etcd lease keep-alive: {message}")),
        },
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) | E::EndpointError(_) => {
            StoreError::Unavailable(format!("etcd: {error}"))
        }
        other => StoreError::Other(format!("etcd: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn unavailable(message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::unavailable(message))
    }

    const SHORT: Deadlines = Deadlines {
        attempt: Duration::from_millis(100),
        budget: Duration::from_secs(2),
    };

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_attempt_is_sent_again_and_the_first_answer_wins() {
        let tries = AtomicU32::new(0);
        let started = Instant::now();
        let result = call(SHORT, Retry::Any, None, || {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, etcd_client::Error>(n)
            }
        })
        .await;
        assert_eq!(result.expect("the second attempt answers"), 1);
        assert!(started.elapsed() < Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_copy_still_counts() {
        let tries = AtomicU32::new(0);
        let started = Instant::now();
        // Each copy takes 250 ms: the first answers although copies were
        // sent after it.
        let result = call(SHORT, Retry::Any, None, || {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(Duration::from_millis(250)).await;
                Ok::<_, etcd_client::Error>(n)
            }
        })
        .await;
        assert_eq!(result.expect("a copy answers"), 0);
        assert_eq!(started.elapsed(), Duration::from_millis(250));
        assert_eq!(tries.load(Ordering::SeqCst), MAX_COPIES as u32);
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_that_timed_out_is_not_sent_again() {
        let tries = AtomicU32::new(0);
        let result = call(SHORT, Retry::Unsent, None, || {
            tries.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), etcd_client::Error>>()
        })
        .await;
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_that_could_not_connect_is_sent_again() {
        let tries = AtomicU32::new(0);
        let result = call(SHORT, Retry::Unsent, None, || {
            let n = tries.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    return Err(unavailable("tcp connect error: refused"));
                }
                Ok(())
            }
        })
        .await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(tries.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_when_the_budget_is_spent() {
        let started = Instant::now();
        let result = call(SHORT, Retry::Any, None, || async {
            Err::<(), _>(unavailable("etcdserver: no leader"))
        })
        .await;
        let Err(StoreError::Unavailable(message)) = result else {
            panic!("want Unavailable, got {result:?}");
        };
        assert!(message.contains("gave up after"), "{message}");
        assert!(started.elapsed() <= SHORT.budget, "{:?}", started.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_permanent_error_is_not_retried() {
        let tries = AtomicU32::new(0);
        let result = call(SHORT, Retry::Any, None, || {
            tries.fetch_add(1, Ordering::SeqCst);
            async {
                Err::<(), _>(etcd_client::Error::GRpcStatus(
                    tonic::Status::invalid_argument(
                        "etcdserver: duplicate key given in txn request",
                    ),
                ))
            }
        })
        .await;
        assert!(matches!(result, Err(StoreError::Other(_))), "{result:?}");
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
