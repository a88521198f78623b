//! [`MemoryElection`]: leader election among the candidates of one process,
//! on one key of a [`MemoryStore`].
//!
//! A single candidate wins at once. Further candidates wait until the
//! leader resigns (drops its [`Leadership`]) or is deposed, as they would
//! on etcd. Nothing expires on its own: a process cannot lose a lease to
//! itself, so [`MemoryElection::depose`] stands in for that in tests.

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::MemoryStore;
use crate::store::{
    Compare, Election, Leadership, MetaStore, Op, StoreError, StoreResult, WatchEvent,
};

/// Leader election on a [`MemoryStore`]; the leader key is `<name>/leader`.
#[derive(Debug, Clone)]
pub struct MemoryElection {
    store: MemoryStore,
    key: String,
}

impl MemoryElection {
    /// The election `name` on `store`.
    pub fn new(store: MemoryStore, name: impl Into<String>) -> Self {
        Self {
            store,
            key: format!("{}/leader", name.into()),
        }
    }

    /// Deletes the leader key, as an expired lease would on etcd: the
    /// leader's [`Leadership::lost`] turns `true` and a waiting candidate
    /// wins. For tests.
    pub async fn depose(&self) -> StoreResult<()> {
        let delete = Op::Delete {
            key: self.key.clone(),
        };
        self.store.txn(vec![], vec![delete]).await.map(drop)
    }

    /// Waits until the leader key is deleted (or the watch breaks, after
    /// which the caller looks again).
    async fn wait_for_delete(&self, after: i64) -> StoreResult<()> {
        let mut events = self.store.watch(&self.key, after + 1).await?;
        while let Some(event) = events.next().await {
            match event {
                Ok(WatchEvent::Delete { key, .. }) if key == self.key => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Ok(())
    }

    fn lead(&self, revision: i64) -> Leadership {
        let (lost_tx, lost) = watch::channel(false);
        let election = self.clone();
        let watcher = tokio::spawn(async move {
            // Any way out of the wait means the key may be gone: stop.
            let _ = election.wait_for_delete(revision).await;
            lost_tx.send_replace(true);
        });
        let guard = Resign {
            store: self.store.clone(),
            key: self.key.clone(),
            revision,
            watcher,
        };
        Leadership {
            key: self.key.clone(),
            revision,
            lost,
            _guard: Some(Box::new(guard)),
        }
    }
}

#[async_trait]
impl Election for MemoryElection {
    async fn campaign(&self, candidate: &str) -> StoreResult<Leadership> {
        loop {
            let absent = Compare::CreateRevision {
                key: self.key.clone(),
                revision: 0,
            };
            let put = Op::Put {
                key: self.key.clone(),
                value: candidate.as_bytes().to_vec(),
                lease: None,
            };
            let outcome = self.store.txn(vec![absent], vec![put]).await?;
            if outcome.succeeded {
                return Ok(self.lead(outcome.revision));
            }
            self.wait_for_delete(outcome.revision).await?;
        }
    }

    async fn leader(&self) -> StoreResult<Option<String>> {
        let Some(kv) = self.store.get(&self.key).await? else {
            return Ok(None);
        };
        String::from_utf8(kv.value).map(Some).map_err(|_| {
            StoreError::Other(format!("leader key {:?} holds a non-UTF-8 value", self.key))
        })
    }
}

/// Deletes the leader key when the [`Leadership`] is dropped, unless a
/// later leader already owns it.
#[derive(Debug)]
struct Resign {
    store: MemoryStore,
    key: String,
    revision: i64,
    watcher: JoinHandle<()>,
}

impl Drop for Resign {
    fn drop(&mut self) {
        self.watcher.abort();
        let ours = Compare::CreateRevision {
            key: self.key.clone(),
            revision: self.revision,
        };
        let delete = Op::Delete {
            key: self.key.clone(),
        };
        // Cannot fail: one compare, one op, no lease.
        let _ = self.store.txn_now(&[ours], &[delete]);
    }
}
