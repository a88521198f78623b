//! The conformance suite: what every [`MetaStore`] and [`super::Election`] must
//! do, written once and run against [`super::MemoryStore`] and against a
//! real etcd (`tests/tests/coordinator/store.rs`).
//!
//! Each function writes under a fresh key prefix ([`unique_prefix`]), so
//! suites can share one etcd, and returns `Err` saying what differed.
//! Assertions about revisions are relative (later, equal), never absolute,
//! since other suites may write to the same etcd meanwhile. Waits use
//! tokio's clock and poll with a deadline, so the suite runs under
//! `tokio::time::pause()` as well as in real time.
//!
//! ## Layout
//!
//! - `kv`: get, put, range, transactions (compares, deletes, limits).
//! - `lease`: grant, keep-alive, revoke, expiry.
//! - `watch`: live events, lease-expiry deletes, replay from a revision.
//! - `election`: two candidates, fencing, hand-over, loss.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Compare, KeyValue, LeaseId, MetaStore, Op, StoreError, TxnOutcome};

/// Returns `Err(format!(...))` unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($what:tt)+) => {
        if !$cond {
            return Err(format!($($what)+));
        }
    };
}

/// Returns `Err` naming both sides unless they are equal.
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($what:tt)+) => {
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err(format!("{}: {left:?} != {right:?}", format!($($what)+)));
                }
            }
        }
    };
}

mod election;
mod kv;
mod lease;
mod watch;

pub use election::conformance_election;
pub use kv::{
    conformance_get_put_range, conformance_txn_compares, conformance_txn_delete,
    conformance_txn_limits,
};
pub use lease::{conformance_lease, conformance_lease_expiry};
pub use watch::{conformance_watch, conformance_watch_replay};

/// The outcome of one conformance check: `Err` says what differed.
pub type Conformance = Result<(), String>;

/// The TTL of the leases that are meant to expire.
const SHORT_TTL: Duration = Duration::from_secs(1);
/// How long to wait for what must happen: a watch event, a campaign, a
/// lease's expiry (etcd checks every 500 ms and may round a TTL up).
const DEADLINE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(50);

/// A key prefix no other call (in this process or another) uses:
/// `/conformance/<pid>-<nanos>-<n>/<what>/`.
pub fn unique_prefix(what: &str) -> String {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    format!("/conformance/{}-{nanos}-{call}/{what}/", std::process::id())
}

/// Every [`MetaStore`] check, one after another.
pub async fn run_all(store: &impl MetaStore) -> Conformance {
    named(
        "conformance_get_put_range",
        conformance_get_put_range(store),
    )
    .await?;
    named("conformance_txn_compares", conformance_txn_compares(store)).await?;
    named("conformance_txn_delete", conformance_txn_delete(store)).await?;
    named("conformance_txn_limits", conformance_txn_limits(store)).await?;
    named("conformance_lease", conformance_lease(store)).await?;
    named("conformance_lease_expiry", conformance_lease_expiry(store)).await?;
    named("conformance_watch", conformance_watch(store)).await?;
    named("conformance_watch_replay", conformance_watch_replay(store)).await
}

async fn named(name: &str, check: impl Future<Output = Conformance>) -> Conformance {
    check.await.map_err(|error| format!("{name}: {error}"))
}

fn put(key: &str, value: &str) -> Op {
    Op::Put {
        key: key.to_owned(),
        value: value.as_bytes().to_vec(),
        lease: None,
    }
}

fn put_leased(key: &str, value: &str, lease: LeaseId) -> Op {
    Op::Put {
        key: key.to_owned(),
        value: value.as_bytes().to_vec(),
        lease: Some(lease),
    }
}

/// The store under test, with errors turned into the suite's, each naming
/// the call that failed. Checks that expect an error call the store itself.
struct Checked<'a, S> {
    store: &'a S,
}

fn failed(call: impl Display) -> impl FnOnce(StoreError) -> String {
    move |error| format!("{call}: {error}")
}

impl<S: MetaStore> Checked<'_, S> {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, String> {
        self.store
            .get(key)
            .await
            .map_err(failed(format!("get {key}")))
    }

    /// The key, which must exist.
    async fn present(&self, key: &str) -> Result<KeyValue, String> {
        self.get(key)
            .await?
            .ok_or_else(|| format!("{key} is missing"))
    }

    /// The key's value as text, if present.
    async fn value(&self, key: &str) -> Result<Option<String>, String> {
        let kv = self.get(key).await?;
        Ok(kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
    }

    async fn put(&self, key: &str, value: &str, lease: Option<LeaseId>) -> Result<i64, String> {
        let bytes = value.as_bytes().to_vec();
        let put = self.store.put(key, bytes, lease).await;
        put.map_err(failed(format!("put {key}")))
    }

    async fn range(&self, prefix: &str) -> Result<(Vec<KeyValue>, i64), String> {
        let range = self.store.range(prefix).await;
        range.map_err(failed(format!("range {prefix}")))
    }

    /// The keys under `prefix`, in the order the store gives them.
    async fn keys(&self, prefix: &str) -> Result<Vec<String>, String> {
        let (kvs, _) = self.range(prefix).await?;
        Ok(kvs.into_iter().map(|kv| kv.key).collect())
    }

    async fn txn(&self, compares: Vec<Compare>, ops: Vec<Op>) -> Result<TxnOutcome, String> {
        let what = format!("txn {compares:?} then {ops:?}");
        self.store.txn(compares, ops).await.map_err(failed(what))
    }

    async fn grant(&self, ttl: Duration) -> Result<LeaseId, String> {
        self.store.grant(ttl).await.map_err(failed("grant"))
    }
}
