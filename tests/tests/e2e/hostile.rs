//! A hostile or careless client against a real coordinator on etcd: it may
//! not speak for another member, may not size the coordinator's allocations,
//! may not call without the token, and one bad job never takes the others
//! down. Each rejected call leaves etcd as it was.

use std::time::Duration;

use etcd_client::GetOptions;
use tonic::Code;
use tributary_common::proto::v1;
use tributary_tests::cli::Scratch;
use tributary_tests::cluster::coordinator_with;
use tributary_tests::coordinator::{
    client_with_token, create_request, expect_status, job_config, job_status, leader_client,
    leader_client_with_token, named_join, torchrun_join, unit_refs, MemberCalls,
};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::{snapshot, EtcdServer};
use tributary_tests::eventually;
use tributary_tests::process::Proc;

/// No S3 here: every dataset is a local directory.
const NO_S3: &str = "http://127.0.0.1:9";

/// A coordinator on `etcd`, with no S3; and its address.
fn replica(etcd: &EtcdServer) -> (Proc, String) {
    coordinator_with(&[etcd.endpoint()], NO_S3, &[])
}

/// etcd, a scratch directory for datasets, and a [`replica`] on that etcd.
fn bed() -> (EtcdServer, Scratch, Proc, String) {
    let etcd = EtcdServer::start();
    let (coordinator, address) = replica(&etcd);
    (etcd, Scratch::new(), coordinator, address)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("runtime")
}

