//! Keys and transactions.

use super::{put, unique_prefix, Checked, Conformance};
use crate::store::{Compare, MetaStore, Op, StoreError, MAX_TXN_OPS};

/// Get, put and range keep etcd's revisions: one counter, advanced by
/// every write; `create_revision` kept across updates; ranges sorted by key.
pub async fn conformance_get_put_range(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("kv");
    let (a, b) = (format!("{p}a"), format!("{p}b"));
    ensure_eq!(s.get(&a).await?, None, "an absent key");

    let r1 = s.put(&a, "1", None).await?;
    let kv = s.present(&a).await?;
    ensure_eq!(kv.value, b"1".to_vec(), "value of a");
    ensure_eq!((kv.create_revision, kv.mod_revision), (r1, r1), "a new key");
    ensure_eq!(kv.lease, 0, "lease of a key put without one");

    let r2 = s.put(&a, "2", None).await?;
    ensure!(
        r2 > r1,
        "a second put advances the revision: {r2} after {r1}"
    );
    let kv = s.present(&a).await?;
    ensure_eq!(
        (kv.create_revision, kv.mod_revision),
        (r1, r2),
        "an updated key"
    );

    let r3 = s.put(&b, "3", None).await?;
    ensure!(r3 > r2, "revision {r3} after {r2}");
    let (kvs, at) = s.range(&p).await?;
    let keys: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
    ensure_eq!(keys, [a.as_str(), b.as_str()], "range is sorted by key");
    ensure!(
        at >= r3,
        "range revision {at} is older than the last put {r3}"
    );
    ensure_eq!(kvs[1].mod_revision, r3, "mod revision of b in the range");

    ensure_eq!(s.keys(&b).await?, [b.as_str()], "range of one key");
    ensure_eq!(s.keys(&format!("{p}c")).await?.len(), 0, "range of nothing");
    Ok(())
}

/// Compares: `ModRevision` and `CreateRevision` (0: absent); every one
/// must hold for the ops to apply; a transaction's writes share a revision.
pub async fn conformance_txn_compares(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
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
    let set = |compares, value: &str| s.txn(compares, vec![put(&k, value)]);

    let first = set(vec![mod_is(0), created_at(0)], "1").await?;
    ensure!(
        first.succeeded,
        "ModRevision 0 and CreateRevision 0 hold when absent"
    );
    let r1 = first.revision;
    let kv = s.present(&k).await?;
    ensure_eq!(
        (kv.create_revision, kv.mod_revision),
        (r1, r1),
        "a key from a txn"
    );

    let again = set(vec![mod_is(0)], "2").await?;
    ensure!(!again.succeeded, "ModRevision 0 fails once the key exists");
    ensure!(
        again.revision >= r1,
        "failed txn at revision {} < {r1}",
        again.revision
    );
    ensure_eq!(
        s.value(&k).await?,
        Some("1".into()),
        "a failed txn writes nothing"
    );

    let update = set(vec![mod_is(r1)], "3").await?;
    ensure!(update.succeeded, "ModRevision equal to the key's holds");
    ensure!(
        update.revision > r1,
        "update at {} after {r1}",
        update.revision
    );
    ensure!(
        !set(vec![mod_is(r1)], "4").await?.succeeded,
        "a stale ModRevision fails"
    );

    let fenced = set(vec![created_at(r1)], "5").await?;
    ensure!(fenced.succeeded, "CreateRevision holds across updates");
    let absent = set(vec![created_at(0)], "6").await?;
    ensure!(
        !absent.succeeded,
        "CreateRevision 0 fails for a present key"
    );
    let other = Compare::ModRevision {
        key: format!("{p}absent"),
        revision: 1,
    };
    let partial = set(vec![created_at(r1), other], "7").await?;
    ensure!(!partial.succeeded, "one failing compare fails the txn");
    ensure_eq!(
        s.value(&k).await?,
        Some("5".into()),
        "value after the compares"
    );

    let (x, y) = (format!("{p}x"), format!("{p}y"));
    let both = s.txn(vec![], vec![put(&x, "x"), put(&y, "y")]).await?;
    ensure!(both.succeeded, "a txn without compares applies");
    for key in [&x, &y] {
        let kv = s.present(key).await?;
        ensure_eq!(
            kv.mod_revision,
            both.revision,
            "{key} written at the txn's revision"
        );
    }
    Ok(())
}

