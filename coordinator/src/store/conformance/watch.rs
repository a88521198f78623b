//! Watches: live events, lease-expiry deletes, replay.

use futures::stream::BoxStream;
use futures::StreamExt;

use super::{put, unique_prefix, Checked, Conformance, DEADLINE, SHORT_TTL};
use crate::store::{MetaStore, Op, StoreResult, WatchEvent};

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

async fn watch(store: &impl MetaStore, prefix: &str, from: i64) -> Result<Events, String> {
    let events = store.watch(prefix, from).await;
    events.map_err(|e| format!("watch {prefix} from {from}: {e}"))
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
    let s = Checked { store };
    let p = unique_prefix("watch");
    let key = |k: &str| format!("{p}{k}");
    let (_, at) = s.range(&p).await?;
    let mut events = watch(store, &p, at + 1).await?;

    let r1 = s.put(&key("a"), "a", None).await?;
    s.put(&format!("{}x", p.trim_end_matches('/')), "outside", None)
        .await?;
    let r2 = s
        .txn(vec![], vec![Op::Delete { key: key("a") }])
        .await?
        .revision;
    let r3 = s
        .txn(vec![], vec![put(&key("c"), "c"), put(&key("d"), "d")])
        .await?
        .revision;
    let lease = s.grant(SHORT_TTL).await?;
    let r4 = s.put(&key("e"), "e", Some(lease)).await?;

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
            let last = expected.1.chars().last().map(String::from);
            ensure_eq!(
                Some(String::from_utf8_lossy(&kv.value).into_owned()),
                last,
                "value"
            );
        }
    }
    // Nobody calls the store now: the lease must expire by itself.
    let expired = next_event(&mut events, "the delete of e when its lease expires").await?;
    let (kind, deleted, revision) = summary(&expired);
    ensure_eq!((kind, deleted), ("delete", key("e")), "lease-expiry event");
    ensure!(
        revision > r4,
        "expiry at revision {revision}, not after {r4}"
    );
    Ok(())
}

/// A watch from an older revision replays the events since, then goes on
/// with new ones.
pub async fn conformance_watch_replay(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("replay");
    let mut revisions = Vec::new();
    for k in ["a", "b", "c"] {
        revisions.push(s.put(&format!("{p}{k}"), k, None).await?);
    }
    let mut events = watch(store, &p, revisions[1]).await?;
    for (k, r) in [("b", revisions[1]), ("c", revisions[2])] {
        let event = next_event(&mut events, &format!("the replay of {k}")).await?;
        ensure_eq!(
            summary(&event),
            ("put", format!("{p}{k}"), r),
            "replayed event"
        );
    }
    let r = s.put(&format!("{p}d"), "d", None).await?;
    let event = next_event(&mut events, "the put of d").await?;
    ensure_eq!(
        summary(&event),
        ("put", format!("{p}d"), r),
        "a live event after replay"
    );

    let mut all = watch(store, &p, revisions[0]).await?;
    let first = next_event(&mut all, "the replay of a").await?;
    ensure_eq!(
        summary(&first),
        ("put", format!("{p}a"), revisions[0]),
        "first replayed"
    );
    Ok(())
}