#[test]
fn nobody_can_speak_for_another_member_and_status_shows_no_secret() {
    let (etcd, scratch, _coordinator, address) = bed();
    runtime().block_on(async {
        let url = tiny_dataset(scratch.root(), 64, 16).await;
        let mut c = leader_client(&address).await;
        c.create_job(create_request("dyn", job_config(&url, v1::Mode::Dynamic)))
            .await
            .expect("create");
        c.create_job(create_request("sync", job_config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        let a = c
            .join(named_join("dyn", "a", ""))
            .await
            .expect("join")
            .into_inner();
        assert_eq!(a.secret.len(), 32, "a secret comes with the join");
        let units = c
            .acquire(MemberCalls::own("dyn", &a).acquire(2))
            .await
            .expect("acquire")
            .into_inner()
            .units;
        assert_eq!(units.len(), 2);
        let rank0 = c
            .join(torchrun_join("sync", 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let rank1 = c
            .join(torchrun_join("sync", 1, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let before = snapshot(&etcd.endpoint()).await;

        // Taking a live member's name, or acting without its secret.
        expect_status(
            c.join(named_join("dyn", "a", "")).await,
            Code::AlreadyExists,
            "secret",
        );
        expect_status(
            c.join(named_join("dyn", "a", &rank0.secret)).await,
            Code::AlreadyExists,
            "secret",
        );
        for secret in [
            "",
            "0123456789abcdef0123456789abcdef",
            rank0.secret.as_str(),
        ] {
            let as_a = MemberCalls::new("dyn", &a, secret);
            let acked = unit_refs(&units);
            expect_status(
                c.report(v1::ReportRequest {
                    job: "dyn".into(),
                    member: a.member.clone(),
                    acked,
                    secret: secret.into(),
                    ..v1::ReportRequest::default()
                })
                .await,
                Code::PermissionDenied,
                "secret",
            );
            expect_status(
                c.acquire(as_a.acquire(8)).await,
                Code::PermissionDenied,
                "secret",
            );
            expect_status(
                c.keep_alive(as_a.member()).await,
                Code::PermissionDenied,
                "secret",
            );
            expect_status(
                c.leave(as_a.member()).await,
                Code::PermissionDenied,
                "secret",
            );
            expect_status(
                c.watch(as_a.member()).await,
                Code::PermissionDenied,
                "secret",
            );
        }
        // Rank 1 commits, reports or asks for rank 0.
        expect_status(
            c.commit(MemberCalls::new("sync", &rank0, &rank1.secret).commit(0, 16))
                .await,
            Code::PermissionDenied,
            "secret",
        );
        expect_status(
            c.get_assignment(MemberCalls::new("sync", &rank0, "").assignment(0))
                .await,
            Code::PermissionDenied,
            "secret",
        );
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");

        // GetStatus names members, never their secrets; etcd holds none.
        for job in ["dyn", "sync"] {
            let shown = format!("{:?}", job_status(&mut c, job).await);
            for secret in [&a.secret, &rank0.secret, &rank1.secret] {
                assert!(
                    !shown.contains(secret.as_str()),
                    "{job} status shows a secret"
                );
            }
        }
        let stored = format!("{:?}", before.0);
        assert!(!stored.contains(&a.secret), "etcd holds a member secret");

        // The member itself, with its secret, may rejoin (a retried join, or
        // another process of the same rank); it keeps its secret.
        let again = c
            .join(named_join("dyn", "a", &a.secret))
            .await
            .expect("rejoin")
            .into_inner();
        assert_eq!(again.secret, a.secret);
        c.keep_alive(MemberCalls::own("dyn", &again).member())
            .await
            .expect("the secret still works");
    });
}

#[test]
fn numbers_from_outside_are_bounded_and_the_coordinator_lives() {
    let (etcd, scratch, _coordinator, address) = bed();
    runtime().block_on(async {
        let url = tiny_dataset(scratch.root(), 64, 16).await;
        let mut c = leader_client(&address).await;
        type Spoil = fn(&mut v1::JobConfig);
        let huge: [(&str, v1::Mode, Spoil); 5] = [
            ("shuffle_buffer", v1::Mode::Sync, |c| {
                c.shuffle_buffer = u32::MAX
            }),
            ("batch_size", v1::Mode::Sync, |c| c.batch_size = u32::MAX),
            ("epochs", v1::Mode::Sync, |c| c.epochs = u64::MAX),
            ("unit_samples", v1::Mode::Dynamic, |c| {
                c.unit_samples = u32::MAX
            }),
            ("member_ttl_s", v1::Mode::Dynamic, |c| {
                c.member_ttl_s = u32::MAX
            }),
        ];
        for (field, mode, spoil) in huge {
            let mut config = job_config(&url, mode);
            spoil(&mut config);
            expect_status(
                c.create_job(create_request("huge", config)).await,
                Code::InvalidArgument,
                field,
            );
        }
        c.create_job(create_request("sync", job_config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        c.create_job(create_request("dyn", job_config(&url, v1::Mode::Dynamic)))
            .await
            .expect("create");
        let before = snapshot(&etcd.endpoint()).await;
        for job in ["sync", "dyn"] {
            expect_status(
                c.join(torchrun_join(job, 0, u32::MAX, 0)).await,
                Code::InvalidArgument,
                "world_size",
            );
        }
        expect_status(
            c.join(torchrun_join("sync", 0, 2, u64::MAX)).await,
            Code::InvalidArgument,
            "restart_count",
        );
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");
        let joined = c
            .join(torchrun_join("sync", 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        expect_status(
            c.join(torchrun_join("sync", 1, 2, u64::MAX)).await,
            Code::InvalidArgument,
            "restart_count",
        );
        let many = vec![v1::UnitRef::default(); 100_000];
        expect_status(
            c.report(v1::ReportRequest {
                job: "sync".into(),
                member: joined.member.clone(),
                acked: many,
                secret: joined.secret.clone(),
                ..v1::ReportRequest::default()
            })
            .await,
            Code::InvalidArgument,
            "acked",
        );
        // Still serving: the rest of the group joins and gets its part.
        let rank1 = c
            .join(torchrun_join("sync", 1, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let part = c
            .get_assignment(MemberCalls::own("sync", &rank1).assignment(0))
            .await
            .expect("assignment")
            .into_inner();
        assert_eq!(part.world, 2);
    });
}

/// Rewrites a job's stored config in etcd, as a bug or an older version
/// might have left it.
async fn spoil_stored_config(etcd: &str, job: &str, field: &str, value: u64) {
    let mut client = etcd_client::Client::connect([etcd], None)
        .await
        .expect("connect etcd");
    let key = format!("/tributary/{job}/config");
    let got = client.get(key.as_str(), None).await.expect("get");
    let mut stored: serde_json::Value =
        serde_json::from_slice(got.kvs()[0].value()).expect("stored json");
    stored["config"][field] = value.into();
    client
        .put(key, serde_json::to_vec(&stored).expect("json"), None)
        .await
        .expect("put");
    let listed = client
        .get(
            "/tributary/",
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await
        .expect("list");
    assert!(!listed.kvs().is_empty());
}

#[test]
fn one_bad_job_never_takes_down_the_others() {
    let (etcd, scratch, mut first, address) = bed();
    let rt = runtime();
    let dir = |name: &str| std::path::PathBuf::from(scratch.path(name));
    let urls = rt.block_on(async {
        let mut urls = Vec::new();
        for name in ["good", "bad", "gone", "repacked"] {
            std::fs::create_dir_all(dir(name)).expect("mkdir");
            urls.push(tiny_dataset(&dir(name), 64, 16).await);
        }
        let mut c = leader_client(&address).await;
        for (job, url) in ["good", "bad", "gone", "repacked"].iter().zip(&urls) {
            c.create_job(create_request(job, job_config(url, v1::Mode::Sync)))
                .await
                .expect("create");
        }
        urls
    });
    // Behind the coordinator's back: a config past its bounds in etcd, a
    // manifest gone, a dataset repacked in place with other contents.
    rt.block_on(spoil_stored_config(
        &etcd.endpoint(),
        "bad",
        "shuffle_buffer",
        u64::from(u32::MAX),
    ));
    let manifest = format!("{}/manifest.json", urls[2]);
    let saved = std::fs::read(&manifest).expect("manifest");
    std::fs::remove_file(&manifest).expect("remove manifest");
    std::fs::remove_dir_all(dir("repacked")).expect("rm");
    std::fs::create_dir_all(dir("repacked")).expect("mkdir");
    rt.block_on(tiny_dataset(&dir("repacked"), 48, 16));

    // A new leader loads every job.
    first.kill();
    let (_second, address) = replica(&etcd);
    rt.block_on(async {
        let mut c = leader_client(&address).await;
        let failed = job_status(&mut c, "bad").await.failed;
        assert!(failed.contains("shuffle_buffer"), "{failed}");
        let failed = job_status(&mut c, "gone").await.failed;
        assert!(failed.contains("manifest"), "{failed}");
        let failed = job_status(&mut c, "repacked").await.failed;
        assert_eq!(
            failed.matches("sha256:").count(),
            2,
            "both digests: {failed}"
        );
        for job in ["bad", "gone", "repacked"] {
            expect_status(
                c.join(torchrun_join(job, 0, 1, 0)).await,
                Code::FailedPrecondition,
                job,
            );
        }
        // The good job is served as if nothing happened.
        assert!(job_status(&mut c, "good").await.failed.is_empty());
        let joined = c
            .join(torchrun_join("good", 0, 1, 0))
            .await
            .expect("join")
            .into_inner();
        assert_eq!(joined.world, 1);

        // A manifest that comes back is picked up without a failover.
        std::fs::write(&manifest, &saved).expect("restore manifest");
        eventually(
            "the restored job to be served again",
            Duration::from_secs(30),
            Duration::from_millis(100),
            async || job_status(&mut c, "gone").await.failed.is_empty(),
        )
        .await;
        c.join(torchrun_join("gone", 0, 1, 0))
            .await
            .expect("join the restored job");
    });
}

/// A manifest that is a FIFO (a read of it would wait for a writer forever,
/// holding a thread, and the replica would then ignore SIGTERM): refused at
/// once, naming the file, and every other job answers meanwhile. (A manifest
/// that never arrives from a store is `leader::tests`' hung endpoint.)
#[test]
fn a_manifest_that_is_a_fifo_is_refused_at_once_and_stalls_nothing() {
    let (_etcd, scratch, mut coordinator, address) = bed();
    let hung = scratch.path("hung");
    std::fs::create_dir_all(&hung).expect("mkdir");
    let fifo = format!("{hung}/manifest.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    runtime().block_on(async {
        let url = tiny_dataset(std::path::Path::new(&scratch.path("good")), 64, 16).await;
        let mut c = leader_client(&address).await;
        c.create_job(create_request("good", job_config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        for _ in 0..3 {
            let refused = tokio::time::timeout(
                Duration::from_secs(10),
                c.create_job(create_request("hung", job_config(&hung, v1::Mode::Sync))),
            )
            .await
            .expect("a FIFO manifest is answered at once");
            expect_status(refused, Code::FailedPrecondition, "not a regular file");
        }
        c.get_status(v1::JobRequest { job: "good".into() })
            .await
            .expect("the other job answers");
    });
    // No thread is left blocked on the FIFO: SIGTERM ends the replica.
    coordinator.signal("TERM");
    assert!(coordinator.wait_exit(Duration::from_secs(20)).success());
}

#[test]
fn calls_without_the_token_or_outside_the_allowed_datasets_are_refused() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "s3cret-token\n").expect("token");
    let allowed = scratch.path("allowed");
    let outside = scratch.path("outside");
    let metrics = format!("127.0.0.1:{}", tributary_tests::free_port());
    let (_coordinator, address) = coordinator_with(
        &[etcd.endpoint()],
        NO_S3,
        &[
            "--auth-token-file",
            &token_file,
            "--allowed-datasets",
            &format!("file://{allowed}/"),
            "--metrics-listen",
            &metrics,
        ],
    );
    runtime().block_on(async {
        let inside = tiny_dataset(std::path::Path::new(&allowed), 64, 16).await;
        let elsewhere = tiny_dataset(std::path::Path::new(&outside), 64, 16).await;
        let mut good = leader_client_with_token(&address, "s3cret-token").await;
        let before = snapshot(&etcd.endpoint()).await;
        for token in [None, Some("wrong")] {
            let mut bad = client_with_token(&address, token).await;
            let url = format!("file://{inside}");
            expect_status(
                bad.create_job(create_request("j", job_config(&url, v1::Mode::Sync)))
                    .await,
                Code::Unauthenticated,
                "token",
            );
            expect_status(
                bad.get_status(v1::JobRequest { job: "j".into() }).await,
                Code::Unauthenticated,
                "token",
            );
            expect_status(
                bad.join(torchrun_join("j", 0, 1, 0)).await,
                Code::Unauthenticated,
                "token",
            );
        }
        for url in [
            format!("file://{elsewhere}"),
            format!("file://{allowed}/../outside"),
            elsewhere.clone(),
        ] {
            expect_status(
                good.create_job(create_request("j", job_config(&url, v1::Mode::Sync)))
                    .await,
                Code::PermissionDenied,
                "allowed dataset prefix",
            );
        }
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");
        good.create_job(create_request(
            "j",
            job_config(&format!("file://{inside}"), v1::Mode::Sync),
        ))
        .await
        .expect("a dataset under the allowed prefix, with the token");
    });
    // What was refused shows in the metrics: 6 calls without the token,
    // 3 creates outside the allowed prefix.
    let text = super::metrics::scrape(&metrics);
    let count = |series: &str| super::metrics::value(&text, series);
    assert_eq!(
        count("tributary_coordinator_rpc_requests_total{code=\"UNAUTHENTICATED\",method=\"*\"}"),
        6.0,
        "{text}"
    );
    assert_eq!(
        count("tributary_coordinator_rpc_requests_total{code=\"PERMISSION_DENIED\",method=\"CreateJob\"}"),
        3.0,
        "{text}"
    );
}
