//! Transactions that may be sent again after a timeout.
//!
//! A transaction whose answer never came may still be applied, and applied
//! late: after a retry and after later writes, where it would undo them.
//! So every transaction also creates a guard key of its own, on condition
//! that the guard does not exist yet, and reads the guard when a condition
//! fails. However many copies are sent, at most one applies; a copy that
//! finds the guard knows an earlier one applied, and at which revision.
//! Guards live under a lease of [`GUARD_TTL`] and vanish with it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::store::LeaseId;

/// How long a guard outlives its transaction: far longer than any copy of
/// it can wait in etcd (etcd gives up on a proposal after its request
/// timeout, 7 s at a 1 s election timeout).
pub(crate) const GUARD_TTL: Duration = Duration::from_secs(60);

/// Guard keys of one store.
#[derive(Debug)]
pub(crate) struct Guards {
    prefix: String,
    /// The lease new guards go under, and until when to use it (half its
    /// TTL, so a guard lives at least [`GUARD_TTL`] / 2).
    lease: Mutex<Option<(LeaseId, Instant)>>,
    next: AtomicU64,
}

impl Guards {
    pub(crate) fn new(prefix: String) -> Self {
        Self {
            prefix,
            lease: Mutex::new(None),
            next: AtomicU64::new(0),
        }
    }

    /// A guard key no other transaction uses: etcd never hands out a lease
    /// id twice, and the counter is this store's.
    pub(crate) fn key(&self, lease: LeaseId) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}{lease:016x}-{n}", self.prefix)
    }

    /// The lease to put a guard under, granted by `grant` when there is
    /// none still young enough.
    pub(crate) async fn lease<F, Fut, E>(&self, grant: F) -> Result<LeaseId, E>
    where
        F: FnOnce(Duration) -> Fut,
        Fut: std::future::Future<Output = Result<LeaseId, E>>,
    {
        let mut current = self.lease.lock().await;
        if let Some((lease, until)) = *current {
            if Instant::now() < until {
                return Ok(lease);
            }
        }
        let asked = Instant::now();
        let lease = grant(GUARD_TTL).await?;
        *current = Some((lease, asked + GUARD_TTL / 2));
        Ok(lease)
    }

    /// Forgets `lease` (etcd no longer knows it), so the next guard gets a
    /// new one.
    pub(crate) async fn forget(&self, lease: LeaseId) {
        let mut current = self.lease.lock().await;
        if matches!(*current, Some((held, _)) if held == lease) {
            *current = None;
        }
    }
}