/// `Delete` removes one key, `DeletePrefix` every key under a prefix;
/// deleting an absent key is no error; a deleted key compares as absent
/// and comes back with a new create revision.
pub async fn conformance_txn_delete(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("delete");
    let [a, ab, a_x, b] = ["a", "ab", "a/x", "b"].map(|k| format!("{p}{k}"));
    let puts = [&a, &ab, &a_x, &b].map(|k| put(k, "v")).to_vec();
    s.txn(vec![], puts).await?;

    let prefix = Op::DeletePrefix {
        prefix: format!("{p}a"),
    };
    ensure!(
        s.txn(vec![], vec![prefix]).await?.succeeded,
        "delete prefix applies"
    );
    ensure_eq!(
        s.keys(&p).await?,
        [b.as_str()],
        "keys left after deleting prefix {p}a"
    );

    let old = s.present(&b).await?;
    let delete = |key: &str| Op::Delete {
        key: key.to_owned(),
    };
    s.txn(vec![], vec![delete(&b)]).await?;
    ensure_eq!(s.get(&b).await?, None, "a deleted key");
    let nothing = s.txn(vec![], vec![delete(&format!("{p}nothing"))]).await?;
    ensure!(nothing.succeeded, "deleting an absent key succeeds");

    let gone = Compare::ModRevision {
        key: b.clone(),
        revision: 0,
    };
    let again = s.txn(vec![gone], vec![put(&b, "again")]).await?;
    ensure!(again.succeeded, "a deleted key compares as absent");
    let new = s.present(&b).await?;
    ensure!(
        new.create_revision > old.mod_revision,
        "a recreated key has a new create revision: {} after {}",
        new.create_revision,
        old.mod_revision
    );
    Ok(())
}

/// At most [`MAX_TXN_OPS`] ops and as many compares per transaction
/// (`TooManyOps`); a transaction may not write one key twice (`Other`, as
/// etcd's "duplicate key given in txn request").
pub async fn conformance_txn_limits(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("limits");
    let puts = |n: usize| -> Vec<Op> { (0..n).map(|i| put(&format!("{p}{i:03}"), "v")).collect() };
    let full = s.txn(vec![], puts(MAX_TXN_OPS)).await?;
    ensure!(full.succeeded, "a txn of {MAX_TXN_OPS} ops applies");
    ensure_eq!(
        s.keys(&p).await?.len(),
        MAX_TXN_OPS,
        "keys written by the full txn"
    );

    let over = MAX_TXN_OPS + 1;
    match store.txn(vec![], puts(over)).await {
        Err(StoreError::TooManyOps(n)) => ensure_eq!(n, over, "reported op count"),
        other => return Err(format!("{over} ops: want TooManyOps, got {other:?}")),
    }
    let compares = (0..over)
        .map(|i| Compare::ModRevision {
            key: format!("{p}{i:03}"),
            revision: 0,
        })
        .collect();
    match store.txn(compares, vec![]).await {
        Err(StoreError::TooManyOps(_)) => {}
        other => return Err(format!("{over} compares: want TooManyOps, got {other:?}")),
    }

    let a = format!("{p}000");
    match store.txn(vec![], vec![put(&a, "1"), put(&a, "2")]).await {
        Err(StoreError::Other(_)) => {}
        other => return Err(format!("two puts of one key: want Other, got {other:?}")),
    }
    let covered = Op::DeletePrefix { prefix: p.clone() };
    match store.txn(vec![], vec![put(&a, "1"), covered]).await {
        Err(StoreError::Other(_)) => {}
        other => {
            return Err(format!(
                "a put under a deleted prefix: want Other, got {other:?}"
            ))
        }
    }
    ensure_eq!(
        s.value(&a).await?,
        Some("v".into()),
        "rejected txns write nothing"
    );
    Ok(())
}
