//! [`MemoryStore`]: the metadata store in one process, with etcd's
//! semantics (one revision counter, leases that expire on their own,
//! transactions, watches that replay from a past revision), and
//! [`MemoryElection`] on top of it.
//!
//! Time is tokio's, so tests can pause and advance it. Leases expire both
//! lazily (every call first expires what is due) and from a background task
//! that sleeps until the next deadline, so a watcher sees a lease's keys
//! deleted even when nobody calls the store.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::{
    Compare, KeyValue, LeaseId, MetaStore, Op, StoreError, StoreResult, TxnOutcome, WatchEvent,
};

mod election;
mod state;

pub use election::MemoryElection;
use state::State;

/// An in-memory [`MetaStore`]. Clones share the same data.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// The current revision, for watchers to wait on.
    revision: watch::Sender<i64>,
    /// Wakes the expiry task: a lease was granted, or the store is gone.
    wake_expiry: Arc<Notify>,
    expiry_started: AtomicBool,
}

impl Default for Inner {
    fn default() -> Self {
        let state = State::default();
        let (revision, _) = watch::channel(state.revision());
        Self {
            state: Mutex::new(state),
            revision,
            wake_expiry: Arc::new(Notify::new()),
            expiry_started: AtomicBool::new(false),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The expiry task holds only a weak reference; let it notice.
        self.wake_expiry.notify_one();
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("revision", &*self.inner.revision.borrow())
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// An empty store at revision 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` on the state after expiring due leases, then tells
    /// watchers if the revision moved.
    fn with_state<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.inner.lock();
        state.expire(Instant::now());
        let out = f(&mut state);
        self.inner.publish(&state);
        out
    }

    /// [`MetaStore::txn`] without awaiting: the election's drop guard
    /// resigns with it.
    pub(crate) fn txn_now(&self, compares: &[Compare], ops: &[Op]) -> StoreResult<TxnOutcome> {
        self.with_state(|state| state.txn(compares, ops))
    }

    fn start_expiry(&self) {
        if !self.inner.expiry_started.swap(true, Ordering::SeqCst) {
            let wake = Arc::clone(&self.inner.wake_expiry);
            tokio::spawn(expire_leases(Arc::downgrade(&self.inner), wake));
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is consistent between calls; a panic elsewhere cannot
        // leave it half-written, since no method panics midway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, state: &State) {
        self.revision.send_if_modified(|current| {
            let moved = *current != state.revision();
            *current = state.revision();
            moved
        });
    }

    /// Expires due leases; returns the next deadline.
    fn expire_due(&self) -> Option<Instant> {
        let mut state = self.lock();
        state.expire(Instant::now());
        self.publish(&state);
        state.next_deadline()
    }
}

/// Sleeps until the next lease deadline, expires what is due, repeats;
/// ends when the store is dropped.
async fn expire_leases(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let next = match inner.upgrade() {
            Some(inner) => inner.expire_due(),
            None => return,
        };
        match next {
            Some(deadline) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

#[async_trait]
impl MetaStore for MemoryStore {
    async fn get(&self, key: &str) -> StoreResult<Option<KeyValue>> {
        Ok(self.with_state(|state| state.get(key)))
    }

    async fn range(&self, prefix: &str) -> StoreResult<(Vec<KeyValue>, i64)> {
        Ok(self.with_state(|state| (state.range(prefix), state.revision())))
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> StoreResult<i64> {
        let op = Op::Put {
            key: key.to_owned(),
            value,
            lease,
        };
        Ok(self.txn_now(&[], &[op])?.revision)
    }

    async fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreResult<TxnOutcome> {
        self.txn_now(&compares, &ops)
    }

    async fn grant(&self, ttl: Duration) -> StoreResult<LeaseId> {
        self.start_expiry();
        let ttl = Duration::from_secs((ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)).max(1));
        let id = self.with_state(|state| state.grant(ttl, Instant::now()));
        self.inner.wake_expiry.notify_one();
        Ok(id)
    }

    async fn keep_alive(&self, lease: LeaseId) -> StoreResult<Duration> {
        self.with_state(|state| state.keep_alive(lease, Instant::now()))
    }

    async fn revoke(&self, lease: LeaseId) -> StoreResult<()> {
        self.with_state(|state| state.revoke(lease));
        Ok(())
    }

    async fn watch(
        &self,
        prefix: &str,
        from_revision: i64,
    ) -> StoreResult<BoxStream<'static, StoreResult<WatchEvent>>> {
        let next = if from_revision > 0 {
            from_revision
        } else {
            self.with_state(|state| state.revision()) + 1
        };
        let watcher = Watcher {
            inner: Arc::clone(&self.inner),
            revision: self.inner.revision.subscribe(),
            prefix: prefix.to_owned(),
            next,
            buffer: VecDeque::new(),
            done: false,
        };
        Ok(stream::unfold(watcher, |mut watcher| async move {
            let item = watcher.next().await?;
            Some((item, watcher))
        })
        .boxed())
    }
}

/// One watch: reads the shared history from `next` on, waiting for the
/// revision to move when it has caught up. The history is the only queue,
/// bounded; a watcher that falls behind it gets an error.
struct Watcher {
    inner: Arc<Inner>,
    revision: watch::Receiver<i64>,
    prefix: String,
    next: i64,
    buffer: VecDeque<WatchEvent>,
    done: bool,
}

impl Watcher {
    async fn next(&mut self) -> Option<StoreResult<WatchEvent>> {
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some(Ok(event));
            }
            if self.done {
                return None;
            }
            // Mark the revision seen before reading, so a write after the
            // read wakes `changed` below.
            self.revision.borrow_and_update();
            {
                let mut state = self.inner.lock();
                state.expire(Instant::now());
                self.inner.publish(&state);
                match state.events_since(&self.prefix, self.next) {
                    Ok(events) => {
                        self.buffer.extend(events);
                        self.next = self.next.max(state.revision() + 1);
                    }
                    Err(compacted) => {
                        self.done = true;
                        return Some(Err(StoreError::Unavailable(format!(
                            "watch on {:?} from revision {}: revisions up to {compacted} are compacted",
                            self.prefix, self.next
                        ))));
                    }
                }
            }
            if self.buffer.is_empty() && self.revision.changed().await.is_err() {
                return None;
            }
        }
    }
}
