//! [`CachedLeader`]: an [`Election`] whose leader lookups are answered from
//! a short-lived cache, one store read at a time.
//!
//! A follower answers every call "not the leader" with the leader's
//! address; looked up per call, a fleet of ranks retrying through a
//! failover would turn into a storm of store reads of the election's
//! prefix. Cached, a replica reads it at most once per [`LEADER_CACHE`],
//! however many calls ask.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::Mutex;

use super::{Election, Leadership, StoreResult};

/// How long a leader lookup is reused.
pub const LEADER_CACHE: Duration = Duration::from_millis(500);

/// An election with its leader lookups cached for `ttl`.
#[derive(Debug)]
pub struct CachedLeader {
    inner: Arc<dyn Election>,
    ttl: Duration,
    /// The last answer and when it was read. Held across the read, so
    /// calls that find it stale wait for one read instead of each making
    /// their own.
    last: Mutex<Option<(Instant, Option<String>)>>,
}

impl CachedLeader {
    pub fn new(inner: Arc<dyn Election>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            last: Mutex::new(None),
        }
    }
}

#[async_trait]
impl Election for CachedLeader {
    async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
        let leadership = self.inner.campaign(candidate).await;
        // Whoever led before may not any more.
        *self.last.lock().await = None;
        leadership
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        let mut last = self.last.lock().await;
        if let Some((at, leader)) = &*last {
            if at.elapsed() < self.ttl {
                return Ok(leader.clone());
            }
        }
        // An error is not cached: the next call reads again.
        let leader = self.inner.leader().await?;
        *last = Some((Instant::now(), leader.clone()));
        Ok(leader)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::MemoryElection;

    #[derive(Debug)]
    struct Counted {
        inner: MemoryElection,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl Election for Counted {
        async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
            self.inner.campaign(candidate).await
        }
        async fn leader(&self) -> StoreResult<Option<String>> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.inner.leader().await
        }
    }

    #[tokio::test]
    async fn many_lookups_make_one_read_per_ttl() {
        let store = crate::store::MemoryStore::new();
        let counted = Arc::new(Counted {
            inner: MemoryElection::new(store, crate::keys::ELECTION),
            reads: AtomicUsize::new(0),
        });
        let inner = Arc::clone(&counted) as Arc<dyn Election>;
        let cached = Arc::new(CachedLeader::new(inner, Duration::from_secs(3600)));
        let _leading = cached.campaign("here:1").await.expect("campaign");
        let lookups: Vec<_> = (0..64)
            .map(|_| {
                let cached = Arc::clone(&cached);
                tokio::spawn(async move { cached.leader().await })
            })
            .collect();
        for lookup in lookups {
            let leader = lookup.await.expect("task").expect("leader");
            assert_eq!(leader.as_deref(), Some("here:1"));
        }
        assert_eq!(counted.reads.load(Ordering::SeqCst), 1);
    }
}
