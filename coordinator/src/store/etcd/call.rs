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

use tokio::time::Instant;

use crate::store::{LeaseId, StoreError, StoreResult};

/// How long etcd requests may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// One attempt (one request on the wire).
    pub attempt: Duration,
    /// Every attempt of one call together, retries and backoff included.
    pub budget: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            attempt: Duration::from_secs(1),
            budget: Duration::from_secs(5),
        }
    }
}

/// Whether a request may be sent again after an attempt that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// After any transient failure, timeouts included: sending it twice
    /// has the effect of sending it once (reads, renewals, guarded
    /// transactions).
    Any,
    /// Only after an attempt that could not connect, so never reached a
    /// member (a plain put: one that timed out may still be applied, and
    /// applied late, after a retry and later writes).
    Unsent,
}

/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(200);

/// Runs `attempt` under `deadlines`, again after failures that `retry`
/// allows, until it succeeds, fails for good, or the budget is spent;
/// `lease` names the lease a "lease not found" answer is about.
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
    let mut tries: u32 = 0;
    loop {
        tries += 1;
        let limit = deadlines
            .attempt
            .min(end.saturating_duration_since(Instant::now()));
        let (error, unsent) = match tokio::time::timeout(limit, attempt()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => {
                let unsent = never_sent(&error);
                (map_error(error, lease), unsent)
            }
            Err(_) => (
                StoreError::Unavailable(format!("etcd request timed out after {limit:?}")),
                false,
            ),
        };
        let transient = matches!(error, StoreError::Unavailable(_));
        let allowed = match retry {
            Retry::Any => transient,
            Retry::Unsent => transient && unsent,
        };
        let backoff = (Duration::from_millis(20) * tries).min(MAX_BACKOFF);
        if !allowed || Instant::now() + backoff >= end {
            return Err(match error {
                StoreError::Unavailable(message) if tries > 1 => StoreError::Unavailable(format!(
                    "{message} (gave up after {tries} attempts in {:?})",
                    start.elapsed()
                )),
                error => error,
            });
        }
        tracing::debug!(%error, tries, "etcd request failed; trying again");
        tokio::time::sleep(backoff).await;
    }
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
    async fn an_attempt_that_hangs_is_given_up_and_sent_again() {
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
    async fn a_put_that_timed_out_is_not_sent_again() {
        let tries = AtomicU32::new(0);
        let result = call(SHORT, Retry::Unsent, None, || {
            tries.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<Result<(), etcd_client::Error>>()
        })
        .await;
        assert!(matches!(result, Err(StoreError::Unavailable(_))), "{result:?}");
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
                    tonic::Status::invalid_argument("etcdserver: duplicate key given in txn request"),
                ))
            }
        })
        .await;
        assert!(matches!(result, Err(StoreError::Other(_))), "{result:?}");
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
