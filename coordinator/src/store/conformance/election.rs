//! Leader election.

use std::time::Duration;

use super::{put, unique_prefix, Checked, Conformance, DEADLINE};
use crate::store::{Compare, Election, MetaStore, Op};

async fn leader(election: &impl Election) -> Result<Option<String>, String> {
    election.leader().await.map_err(|e| format!("leader: {e}"))
}

/// Two candidates of one election: the first leads at once and `leader()`
/// reports it to both; its fence holds; the second's campaign completes
/// only once the first resigns (drops its [`crate::store::Leadership`]),
/// after which the old fence fails and the new one holds. Deleting the
/// leader's key turns its `lost` to `true` and leaves no leader.
///
/// `new_election(name)` makes one candidate's handle on election `name`,
/// whose keys live on `store`.
pub async fn conformance_election<S, E>(
    store: &S,
    new_election: impl Fn(String) -> E,
) -> Conformance
where
    S: MetaStore,
    E: Election,
{
    let s = Checked { store };
    let p = unique_prefix("election");
    let name = format!("{p}leader");
    let (first, second) = (new_election(name.clone()), new_election(name));
    ensure_eq!(leader(&first).await?, None, "leader before any campaign");

    let a = tokio::time::timeout(DEADLINE, first.campaign("a.example:1"))
        .await
        .map_err(|_| format!("the only candidate did not lead within {DEADLINE:?}"))?
        .map_err(|e| format!("campaign a: {e}"))?;
    ensure!(!*a.lost.borrow(), "a new leader is not lost");
    let a_seen = Some("a.example:1".to_owned());
    ensure_eq!(
        leader(&second).await?,
        a_seen,
        "leader seen by the other candidate"
    );
    let data = format!("{p}data");
    let write = |fence: Compare, value: &str| s.txn(vec![fence], vec![put(&data, value)]);
    ensure!(
        write(a.fence(), "a").await?.succeeded,
        "the leader's fence holds"
    );

    // The second campaign must not complete while the first leads.
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
        .map_err(|e| format!("campaign b: {e}"))?;
    let b_seen = Some("b.example:2".to_owned());
    ensure_eq!(
        leader(&first).await?,
        b_seen,
        "leader after the first resigned"
    );
    ensure!(
        !write(old_fence, "a again").await?.succeeded,
        "a resigned leader's fence fails"
    );
    ensure!(
        write(b.fence(), "b").await?.succeeded,
        "the new leader's fence holds"
    );

    s.txn(vec![], vec![Op::Delete { key: b.key.clone() }])
        .await?;
    let mut lost = b.lost.clone();
    tokio::time::timeout(DEADLINE, lost.wait_for(|lost| *lost))
        .await
        .map_err(|_| format!("lost not true within {DEADLINE:?} of the key's delete"))?
        .map_err(|_| "the leadership's lost sender was dropped".to_owned())?;
    ensure_eq!(leader(&second).await?, None, "leader once its key is gone");
    Ok(())
}
