//! The conformance suite: what every [`MetaStore`] and [`Election`] must
//! do, written once and run against [`super::MemoryStore`] and against a
//! real etcd (`coordinator/tests/store.rs`).
//!
//! Each function writes under a fresh key prefix ([`unique_prefix`]), so
//! suites can share one etcd, and returns `Err` with what differed. Assertions
//! about revisions are relative (later, equal), never absolute, since other
//! suites may write to the same etcd meanwhile. Waits use tokio's clock and
//! poll with a deadline, so the suite runs under `tokio::time::pause()` as
//! well as in real time.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::time::Instant;

use super::{Compare, Election, MetaStore, Op, StoreError, StoreResult, WatchEvent, MAX_TXN_OPS};

/// The outcome of one conformance check: `Err` says what differed.
pub type Conformance = Result<(), String>;

/// The TTL of the leases that are meant to expire.
const SHORT_TTL: Duration = Duration::from_secs(1);
/// How long a lease may outlive its TTL before the check fails (etcd
/// checks for expired leases every 500 ms and may round a TTL up).
const EXPIRY_DEADLINE: Duration = Duration::from_secs(10);
/// How long to wait for a watch event or a campaign that must come.
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

macro_rules! ensure {
    ($cond:expr, $($what:tt)+) => {
        if !$cond {
            return Err(format!($($what)+));
        }
    };
}

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

/// Maps a store error to the suite's error, naming the step.
fn step(what: impl Display) -> impl FnOnce(StoreError) -> String {
    move |error| format!("{what}: {error}")
}

fn put(key: &str, value: &str) -> Op {
    Op::Put {
        key: key.to_owned(),
        value: value.as_bytes().to_vec(),
        lease: None,
    }
}

