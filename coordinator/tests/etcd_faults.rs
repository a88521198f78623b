//! The etcd store under faults, on real etcd: the raft leader killed under
//! a stream of fenced writes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;
use tributary_coordinator::store::{
    Compare, Election, EtcdElection, EtcdStore, MetaStore, Op, StoreResult, TxnOutcome,
};
use tributary_tests::etcd::EtcdCluster;

/// The production default (`--leader-ttl-s`).
const LEADER_TTL: Duration = Duration::from_secs(3);

/// How long writes may stall when the raft leader dies: etcd elects a new
/// leader within 1-2 s here (election timeout 1 s), and a write lost with
/// the old one is sent again after the 1 s attempt deadline. Before
/// deadlines, writes stalled for 7-9.5 s (etcd's own request timeout).
const MAX_STALL: Duration = Duration::from_millis(3500);

/// One write as the coordinator's writer makes it: fenced by the
/// leadership, one at a time. Each also compares the counter's revision
/// with the one the previous write returned, so a write applied twice, or
/// reported with the wrong revision, fails the next one.
async fn write(
    store: &EtcdStore,
    fence: &Compare,
    revision: i64,
    n: u64,
) -> StoreResult<TxnOutcome> {
    let compares = vec![
        fence.clone(),
        Compare::ModRevision {
            key: "/tributary/faults/counter".into(),
            revision,
        },
    ];
    let ops = vec![
        Op::Put {
            key: "/tributary/faults/counter".into(),
            value: n.to_string().into_bytes(),
            lease: None,
        },
        Op::Put {
            key: format!("/tributary/faults/write/{n:06}"),
            value: Vec::new(),
            lease: None,
        },
    ];
    store.txn(compares, ops).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_raft_leader_stalls_writes_briefly_and_keeps_leadership() {
    let mut cluster = EtcdCluster::start(3);
    let store = EtcdStore::connect(&cluster.endpoints())
        .await
        .expect("connect to etcd");
    let election = EtcdElection::new(store.clone(), "/tributary/.faults".into(), LEADER_TTL);
    let leadership = election.campaign("a:1").await.expect("campaign");
    let fence = leadership.fence();

    // Completion times of the writes, in order; the writer stops at the
    // first failure (the coordinator's writer would step down there).
    let done: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let failed: Arc<Mutex<Option<String>>> = Arc::default();
    let writer = tokio::spawn({
        let (store, done, failed) = (store.clone(), Arc::clone(&done), Arc::clone(&failed));
        async move {
            let mut revision = 0;
            for n in 1..u64::MAX {
                let outcome = write(&store, &fence, revision, n).await;
                match outcome {
                    Ok(TxnOutcome {
                        succeeded: true,
                        revision: applied,
                    }) => revision = applied,
                    other => {
                        let at = done.lock().await.len();
                        *failed.lock().await =
                            Some(format!("write {n} failed after {at} writes: {other:?}"));
                        return;
                    }
                }
                done.lock().await.push(Instant::now());
            }
        }
    });

    let wait_for_writes = |n: usize| {
        let (done, failed) = (Arc::clone(&done), Arc::clone(&failed));
        async move {
            let deadline = Instant::now() + Duration::from_secs(15);
            while done.lock().await.len() < n {
                if let Some(failure) = &*failed.lock().await {
                    panic!("{failure}");
                }
                assert!(Instant::now() < deadline, "{n} writes never completed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    wait_for_writes(20).await;

    let leader = cluster.raft_leader();
    let killed = Instant::now();
    cluster.kill(leader);
    let lost_at = tokio::spawn({
        let mut lost = leadership.lost.clone();
        async move {
            let _ = lost.wait_for(|lost| *lost).await;
            killed.elapsed()
        }
    });
    let before = done.lock().await.len();
    // Writes go on; wait for 20 more after the stall, and 2 lease TTLs.
    wait_for_writes(before + 20).await;
    let settle = killed + 2 * LEADER_TTL;
    while Instant::now() < settle {
        if let Some(failure) = &*failed.lock().await {
            let lost = if lost_at.is_finished() {
                format!("leadership lost {:?} after the kill", lost_at.await)
            } else {
                "leadership held".to_owned()
            };
            panic!("{failure}; {lost}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    writer.abort();

    let done = done.lock().await;
    // The longest pause between two completed writes from the kill on.
    let mut last = killed;
    let mut stall = Duration::ZERO;
    for &at in done.iter().filter(|&&at| at > killed) {
        stall = stall.max(at - last);
        last = at;
    }
    eprintln!(
        "raft leader (member {leader}) killed: writes stalled {stall:?} at most; {} writes after",
        done.iter().filter(|&&at| at > killed).count()
    );
    assert!(
        stall <= MAX_STALL,
        "writes stalled {stall:?} after the raft leader died (at most {MAX_STALL:?})"
    );
    assert!(
        !*leadership.lost.borrow(),
        "the coordinator lost leadership when one etcd member died"
    );
    assert_eq!(
        election.leader().await.expect("leader"),
        Some("a:1".into()),
        "the election still names the same leader"
    );
}
