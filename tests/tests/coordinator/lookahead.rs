//! A dynamic member leases a bounded lookahead ahead of its trainer, not
//! whatever its pipeline would swallow: a member that joins mid-epoch gets
//! a unit at once, and a member that dies orphans at most its lookahead.
//! Real loaders against an in-process coordinator over loopback gRPC.

#![allow(clippy::print_stdout, reason = "the test prints what it measures")]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_tests::dataset::{packed_images, small_loader_config};
use tributary_tests::eventually;
use tributary_worker::coordinated::dynamic::{OnAck, OnLease};
use tributary_worker::coordinated::{
    create_job, Client, DynamicLoader, DynamicOptions, Identity, Session,
};
use tributary_worker::{Dataset, StoreOptions};

const IMAGES: usize = 160;
const UNIT: u32 = 8;
const LOOKAHEAD: u64 = 24;

async fn images(dir: &std::path::Path) -> String {
    packed_images(dir, IMAGES, 40, 3).await
}

/// What one member leased and acked, in order, with when it leased.
#[derive(Default)]
struct Log {
    leased: Vec<(u32, Instant)>,
    acked: Vec<u32>,
}

fn hooks(log: &Arc<Mutex<Log>>) -> (OnLease, OnAck) {
    let (leases, acks) = (Arc::clone(log), Arc::clone(log));
    (
        Arc::new(move |unit: &v1::Unit| {
            leases
                .lock()
                .expect("log")
                .leased
                .push((unit.id, Instant::now()))
        }),
        Arc::new(move |units: &[v1::UnitRef]| {
            acks.lock()
                .expect("log")
                .acked
                .extend(units.iter().map(|u| u.id))
        }),
    )
}

/// Polls `ready` every 20 ms until it holds; panics after `deadline`.
async fn poll(what: &str, deadline: Duration, ready: impl Fn() -> bool) {
    eventually(what, deadline, Duration::from_millis(20), async || ready()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_member_gets_a_unit_at_once_and_a_killed_one_orphans_at_most_its_lookahead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = images(dir.path()).await;
    let dataset = Dataset::open(&url, &StoreOptions::default())
        .await
        .expect("dataset");
    let coordinator = LocalCoordinator::start(StoreOptions::default())
        .await
        .expect("start");
    let client = Arc::new(Client::new(&[coordinator.address().to_owned()]).expect("client"));
    let config = v1::JobConfig {
        manifest_url: url.clone(),
        batch_size: 4,
        epochs: 1,
        mode: v1::Mode::Dynamic as i32,
        shuffle_buffer: 8,
        unit_samples: UNIT,
        member_ttl_s: 1,
        ..v1::JobConfig::default()
    };
    create_job(&client, "look", config).await.expect("create");
    let base = small_loader_config().decode;
    let units = IMAGES as u32 / UNIT;

    // A reads a few batches, then its trainer stalls.
    let a_log = Arc::new(Mutex::new(Log::default()));
    let (on_lease, on_ack) = hooks(&a_log);
    let a_session = Arc::new(
        Session::join(Arc::clone(&client), "look", &Identity::Name("a".into()))
            .await
            .expect("join a"),
    );
    let mut a = DynamicLoader::start(
        Arc::clone(&a_session),
        dataset.clone(),
        base.clone(),
        DynamicOptions {
            lookahead: Some(LOOKAHEAD),
            on_lease: Some(on_lease),
            on_ack: Some(on_ack),
            ..DynamicOptions::default()
        },
    )
    .await
    .expect("start a");
    for _ in 0..3 {
        a.next().await.expect("a batch").expect("a batch");
    }
    let held = |log: &Mutex<Log>| {
        let log = log.lock().expect("log");
        log.leased.len() - log.acked.len()
    };
    // Its lookahead fills (more than LOOKAHEAD - UNIT samples owed) ...
    let bound = (LOOKAHEAD / u64::from(UNIT)) as usize;
    poll("a's lookahead to fill", Duration::from_secs(10), || {
        held(&a_log) >= bound
    })
    .await;
    // ... and stays bounded while nothing is consumed. (A negative check:
    // the feeder is given time to overreach, as it did before the bound.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Held: the lookahead is in samples (at most LOOKAHEAD leased and not
    // delivered), so in units its whole units, the few that the shuffle
    // buffer (8 samples) left partly delivered, and one whose last samples
    // are in the batch the trainer holds (acked when it asks for the next).
    let leased_by_a = a_log.lock().expect("log").leased.len();
    assert!(
        held(&a_log) <= bound + 3,
        "a holds {} units with a lookahead of {LOOKAHEAD} samples ({bound} units)",
        held(&a_log)
    );
    assert!(
        leased_by_a < units as usize / 2,
        "a leased {leased_by_a} of {units} units"
    );

    // B joins mid-epoch and gets a unit at once.
    let b_log = Arc::new(Mutex::new(Log::default()));
    let (on_lease, on_ack) = hooks(&b_log);
    let joined_at = Instant::now();
    let b_session = Arc::new(
        Session::join(Arc::clone(&client), "look", &Identity::Name("b".into()))
            .await
            .expect("join b"),
    );
    let mut b = DynamicLoader::start(
        Arc::clone(&b_session),
        dataset.clone(),
        base.clone(),
        DynamicOptions {
            on_lease: Some(on_lease),
            on_ack: Some(on_ack),
            ..DynamicOptions::default()
        },
    )
    .await
    .expect("start b");
    poll("b's first lease", Duration::from_secs(10), || {
        !b_log.lock().expect("log").leased.is_empty()
    })
    .await;
    let first = b_log.lock().expect("log").leased[0].1 - joined_at;
    println!("a member that joined mid-epoch leased its first unit after {first:?}");
    assert!(
        first < Duration::from_secs(1),
        "b waited {first:?} for a unit"
    );

    // A dies (no Leave): what it held returns after its TTL, and B, reading
    // to the end, acks every unit A did not.
    let orphaned = held(&a_log);
    drop(a);
    drop(a_session);
    while let Some(batch) = b.next().await {
        batch.expect("b batch");
    }
    assert!(!b.next_epoch().await.expect("next epoch"), "one epoch");
    println!("a killed member orphaned {orphaned} units (lookahead {bound} units)");
    assert!(orphaned <= bound + 3, "a orphaned {orphaned} units");
    let mut acks: BTreeMap<u32, u32> = BTreeMap::new();
    for log in [&a_log, &b_log] {
        for &unit in &log.lock().expect("log").acked {
            *acks.entry(unit).or_default() += 1;
        }
    }
    assert_eq!(acks.len(), units as usize, "every unit acked: {acks:?}");
    assert!(
        acks.values().all(|&n| n == 1),
        "each unit acked once: {acks:?}"
    );
    coordinator.stop().await.expect("stop");
}
