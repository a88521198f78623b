//! Leases: grant, keep-alive, revoke, expiry.

use std::time::Duration;

use tokio::time::Instant;

use super::{put, put_leased, unique_prefix, Checked, Conformance, DEADLINE, POLL, SHORT_TTL};
use crate::store::{MetaStore, StoreError, StoreResult};

/// Grant, keep-alive and revoke: revoking deletes the lease's keys (those
/// still attached to it); a revoked lease is `LeaseNotFound` to every call
/// but a second revoke.
pub async fn conformance_lease(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("lease");
    let ttl = Duration::from_secs(60);
    let lease = s.grant(ttl).await?;
    let [held, free, moved] = ["held", "free", "moved"].map(|k| format!("{p}{k}"));
    s.put(&held, "h", Some(lease)).await?;
    s.put(&free, "f", None).await?;
    s.put(&moved, "m", Some(lease)).await?;
    s.put(&moved, "m", None).await?;
    ensure_eq!(
        s.present(&held).await?.lease,
        lease,
        "lease of a key put under it"
    );
    ensure_eq!(
        s.present(&moved).await?.lease,
        0,
        "lease of a key put again without"
    );

    let renewed = store
        .keep_alive(lease)
        .await
        .map_err(|e| format!("keep-alive: {e}"))?;
    ensure!(
        renewed >= ttl,
        "keep-alive TTL {renewed:?} below the granted {ttl:?}"
    );

    store
        .revoke(lease)
        .await
        .map_err(|e| format!("revoke: {e}"))?;
    ensure_eq!(s.value(&held).await?, None, "a revoked lease's key");
    ensure_eq!(
        s.value(&free).await?,
        Some("f".into()),
        "a key without lease"
    );
    ensure_eq!(
        s.value(&moved).await?,
        Some("m".into()),
        "a key moved off the lease"
    );
    store
        .revoke(lease)
        .await
        .map_err(|e| format!("second revoke: {e}"))?;

    let not_found = |result: StoreResult<()>, call: &str| match result {
        Err(StoreError::LeaseNotFound(id)) if id == lease => Ok(()),
        other => Err(format!(
            "{call} with a revoked lease: want LeaseNotFound, got {other:?}"
        )),
    };
    not_found(store.keep_alive(lease).await.map(drop), "keep-alive")?;
    let put_under = store.put(&held, b"h".to_vec(), Some(lease)).await;
    not_found(put_under.map(drop), "put")?;
    let txn = store.txn(vec![], vec![put(&free, "g"), put_leased(&held, "h", lease)]);
    not_found(txn.await.map(drop), "txn")?;
    ensure_eq!(s.value(&held).await?, None, "a put under a revoked lease");
    ensure_eq!(s.value(&free).await?, Some("f".into()), "a txn that failed");
    Ok(())
}

/// A short lease lives while renewed; once renewals stop it expires and
/// its keys vanish, without anyone calling the store.
pub async fn conformance_lease_expiry(store: &impl MetaStore) -> Conformance {
    let s = Checked { store };
    let p = unique_prefix("expiry");
    let lease = s.grant(SHORT_TTL).await?;
    let [a, b, free] = ["a", "b", "free"].map(|k| format!("{p}{k}"));
    let puts = vec![
        put_leased(&a, "a", lease),
        put_leased(&b, "b", lease),
        put(&free, "f"),
    ];
    s.txn(vec![], puts).await?;

    // Renew for three TTLs: the keys stay.
    let until = Instant::now() + 3 * SHORT_TTL;
    while Instant::now() < until {
        store
            .keep_alive(lease)
            .await
            .map_err(|e| format!("keep-alive: {e}"))?;
        ensure!(
            s.get(&a).await?.is_some(),
            "{a} expired while its lease was renewed"
        );
        tokio::time::sleep(SHORT_TTL / 4).await;
    }

    let deadline = Instant::now() + DEADLINE;
    while s.get(&a).await?.is_some() || s.get(&b).await?.is_some() {
        ensure!(
            Instant::now() < deadline,
            "{a} or {b} still present {DEADLINE:?} after renewals of their {SHORT_TTL:?} lease stopped"
        );
        tokio::time::sleep(POLL).await;
    }
    ensure_eq!(
        s.value(&free).await?,
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