async fn value(store: &impl MetaStore, key: &str) -> Result<Option<String>, String> {
    let kv = store.get(key).await.map_err(step(format!("get {key}")))?;
    Ok(kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
}

/// Get, put and range keep etcd's revisions: one counter, advanced by
/// every write; `create_revision` kept across updates.
pub async fn conformance_get_put_range(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("kv");
    let (a, b) = (format!("{p}a"), format!("{p}b"));
    ensure_eq!(
        store.get(&a).await.map_err(step("get absent"))?,
        None,
        "absent key"
    );

    let r1 = store
        .put(&a, b"1".to_vec(), None)
        .await
        .map_err(step("put a"))?;
    let kv = store
        .get(&a)
        .await
        .map_err(step("get a"))?
        .ok_or("a vanished")?;
    ensure_eq!(kv.value, b"1".to_vec(), "value of a");
    ensure_eq!(
        (kv.create_revision, kv.mod_revision),
        (r1, r1),
        "revisions of a new key"
    );
    ensure_eq!(kv.lease, 0, "lease of a key put without one");

    let r2 = store
        .put(&a, b"2".to_vec(), None)
        .await
        .map_err(step("put a again"))?;
    ensure!(
        r2 > r1,
        "a second put advances the revision: {r2} after {r1}"
    );
    let kv = store
        .get(&a)
        .await
        .map_err(step("get a"))?
        .ok_or("a vanished")?;
    ensure_eq!(
        (kv.create_revision, kv.mod_revision),
        (r1, r2),
        "revisions after update"
    );

    let r3 = store
        .put(&b, b"3".to_vec(), None)
        .await
        .map_err(step("put b"))?;
    ensure!(r3 > r2, "revision {r3} after {r2}");
    let (kvs, at) = store.range(&p).await.map_err(step("range"))?;
    let keys: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
    ensure_eq!(keys, vec![a.as_str(), b.as_str()], "range is sorted by key");
    ensure!(
        at >= r3,
        "range revision {at} is older than the last put {r3}"
    );
    ensure_eq!(kvs[1].mod_revision, r3, "mod revision of b in the range");

    let (only_b, _) = store.range(&b).await.map_err(step("range b"))?;
    ensure_eq!(only_b.len(), 1, "range of one key's prefix");
    let (none, _) = store
        .range(&format!("{p}c"))
        .await
        .map_err(step("range c"))?;
    ensure!(none.is_empty(), "range of an empty prefix: {none:?}");
    Ok(())
}

/// Compares: `ModRevision` and `CreateRevision` (0: absent); all must hold
/// for the ops to apply; a transaction's writes share one revision.
pub async fn conformance_txn_compares(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("txn");
    let k = format!("{p}k");
    let mod_is = |revision| Compare::ModRevision {
        key: k.clone(),
        revision,
    };
    let created_at = |revision| Compare::CreateRevision {
        key: k.clone(),
        revision,
    };
    let txn = |compares: Vec<Compare>, value: &str| store.txn(compares, vec![put(&k, value)]);

    let first = txn(vec![mod_is(0), created_at(0)], "1")
        .await
        .map_err(step("create"))?;
    ensure!(
        first.succeeded,
        "ModRevision 0 and CreateRevision 0 hold for an absent key"
    );
    let r1 = first.revision;
    let kv = store
        .get(&k)
        .await
        .map_err(step("get k"))?
        .ok_or("k missing")?;
    ensure_eq!(
        (kv.create_revision, kv.mod_revision),
        (r1, r1),
        "revisions from a txn"
    );

    let again = txn(vec![mod_is(0)], "2")
        .await
        .map_err(step("create again"))?;
    ensure!(!again.succeeded, "ModRevision 0 fails once the key exists");
    ensure!(
        again.revision >= r1,
        "failed txn revision {} < {r1}",
        again.revision
    );
    ensure_eq!(
        value(store, &k).await?,
        Some("1".into()),
        "a failed txn writes nothing"
    );

    let update = txn(vec![mod_is(r1)], "3").await.map_err(step("update"))?;
    ensure!(update.succeeded, "ModRevision equal to the key's holds");
    ensure!(
        update.revision > r1,
        "update revision {} after {r1}",
        update.revision
    );
    let stale = txn(vec![mod_is(r1)], "4")
        .await
        .map_err(step("stale update"))?;
    ensure!(!stale.succeeded, "a stale ModRevision fails");

    let fenced = txn(vec![created_at(r1)], "5")
        .await
        .map_err(step("fenced update"))?;
    ensure!(fenced.succeeded, "CreateRevision holds across updates");
    let wrong = txn(vec![created_at(0)], "6")
        .await
        .map_err(step("create fence"))?;
    ensure!(!wrong.succeeded, "CreateRevision 0 fails for a present key");
    let other = Compare::ModRevision {
        key: format!("{p}absent"),
        revision: 1,
    };
    let partial = txn(vec![created_at(r1), other], "7")
        .await
        .map_err(step("two compares"))?;
    ensure!(!partial.succeeded, "one failing compare fails the txn");
    ensure_eq!(
        value(store, &k).await?,
        Some("5".into()),
        "value after the compares"
    );

    let (x, y) = (format!("{p}x"), format!("{p}y"));
    let both = store
        .txn(vec![], vec![put(&x, "x"), put(&y, "y")])
        .await
        .map_err(step("two puts"))?;
    ensure!(both.succeeded, "a txn without compares applies");
    for key in [&x, &y] {
        let kv = store
            .get(key)
            .await
            .map_err(step("get"))?
            .ok_or("key missing")?;
        ensure_eq!(
            kv.mod_revision,
            both.revision,
            "{key} written at the txn's revision"
        );
    }
    Ok(())
}

/// `Delete` removes one key, `DeletePrefix` every key under a prefix;
/// deleting an absent key is no error; a deleted key compares as absent.
pub async fn conformance_txn_delete(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("delete");
    let keys = ["a", "ab", "a/x", "b"].map(|k| format!("{p}{k}"));
    let puts = keys.iter().map(|k| put(k, "v")).collect();
    store
        .txn(vec![], puts)
        .await
        .map_err(step("put four keys"))?;

    let prefix = Op::DeletePrefix {
        prefix: format!("{p}a"),
    };
    let deleted = store
        .txn(vec![], vec![prefix])
        .await
        .map_err(step("delete prefix"))?;
    ensure!(deleted.succeeded, "delete prefix applies");
    let (left, _) = store.range(&p).await.map_err(step("range"))?;
    let left: Vec<&str> = left.iter().map(|kv| kv.key.as_str()).collect();
    ensure_eq!(
        left,
        vec![keys[3].as_str()],
        "keys left after deleting prefix {p}a"
    );

    let old = store
        .get(&keys[3])
        .await
        .map_err(step("get b"))?
        .ok_or("b missing")?;
    let delete = |key: &str| Op::Delete {
        key: key.to_owned(),
    };
    store
        .txn(vec![], vec![delete(&keys[3])])
        .await
        .map_err(step("delete b"))?;
    ensure_eq!(
        store.get(&keys[3]).await.map_err(step("get b"))?,
        None,
        "deleted key"
    );
    let absent = store
        .txn(vec![], vec![delete(&format!("{p}nothing"))])
        .await
        .map_err(step("delete an absent key"))?;
    ensure!(absent.succeeded, "deleting an absent key succeeds");

    let gone = Compare::ModRevision {
        key: keys[3].clone(),
        revision: 0,
    };
    let again = store
        .txn(vec![gone], vec![put(&keys[3], "again")])
        .await
        .map_err(step("recreate b"))?;
    ensure!(again.succeeded, "a deleted key compares as absent");
    let new = store
        .get(&keys[3])
        .await
        .map_err(step("get b"))?
        .ok_or("b missing")?;
    ensure!(
        new.create_revision > old.mod_revision,
        "a recreated key has a new create revision: {} after {}",
        new.create_revision,
        old.mod_revision
    );
    Ok(())
}

/// At most [`MAX_TXN_OPS`] ops and compares per txn (`TooManyOps`); a txn
/// may not write one key twice (`Other`, as etcd's "duplicate key").
pub async fn conformance_txn_limits(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("limits");
    let puts = |n: usize| (0..n).map(|i| put(&format!("{p}{i:03}"), "v")).collect();
    let full = store
        .txn(vec![], puts(MAX_TXN_OPS))
        .await
        .map_err(step("128 ops"))?;
    ensure!(full.succeeded, "a txn of {MAX_TXN_OPS} ops applies");
    let (kvs, _) = store.range(&p).await.map_err(step("range"))?;
    ensure_eq!(kvs.len(), MAX_TXN_OPS, "keys written by the full txn");

    match store.txn(vec![], puts(MAX_TXN_OPS + 1)).await {
        Err(StoreError::TooManyOps(n)) => ensure_eq!(n, MAX_TXN_OPS + 1, "reported op count"),
        other => {
            return Err(format!(
                "{} ops: want TooManyOps, got {other:?}",
                MAX_TXN_OPS + 1
            ))
        }
    }
    let compares = (0..=MAX_TXN_OPS)
        .map(|i| Compare::ModRevision {
            key: format!("{p}{i:03}"),
            revision: 0,
        })
        .collect();
    match store.txn(compares, vec![]).await {
        Err(StoreError::TooManyOps(_)) => {}
        other => return Err(format!("129 compares: want TooManyOps, got {other:?}")),
    }

    let a = format!("{p}000");
    let twice = vec![put(&a, "1"), put(&a, "2")];
    match store.txn(vec![], twice).await {
        Err(StoreError::Other(_)) => {}
        other => return Err(format!("two puts of one key: want Other, got {other:?}")),
    }
    let covered = vec![put(&a, "1"), Op::DeletePrefix { prefix: p.clone() }];
    match store.txn(vec![], covered).await {
        Err(StoreError::Other(_)) => {}
        other => {
            return Err(format!(
                "a put inside a deleted prefix: want Other, got {other:?}"
            ))
        }
    }
    ensure_eq!(
        value(store, &a).await?,
        Some("v".into()),
        "rejected txns write nothing"
    );
    Ok(())
}

/// Grant, keep-alive and revoke: revoking deletes the lease's keys (only
/// those still attached); a revoked lease is `LeaseNotFound` everywhere
/// except a second revoke.
pub async fn conformance_lease(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("lease");
    let ttl = Duration::from_secs(60);
    let lease = store.grant(ttl).await.map_err(step("grant"))?;
    let (held, free, moved) = (format!("{p}held"), format!("{p}free"), format!("{p}moved"));
    store
        .put(&held, b"h".to_vec(), Some(lease))
        .await
        .map_err(step("put held"))?;
    store
        .put(&free, b"f".to_vec(), None)
        .await
        .map_err(step("put free"))?;
    store
        .put(&moved, b"m".to_vec(), Some(lease))
        .await
        .map_err(step("put moved"))?;
    store
        .put(&moved, b"m".to_vec(), None)
        .await
        .map_err(step("detach moved"))?;
    let kv = store
        .get(&held)
        .await
        .map_err(step("get held"))?
        .ok_or("held missing")?;
    ensure_eq!(kv.lease, lease, "lease of a key put under it");

    let renewed = store.keep_alive(lease).await.map_err(step("keep alive"))?;
    ensure!(
        renewed >= ttl,
        "keep-alive TTL {renewed:?} below the granted {ttl:?}"
    );

    store.revoke(lease).await.map_err(step("revoke"))?;
    ensure_eq!(value(store, &held).await?, None, "a revoked lease's key");
    ensure_eq!(
        value(store, &free).await?,
        Some("f".into()),
        "a key without lease"
    );
    ensure_eq!(
        value(store, &moved).await?,
        Some("m".into()),
        "a key put again without lease"
    );
    store.revoke(lease).await.map_err(step("revoke twice"))?;

    let not_found = |result: StoreResult<()>, what: &str| match result {
        Err(StoreError::LeaseNotFound(id)) if id == lease => Ok(()),
        other => Err(format!(
            "{what} of a revoked lease: want LeaseNotFound, got {other:?}"
        )),
    };
    not_found(store.keep_alive(lease).await.map(drop), "keep-alive")?;
    let put_under = store.put(&held, b"h".to_vec(), Some(lease)).await;
    not_found(put_under.map(drop), "put")?;
    let op = Op::Put {
        key: held.clone(),
        value: b"h".to_vec(),
        lease: Some(lease),
    };
    not_found(store.txn(vec![], vec![op]).await.map(drop), "txn put")?;
    ensure_eq!(
        value(store, &held).await?,
        None,
        "failed puts write nothing"
    );
    Ok(())
}

/// Polls until `key` is gone, or fails after [`EXPIRY_DEADLINE`].
async fn wait_gone(store: &impl MetaStore, key: &str) -> Conformance {
    let deadline = Instant::now() + EXPIRY_DEADLINE;
    while value(store, key).await?.is_some() {
        ensure!(
            Instant::now() < deadline,
            "{key} still present {EXPIRY_DEADLINE:?} after its lease should have expired"
        );
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// A short lease lives while renewed; once renewals stop, it expires and
/// its keys vanish without anyone calling the store.
pub async fn conformance_lease_expiry(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("expiry");
    let lease = store.grant(SHORT_TTL).await.map_err(step("grant"))?;
    let (a, b, free) = (format!("{p}a"), format!("{p}b"), format!("{p}free"));
    let ops = vec![
        Op::Put {
            key: a.clone(),
            value: b"a".to_vec(),
            lease: Some(lease),
        },
        Op::Put {
            key: b.clone(),
            value: b"b".to_vec(),
            lease: Some(lease),
        },
        put(&free, "f"),
    ];
    store.txn(vec![], ops).await.map_err(step("put"))?;

    // Renew for three TTLs: the keys stay.
    let until = Instant::now() + 3 * SHORT_TTL;
    while Instant::now() < until {
        store.keep_alive(lease).await.map_err(step("keep alive"))?;
        ensure!(
            value(store, &a).await?.is_some(),
            "{a} expired while renewed"
        );
        tokio::time::sleep(SHORT_TTL / 4).await;
    }

    wait_gone(store, &a).await?;
    wait_gone(store, &b).await?;
    ensure_eq!(
        value(store, &free).await?,
        Some("f".into()),
        "a key without lease"
    );
    match store.keep_alive(lease).await {
        Err(StoreError::LeaseNotFound(id)) if id == lease => Ok(()),
        other => Err(format!(
            "keep-alive after expiry: want LeaseNotFound, got {other:?}"
        )),
    }
}

type Events = BoxStream<'static, StoreResult<WatchEvent>>;

async fn next_event(events: &mut Events, waiting_for: &str) -> Result<WatchEvent, String> {
    match tokio::time::timeout(DEADLINE, events.next()).await {
        Ok(Some(Ok(event))) => Ok(event),
        Ok(Some(Err(error))) => Err(format!("watch failed waiting for {waiting_for}: {error}")),
        Ok(None) => Err(format!("watch ended waiting for {waiting_for}")),
        Err(_) => Err(format!(
            "no watch event in {DEADLINE:?} waiting for {waiting_for}"
        )),
    }
}

/// `(kind, key, revision)` of an event, for comparisons.
fn summary(event: &WatchEvent) -> (&'static str, String, i64) {
    match event {
        WatchEvent::Put(kv) => ("put", kv.key.clone(), kv.mod_revision),
        WatchEvent::Delete { key, mod_revision } => ("delete", key.clone(), *mod_revision),
    }
}

/// A watch from a range's revision + 1 sees every later put and delete
/// under its prefix, lease-expiry deletes included, in revision order, and
/// nothing outside the prefix.
pub async fn conformance_watch(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("watch");
    let key = |k: &str| format!("{p}{k}");
    let (_, at) = store.range(&p).await.map_err(step("range"))?;
    let mut events = store.watch(&p, at + 1).await.map_err(step("watch"))?;

    let r1 = store
        .put(&key("a"), b"1".to_vec(), None)
        .await
        .map_err(step("put a"))?;
    let outside = format!("{}x", p.trim_end_matches('/'));
    store
        .put(&outside, b"x".to_vec(), None)
        .await
        .map_err(step("put outside"))?;
    let delete = Op::Delete { key: key("a") };
    let r2 = store
        .txn(vec![], vec![delete])
        .await
        .map_err(step("delete a"))?
        .revision;
    let pair = vec![put(&key("c"), "c"), put(&key("d"), "d")];
    let r3 = store
        .txn(vec![], pair)
        .await
        .map_err(step("put c, d"))?
        .revision;
    let lease = store.grant(SHORT_TTL).await.map_err(step("grant"))?;
    let r4 = store
        .put(&key("e"), b"e".to_vec(), Some(lease))
        .await
        .map_err(step("put e"))?;

    let want = [
        ("put", key("a"), r1),
        ("delete", key("a"), r2),
        ("put", key("c"), r3),
        ("put", key("d"), r3),
        ("put", key("e"), r4),
    ];
    for (i, expected) in want.iter().enumerate() {
        let event = next_event(&mut events, &format!("{expected:?}")).await?;
        ensure_eq!(summary(&event), *expected, "event {i}");
        if let WatchEvent::Put(kv) = &event {
            ensure!(!kv.value.is_empty(), "put event {i} carries the value");
        }
    }
    // Nobody calls the store now: the lease must expire on its own.
    let expired = next_event(&mut events, "the delete of e when its lease expires").await?;
    let (kind, deleted, revision) = summary(&expired);
    ensure_eq!((kind, deleted), ("delete", key("e")), "lease-expiry event");
    ensure!(revision > r4, "expiry revision {revision} after {r4}");
    Ok(())
}

/// A watch from an older revision replays the events since, then goes on.
pub async fn conformance_watch_replay(store: &impl MetaStore) -> Conformance {
    let p = unique_prefix("replay");
    let mut revisions = Vec::new();
    for k in ["a", "b", "c"] {
        let r = store
            .put(&format!("{p}{k}"), k.as_bytes().to_vec(), None)
            .await;
        revisions.push(r.map_err(step(format!("put {k}")))?);
    }
    let mut events = store.watch(&p, revisions[1]).await.map_err(step("watch"))?;
    for (k, r) in [("b", revisions[1]), ("c", revisions[2])] {
        let event = next_event(&mut events, &format!("replay of {k}")).await?;
        ensure_eq!(
            summary(&event),
            ("put", format!("{p}{k}"), r),
            "replayed event"
        );
    }
    let r = store
        .put(&format!("{p}d"), b"d".to_vec(), None)
        .await
        .map_err(step("put d"))?;
    let event = next_event(&mut events, "the put of d").await?;
    ensure_eq!(
        summary(&event),
        ("put", format!("{p}d"), r),
        "live event after replay"
    );

    let mut all = store
        .watch(&p, revisions[0])
        .await
        .map_err(step("watch from a"))?;
    let first = next_event(&mut all, "replay of a").await?;
    ensure_eq!(
        summary(&first),
        ("put", format!("{p}a"), revisions[0]),
        "first replayed"
    );
    Ok(())
}

/// Two candidates of one election: the first leads at once and `leader()`
/// reports it; its fence holds; the second's campaign completes only once
/// the first resigns (drops its [`super::Leadership`]), after which the old
/// fence fails. Deleting the leader's key makes its `lost` turn `true`.
/// `new_election(name)` makes a candidate's view of election `name` on
/// `store`.
pub async fn conformance_election<S, E>(
    store: &S,
    new_election: impl Fn(String) -> E,
) -> Conformance
where
    S: MetaStore,
    E: Election,
{
    let p = unique_prefix("election");
    let name = format!("{p}leader");
    let (first, second) = (new_election(name.clone()), new_election(name));
    ensure_eq!(
        first.leader().await.map_err(step("leader"))?,
        None,
        "leader before any campaign"
    );

    let a = tokio::time::timeout(DEADLINE, first.campaign("a.example:1"))
        .await
        .map_err(|_| format!("the only candidate did not lead within {DEADLINE:?}"))?
        .map_err(step("campaign a"))?;
    ensure!(!*a.lost.borrow(), "a new leader is not lost");
    let seen = second.leader().await.map_err(step("leader"))?;
    ensure_eq!(
        seen,
        Some("a.example:1".to_owned()),
        "leader seen by the other candidate"
    );
    let data = format!("{p}data");
    let write = |fence: Compare, value: &str| store.txn(vec![fence], vec![put(&data, value)]);
    let fenced = write(a.fence(), "a").await.map_err(step("fenced write"))?;
    ensure!(fenced.succeeded, "the leader's fence holds");

    let mut b = second.campaign("b.example:2");
    let waited = Duration::from_millis(500);
    if tokio::time::timeout(waited, &mut b).await.is_ok() {
        return Err("the second candidate's campaign completed while the first led".into());
    }
    let old_fence = a.fence();
    drop(a);
    let b = tokio::time::timeout(DEADLINE, b)
        .await
        .map_err(|_| format!("the second candidate did not lead within {DEADLINE:?}"))?
        .map_err(step("campaign b"))?;
    let seen = first.leader().await.map_err(step("leader"))?;
    ensure_eq!(
        seen,
        Some("b.example:2".to_owned()),
        "leader after the first resigned"
    );
    let stale = write(old_fence, "a again")
        .await
        .map_err(step("stale write"))?;
    ensure!(!stale.succeeded, "a resigned leader's fence fails");
    let fenced = write(b.fence(), "b")
        .await
        .map_err(step("new leader's write"))?;
    ensure!(fenced.succeeded, "the new leader's fence holds");

    let delete = Op::Delete { key: b.key.clone() };
    store
        .txn(vec![], vec![delete])
        .await
        .map_err(step("delete the leader key"))?;
    let mut lost = b.lost.clone();
    tokio::time::timeout(DEADLINE, lost.wait_for(|lost| *lost))
        .await
        .map_err(|_| format!("lost did not turn true within {DEADLINE:?} of the key's delete"))?
        .map_err(|_| "the leadership's lost sender was dropped".to_owned())?;
    ensure_eq!(
        first.leader().await.map_err(step("leader"))?,
        None,
        "leader once the key is gone"
    );
    Ok(())
}
