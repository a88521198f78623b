//! The store conformance suite against [`MemoryStore`] (on tokio's paused
//! clock) and against [`EtcdStore`] on a real etcd, plus leader takeover on
//! etcd: after a resign and after a crash.

use std::time::Duration;

use tokio::time::Instant;
use tributary_coordinator::store::conformance::{self, Conformance};
use tributary_coordinator::store::{
    Election, EtcdElection, EtcdStore, MemoryElection, MemoryStore, MetaStore, StoreError,
};
use tributary_tests::etcd::{EtcdCluster, EtcdServer};

fn pass(result: Conformance) {
    if let Err(error) = result {
        panic!("{error}");
    }
}

async fn connect(endpoints: &[String]) -> EtcdStore {
    EtcdStore::connect(endpoints)
        .await
        .unwrap_or_else(|e| panic!("connect to etcd at {endpoints:?}: {e}"))
}

#[tokio::test(start_paused = true)]
async fn memory_conformance() {
    pass(conformance::run_all(&MemoryStore::new()).await);
}

#[tokio::test(start_paused = true)]
async fn memory_election_conformance() {
    let store = MemoryStore::new();
    let elections = |name| MemoryElection::new(store.clone(), name);
    pass(conformance::conformance_election(&store, elections).await);
}

#[tokio::test(start_paused = true)]
async fn memory_election_depose_hands_over() {
    let store = MemoryStore::new();
    let election = MemoryElection::new(store.clone(), "/job/leader");
    let first = election.campaign("a:1").await.expect("campaign a");
    let second = tokio::spawn({
        let election = election.clone();
        async move { election.campaign("b:2").await }
    });
    election.depose().await.expect("depose");
    let mut lost = first.lost.clone();
    tokio::time::timeout(Duration::from_secs(1), lost.wait_for(|lost| *lost))
        .await
        .expect("lost turns true when deposed")
        .expect("lost sender alive");
    let second = tokio::time::timeout(Duration::from_secs(1), second)
        .await
        .expect("the waiting candidate leads once the leader is deposed")
        .expect("campaign task")
        .expect("campaign b");
    assert_eq!(election.leader().await.expect("leader"), Some("b:2".into()));
    // The deposed leader's resign must not remove its successor.
    drop(first);
    assert_eq!(election.leader().await.expect("leader"), Some("b:2".into()));
    assert!(!*second.lost.borrow());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_conformance() {
    let server = EtcdServer::start();
    let store = connect(&[server.endpoint()]).await;
    pass(conformance::run_all(&store).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_election_conformance() {
    let server = EtcdServer::start();
    let store = connect(&[server.endpoint()]).await;
    let elections = |name| EtcdElection::new(store.clone(), name, Duration::from_secs(1));
    pass(conformance::conformance_election(&store, elections).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_cluster_conformance_survives_a_member() {
    let mut cluster = EtcdCluster::start(3);
    let store = connect(&cluster.endpoints()).await;
    pass(conformance::run_all(&store).await);

    cluster.kill(0);
    let deadline = Instant::now() + Duration::from_secs(20);
    // Requests routed to the dead member fail until the client drops it.
    while let Err(error) = store.put("/cluster/after-kill", b"v".to_vec(), None).await {
        assert!(
            matches!(error, StoreError::Unavailable(_)),
            "a dead member is Unavailable, not {error:?}"
        );
        assert!(
            Instant::now() < deadline,
            "two of three members stopped serving: {error}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    pass(conformance::conformance_get_put_range(&store).await);
    pass(conformance::conformance_txn_compares(&store).await);

    // A client that starts now, with the dead member still listed.
    let fresh = connect(&cluster.endpoints()).await;
    pass(conformance::conformance_watch_replay(&fresh).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_connect_to_nothing_is_unavailable() {
    // A port from `free_port()` was free when asked, and an etcd started by
    // a test beside this one could take it before the dial (it did once).
    // This one stays held, listening on 127.0.0.1, and the dial goes to
    // 127.0.0.2 on it: refused there, and no test server can bind it.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = held.local_addr().expect("its address").port();
    let started = Instant::now();
    let result = EtcdStore::connect(&[format!("http://127.0.0.2:{port}")]).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "want Unavailable, got {result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "connect gave up late"
    );
}

/// Waits until etcd holds `n` candidate keys under election `name`.
async fn wait_for_candidates(store: &EtcdStore, name: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (kvs, _) = store.range(&format!("{name}/")).await.expect("range");
        if kvs.len() == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{n} candidates never queued: {kvs:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const TTL: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_election_takeover_after_resign() {
    let server = EtcdServer::start();
    let name = "/takeover/resign".to_owned();
    let store_a = connect(&[server.endpoint()]).await;
    let store_b = connect(&[server.endpoint()]).await;
    let a = EtcdElection::new(store_a.clone(), name.clone(), TTL);
    let b = EtcdElection::new(store_b, name.clone(), TTL);

    let leader = a.campaign("a:1").await.expect("campaign a");
    let waiting = tokio::spawn(async move {
        let leadership = b.campaign("b:2").await;
        (Instant::now(), leadership)
    });
    wait_for_candidates(&store_a, &name, 2).await;

    let resigned = Instant::now();
    drop(leader);
    let (led, leadership) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("b leads after a resigns")
        .expect("campaign task");
    let leadership = leadership.expect("campaign b");
    let takeover = led - resigned;
    eprintln!("etcd takeover after resign: {takeover:?}");
    assert!(
        takeover < TTL,
        "a resign hands over without waiting for the lease: {takeover:?}"
    );
    assert_eq!(a.leader().await.expect("leader"), Some("b:2".into()));
    assert!(!*leadership.lost.borrow());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_election_takeover_after_crash() {
    let server = EtcdServer::start();
    let name = "/takeover/crash".to_owned();
    let store = connect(&[server.endpoint()]).await;

    // Candidate a runs on its own runtime, as another process would; the
    // crash stops that runtime without resigning, so its lease must expire.
    let (led_tx, led_rx) = tokio::sync::oneshot::channel();
    let (crash_tx, crash_rx) = tokio::sync::oneshot::channel::<()>();
    let crashed = std::thread::spawn({
        let (endpoint, name) = (server.endpoint(), name.clone());
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime of candidate a");
            runtime.block_on(async move {
                let store = connect(&[endpoint]).await;
                let a = EtcdElection::new(store, name, TTL);
                let leadership = a.campaign("a:1").await.expect("campaign a");
                led_tx.send(()).expect("test waits");
                let _ = crash_rx.await;
                // Crash: no resign, and the keep-alive stops with the runtime.
                std::mem::forget(leadership);
            });
        }
    });
    led_rx.await.expect("a leads");

    let b = EtcdElection::new(store.clone(), name.clone(), TTL);
    let waiting = tokio::spawn({
        let b = b.clone();
        async move {
            let leadership = b.campaign("b:2").await;
            (Instant::now(), leadership)
        }
    });
    wait_for_candidates(&store, &name, 2).await;

    let crash = Instant::now();
    crash_tx.send(()).expect("a waits for the crash");
    crashed.join().expect("candidate a's thread");
    let (led, leadership) = tokio::time::timeout(TTL + Duration::from_secs(10), waiting)
        .await
        .expect("b leads once a's lease expires")
        .expect("campaign task");
    let leadership = leadership.expect("campaign b");
    let takeover = led - crash;
    eprintln!("etcd takeover after a crash (lease TTL {TTL:?}): {takeover:?}");
    assert!(
        takeover >= TTL / 3,
        "b led before a's lease could have expired: {takeover:?}"
    );
    assert!(
        takeover <= TTL + Duration::from_secs(2),
        "takeover took much longer than the lease TTL: {takeover:?}"
    );
    assert_eq!(b.leader().await.expect("leader"), Some("b:2".into()));
    assert!(!*leadership.lost.borrow());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_leader_is_lost_when_etcd_dies() {
    let server = EtcdServer::start();
    let store = connect(&[server.endpoint()]).await;
    let election = EtcdElection::new(store, "/lost/when-etcd-dies".to_owned(), TTL);
    let leadership = election.campaign("a:1").await.expect("campaign");

    let died = Instant::now();
    drop(server);
    let mut lost = leadership.lost.clone();
    tokio::time::timeout(TTL + Duration::from_secs(1), lost.wait_for(|lost| *lost))
        .await
        .expect("lost turns true once the lease can no longer be renewed")
        .expect("lost sender alive");
    let noticed = died.elapsed();
    eprintln!("leader noticed etcd was gone after {noticed:?} (lease TTL {TTL:?})");
    assert!(
        noticed <= TTL,
        "lost turned true after the lease could have expired: {noticed:?}"
    );
}
