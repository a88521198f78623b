//! The metadata store: a small key-value interface with leases, transactions
//! and watches, and leader election on top of it.
//!
//! Two implementations sit behind the same traits: [`MemoryStore`] for
//! single-node runs and the quickstart, and [`EtcdStore`] for production.
//! One conformance suite ([`conformance`]) runs against both, the etcd run
//! against a real etcd on loopback.
//!
//! Keys are plain strings; the coordinator keeps every key of a job under
//! `/tributary/<job>/`. Revisions are etcd's: one store-wide counter that
//! every successful write advances; a key's `mod_revision` is the revision
//! that last wrote it, `create_revision` the one that created it (0: absent).

use std::fmt::Debug;
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tokio::sync::watch;

mod cached;
pub mod conformance;
mod etcd;
mod memory;
mod own_runtime;

pub use cached::{CachedLeader, LEADER_CACHE};
pub use etcd::{Deadlines, EtcdElection, EtcdOptions, EtcdStore, EtcdTls};
pub use memory::{MemoryElection, MemoryStore};
pub use own_runtime::OwnRuntime;

/// An etcd lease id; keys put under a lease vanish when it expires.
pub type LeaseId = i64;

/// The most operations (and compares) one transaction may carry: etcd's
/// default `--max-txn-ops` (128) less the one the etcd store adds to guard
/// a transaction against applying twice.
pub const MAX_TXN_OPS: usize = 127;

/// Errors of the store. `Unavailable` is transient (retry or step down);
/// the others are bugs or misuse.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("metadata store unavailable: {0}")]
    Unavailable(String),
    #[error("lease {0} has expired or does not exist")]
    LeaseNotFound(LeaseId),
    #[error("transaction of {0} operations exceeds the limit of {MAX_TXN_OPS}")]
    TooManyOps(usize),
    #[error("metadata store error: {0}")]
    Other(String),
}

impl StoreError {
    /// Whether the store could not be reached or the leadership fence
    /// failed (transient, or this replica no longer leads), as opposed to
    /// a write the store refused.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// One key with its value and revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    /// The lease the key is attached to; 0 for none.
    pub lease: LeaseId,
}

/// A condition of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key's `mod_revision` equals `revision` (0: the key is absent).
    ModRevision { key: String, revision: i64 },
    /// The key's `create_revision` equals `revision` (0: the key is absent).
    /// Used to fence a leader's writes on its election key.
    CreateRevision { key: String, revision: i64 },
}

/// A write of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put {
        key: String,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    },
    Delete {
        key: String,
    },
    /// Deletes every key starting with `prefix`.
    DeletePrefix {
        prefix: String,
    },
}

/// The outcome of [`MetaStore::txn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnOutcome {
    /// Whether every compare held (and so every op was applied).
    pub succeeded: bool,
    /// The store's revision after the transaction.
    pub revision: i64,
}

/// A change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Put(KeyValue),
    /// The key was deleted, explicitly or because its lease expired.
    Delete {
        key: String,
        mod_revision: i64,
    },
}

/// A key-value store with revisions, leases, transactions and watches.
#[async_trait]
pub trait MetaStore: Send + Sync + Debug + 'static {
    async fn get(&self, key: &str) -> StoreResult<Option<KeyValue>>;

    /// Every key starting with `prefix`, sorted by key, and the store
    /// revision the read saw (pass it + 1 to [`MetaStore::watch`] to miss
    /// nothing).
    async fn range(&self, prefix: &str) -> StoreResult<(Vec<KeyValue>, i64)>;

    /// Puts `key`, under `lease` if given; returns the new revision.
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> StoreResult<i64>;

    /// Applies `ops` atomically if every compare holds; at most
    /// [`MAX_TXN_OPS`] ops.
    async fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> StoreResult<TxnOutcome>;

    /// Grants a lease of `ttl` (whole seconds, at least 1).
    async fn grant(&self, ttl: Duration) -> StoreResult<LeaseId>;

    /// Renews `lease`; `LeaseNotFound` once it has expired.
    async fn keep_alive(&self, lease: LeaseId) -> StoreResult<Duration>;

    /// Revokes `lease`, deleting its keys. Revoking an unknown lease is ok.
    async fn revoke(&self, lease: LeaseId) -> StoreResult<()>;

    /// Changes to keys under `prefix` from revision `from_revision` on, in
    /// revision order. The stream ends (or yields an error) when the watch
    /// breaks; the caller re-reads and watches again.
    async fn watch(
        &self,
        prefix: &str,
        from_revision: i64,
    ) -> StoreResult<BoxStream<'static, StoreResult<WatchEvent>>>;
}

/// Held while this process leads. Writes made as leader are fenced with
/// [`Leadership::fence`], so a deposed leader's writes fail.
#[derive(Debug)]
pub struct Leadership {
    /// The election key this leader owns.
    pub key: String,
    /// Its create revision.
    pub revision: i64,
    /// Turns `true` when leadership is lost (lease lost, key deleted, store
    /// unreachable for longer than the lease). The holder must stop serving.
    pub lost: watch::Receiver<bool>,
    /// Resigns when dropped (best effort).
    pub(crate) _guard: Option<Box<dyn Send + Sync + Debug>>,
}

impl Leadership {
    /// The compare that holds only while this leadership does.
    pub fn fence(&self) -> Compare {
        Compare::CreateRevision {
            key: self.key.clone(),
            revision: self.revision,
        }
    }
}

/// Leader election among coordinator replicas.
#[async_trait]
pub trait Election: Send + Sync + Debug + 'static {
    /// Waits until `candidate` (the address clients should use) leads.
    async fn campaign(&self, candidate: &str) -> StoreResult<Leadership>;

    /// The current leader's address, if any.
    async fn leader(&self) -> StoreResult<Option<String>>;
}
