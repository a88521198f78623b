//! A member the coordinator forgot (its lease expired during a failover
//! that outlasted the member TTL) comes back as what it is: a torchrun rank
//! rejoins its own generation; a dynamic member, whose units went to
//! others, is told it is lost (and may join again as a new member). Driven through an in-process coordinator over
//! gRPC, as the loaders talk to a real one.

use std::sync::Arc;

use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_tests::dataset::tiny_dataset;
use tributary_worker::coordinated::{create_job, Client, Identity, Session};
use tributary_worker::{StoreOptions, WorkerError};

fn config(url: &str, mode: v1::Mode) -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: url.to_owned(),
        batch_size: 4,
        epochs: 1,
        mode: mode as i32,
        member_ttl_s: 60,
        ..v1::JobConfig::default()
    }
}

/// Makes the coordinator forget `session`'s member, as a lease expiry does.
async fn forget(client: &Client, job: &str, session: &Session) {
    let joined = session.joined();
    let request = v1::MemberRequest {
        job: job.to_owned(),
        member: joined.member,
        secret: joined.secret,
    };
    client
        .send(&request, |mut c, r| async move { c.leave(r).await })
        .await
        .expect("leave");
}

async fn members(client: &Client, job: &str) -> Vec<String> {
    let request = v1::JobRequest {
        job: job.to_owned(),
    };
    client
        .send(&request, |mut c, r| async move { c.get_status(r).await })
        .await
        .expect("status")
        .members
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_torchrun_rank_rejoins_its_generation_and_a_dynamic_member_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = tiny_dataset(dir.path(), 64, 16).await;
    let coordinator = LocalCoordinator::start(StoreOptions::default())
        .await
        .expect("start");
    let client = Arc::new(Client::new(&[coordinator.address().to_owned()]).expect("client"));

    create_job(&client, "sync", config(&url, v1::Mode::Sync))
        .await
        .expect("create");
    let identity = |rank| Identity::Torchrun {
        rank,
        world: 2,
        run_id: "run".into(),
        restart: 0,
        dp: None,
    };
    let rank0 = Session::join(Arc::clone(&client), "sync", &identity(0))
        .await
        .expect("join");
    Session::join(Arc::clone(&client), "sync", &identity(1))
        .await
        .expect("join");
    forget(&client, "sync", &rank0).await;
    assert!(!members(&client, "sync").await.contains(&rank0.member()));

    let request = v1::AssignmentRequest {
        job: "sync".into(),
        epoch: 0,
        ..v1::AssignmentRequest::default()
    };
    let assignment = rank0
        .send(
            &request,
            |mut c, r| async move { c.get_assignment(r).await },
        )
        .await
        .expect("the rank rejoins and gets its assignment");
    assert_eq!(
        (assignment.generation, assignment.rank, assignment.world),
        (0, 0, 2),
        "same generation, same rank: no new generation for a rejoin"
    );
    assert!(members(&client, "sync").await.contains(&rank0.member()));

    create_job(&client, "dyn", config(&url, v1::Mode::Dynamic))
        .await
        .expect("create");
    let worker = Session::join(Arc::clone(&client), "dyn", &Identity::Name("w".into()))
        .await
        .expect("join");
    forget(&client, "dyn", &worker).await;
    let request = v1::AcquireRequest {
        job: "dyn".into(),
        max_units: 1,
        wait_ms: 0,
        ..v1::AcquireRequest::default()
    };
    let lost = worker
        .send(&request, |mut c, r| async move { c.acquire(r).await })
        .await
        .expect_err("a forgotten dynamic member must not carry on");
    assert!(
        matches!(&lost, WorkerError::Stopped(m) if m.contains("units went to others")),
        "{lost}"
    );
    assert!(worker.is_lost(), "the session says it is lost");
    let again = worker.rejoin().await.expect("a lost member joins again");
    assert!(!worker.is_lost(), "joined again: no longer lost");
    assert_eq!(again.member, "w");
    worker
        .send(&request, |mut c, r| async move { c.acquire(r).await })
        .await
        .expect("the member that joined again leases units");
    coordinator.stop().await.expect("stop");
}
