//! A hostile or careless client against a real coordinator on etcd: it may
//! not speak for another member, may not size the coordinator's allocations,
//! may not call without the token, and one bad job never takes the others
//! down. Each rejected call leaves etcd as it was.

use std::time::{Duration, Instant};

use etcd_client::GetOptions;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::v1::{self, join_request::Identity};
use tributary_tests::coordinator::{leader_client, tiny_dataset};
use tributary_tests::etcd::EtcdServer;

use crate::bad_requests::{expect, snapshot};
use crate::cluster::coordinator_with;
use crate::harness::Scratch;

/// No S3 here: every dataset is a local directory.
const NO_S3: &str = "http://127.0.0.1:9";

fn config(url: &str, mode: v1::Mode) -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: url.to_owned(),
        batch_size: 4,
        epochs: 2,
        mode: mode as i32,
        shuffle_buffer: 16,
        unit_samples: 8,
        member_ttl_s: 120,
        ..v1::JobConfig::default()
    }
}

fn create(job: &str, config: v1::JobConfig) -> v1::CreateJobRequest {
    v1::CreateJobRequest {
        job: job.into(),
        config: Some(config),
    }
}

fn named(job: &str, name: &str, secret: &str) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.into(),
        identity: Some(Identity::Name(name.into())),
        secret: secret.into(),
    }
}

fn torchrun(job: &str, rank: u32, world: u32, restart: u64) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.into(),
        identity: Some(Identity::Torchrun(v1::TorchrunIdentity {
            rank,
            world_size: world,
            run_id: "run".into(),
            restart_count: restart,
        })),
        secret: String::new(),
    }
}

fn as_member(job: &str, joined: &v1::JoinResponse, secret: &str) -> v1::MemberRequest {
    v1::MemberRequest {
        job: job.into(),
        member: joined.member.clone(),
        secret: secret.into(),
    }
}

async fn status(c: &mut CoordinatorClient<Channel>, job: &str) -> v1::JobStatus {
    c.get_status(v1::JobRequest { job: job.into() })
        .await
        .expect("status")
        .into_inner()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().expect("runtime")
}

#[test]
fn nobody_can_speak_for_another_member_and_status_shows_no_secret() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let (_coordinator, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
    runtime().block_on(async {
        let url = tiny_dataset(std::path::Path::new(&scratch.path("")), 64, 16).await;
        let mut c = leader_client(&address).await;
        c.create_job(create("dyn", config(&url, v1::Mode::Dynamic)))
            .await
            .expect("create");
        c.create_job(create("sync", config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        let a = c
            .join(named("dyn", "a", ""))
            .await
            .expect("join")
            .into_inner();
        assert_eq!(a.secret.len(), 32, "a secret comes with the join");
        let units = c
            .acquire(v1::AcquireRequest {
                job: "dyn".into(),
                member: a.member.clone(),
                max_units: 2,
                wait_ms: 0,
                secret: a.secret.clone(),
            })
            .await
            .expect("acquire")
            .into_inner()
            .units;
        assert_eq!(units.len(), 2);
        let rank0 = c
            .join(torchrun("sync", 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let rank1 = c
            .join(torchrun("sync", 1, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let before = snapshot(&etcd.endpoint()).await;

        // Taking a live member's name, or acting without its secret.
        expect(
            c.join(named("dyn", "a", "")).await,
            Code::AlreadyExists,
            "secret",
        );
        expect(
            c.join(named("dyn", "a", &rank0.secret)).await,
            Code::AlreadyExists,
            "secret",
        );
        for secret in [
            "",
            "0123456789abcdef0123456789abcdef",
            rank0.secret.as_str(),
        ] {
            let acked = units
                .iter()
                .map(|u| v1::UnitRef {
                    epoch: u.epoch,
                    id: u.id,
                })
                .collect();
            expect(
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
            expect(
                c.acquire(v1::AcquireRequest {
                    job: "dyn".into(),
                    member: a.member.clone(),
                    max_units: 8,
                    wait_ms: 0,
                    secret: secret.into(),
                })
                .await,
                Code::PermissionDenied,
                "secret",
            );
            expect(
                c.keep_alive(as_member("dyn", &a, secret)).await,
                Code::PermissionDenied,
                "secret",
            );
            expect(
                c.leave(as_member("dyn", &a, secret)).await,
                Code::PermissionDenied,
                "secret",
            );
            expect(
                c.watch(as_member("dyn", &a, secret)).await,
                Code::PermissionDenied,
                "secret",
            );
        }
        // Rank 1 commits, reports or asks for rank 0.
        expect(
            c.commit(v1::CommitRequest {
                job: "sync".into(),
                member: rank0.member.clone(),
                generation: 0,
                samples: 16,
                secret: rank1.secret.clone(),
            })
            .await,
            Code::PermissionDenied,
            "secret",
        );
        expect(
            c.get_assignment(v1::AssignmentRequest {
                job: "sync".into(),
                member: rank0.member.clone(),
                epoch: 0,
                secret: String::new(),
            })
            .await,
            Code::PermissionDenied,
            "secret",
        );
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");

        // GetStatus names members, never their secrets; etcd holds none.
        for job in ["dyn", "sync"] {
            let shown = format!("{:?}", status(&mut c, job).await);
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
            .join(named("dyn", "a", &a.secret))
            .await
            .expect("rejoin")
            .into_inner();
        assert_eq!(again.secret, a.secret);
        c.keep_alive(as_member("dyn", &again, &again.secret))
            .await
            .expect("the secret still works");
    });
}

#[test]
fn numbers_from_outside_are_bounded_and_the_coordinator_lives() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let (_coordinator, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
    runtime().block_on(async {
        let url = tiny_dataset(std::path::Path::new(&scratch.path("")), 64, 16).await;
        let mut c = leader_client(&address).await;
        let huge = [
            (
                "shuffle_buffer",
                v1::JobConfig {
                    shuffle_buffer: u32::MAX,
                    ..config(&url, v1::Mode::Sync)
                },
            ),
            (
                "batch_size",
                v1::JobConfig {
                    batch_size: u32::MAX,
                    ..config(&url, v1::Mode::Sync)
                },
            ),
            (
                "epochs",
                v1::JobConfig {
                    epochs: u64::MAX,
                    ..config(&url, v1::Mode::Sync)
                },
            ),
            (
                "unit_samples",
                v1::JobConfig {
                    unit_samples: u32::MAX,
                    ..config(&url, v1::Mode::Dynamic)
                },
            ),
            (
                "member_ttl_s",
                v1::JobConfig {
                    member_ttl_s: u32::MAX,
                    ..config(&url, v1::Mode::Dynamic)
                },
            ),
        ];
        for (field, config) in huge {
            expect(
                c.create_job(create("huge", config)).await,
                Code::InvalidArgument,
                field,
            );
        }
        c.create_job(create("sync", config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        c.create_job(create("dyn", config(&url, v1::Mode::Dynamic)))
            .await
            .expect("create");
        let before = snapshot(&etcd.endpoint()).await;
        for job in ["sync", "dyn"] {
            expect(
                c.join(torchrun(job, 0, u32::MAX, 0)).await,
                Code::InvalidArgument,
                "world_size",
            );
        }
        expect(
            c.join(torchrun("sync", 0, 2, u64::MAX)).await,
            Code::InvalidArgument,
            "restart_count",
        );
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");
        let joined = c
            .join(torchrun("sync", 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        expect(
            c.join(torchrun("sync", 1, 2, u64::MAX)).await,
            Code::InvalidArgument,
            "restart_count",
        );
        let many = vec![v1::UnitRef::default(); 100_000];
        expect(
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
            .join(torchrun("sync", 1, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let part = c
            .get_assignment(v1::AssignmentRequest {
                job: "sync".into(),
                member: rank1.member,
                epoch: 0,
                secret: rank1.secret,
            })
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
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let (mut first, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
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
            c.create_job(create(job, config(url, v1::Mode::Sync)))
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
    let (_second, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
    rt.block_on(async {
        let mut c = leader_client(&address).await;
        let failed = status(&mut c, "bad").await.failed;
        assert!(failed.contains("shuffle_buffer"), "{failed}");
        let failed = status(&mut c, "gone").await.failed;
        assert!(failed.contains("manifest"), "{failed}");
        let failed = status(&mut c, "repacked").await.failed;
        assert_eq!(
            failed.matches("sha256:").count(),
            2,
            "both digests: {failed}"
        );
        for job in ["bad", "gone", "repacked"] {
            expect(
                c.join(torchrun(job, 0, 1, 0)).await,
                Code::FailedPrecondition,
                job,
            );
        }
        // The good job is served as if nothing happened.
        assert!(status(&mut c, "good").await.failed.is_empty());
        let joined = c
            .join(torchrun("good", 0, 1, 0))
            .await
            .expect("join")
            .into_inner();
        assert_eq!(joined.world, 1);

        // A manifest that comes back is picked up without a failover.
        std::fs::write(&manifest, &saved).expect("restore manifest");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !status(&mut c, "gone").await.failed.is_empty() {
            assert!(
                Instant::now() < deadline,
                "the restored job is never served again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        c.join(torchrun("gone", 0, 1, 0))
            .await
            .expect("join the restored job");
    });
}

#[test]
fn a_manifest_that_never_arrives_stalls_only_its_own_create() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let (_coordinator, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
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
        c.create_job(create("good", config(&url, v1::Mode::Sync)))
            .await
            .expect("create");
        let mut hanging = c.clone();
        let stuck = tokio::spawn(async move {
            hanging
                .create_job(create("hung", config(&hung, v1::Mode::Sync)))
                .await
        });
        // For two seconds while the create hangs (it takes the leader's
        // locks, if any, within milliseconds), every call on another job
        // answers promptly.
        let window = Instant::now();
        let mut rank = 0;
        while window.elapsed() < Duration::from_secs(2) {
            let started = Instant::now();
            let answer = tokio::time::timeout(Duration::from_secs(2), async {
                c.get_status(v1::JobRequest { job: "good".into() }).await?;
                c.join(torchrun("good", rank % 2, 2, u64::from(rank / 2)))
                    .await
            })
            .await;
            assert!(
                matches!(answer, Ok(Ok(_))),
                "other jobs answer while a manifest hangs: {answer:?} after {:?}",
                started.elapsed()
            );
            rank += 1;
        }
        assert!(!stuck.is_finished(), "the hung create is still waiting");
        stuck.abort();
    });
    // Release the reader blocked on the FIFO.
    drop(std::fs::OpenOptions::new().write(true).open(&fifo));
}

type Intercept = Box<dyn FnMut(Request<()>) -> Result<Request<()>, Status> + Send>;
type Authed = CoordinatorClient<InterceptedService<Channel, Intercept>>;

async fn client_with_token(address: &str, token: Option<&str>) -> Authed {
    let channel = Channel::from_shared(format!("http://{address}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let header: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>> =
        token.map(|t| format!("Bearer {t}").parse().expect("ascii"));
    let intercept: Intercept = Box::new(move |mut request: Request<()>| {
        if let Some(value) = &header {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    });
    CoordinatorClient::with_interceptor(channel, intercept)
}

#[test]
fn calls_without_the_token_or_outside_the_allowed_datasets_are_refused() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let token_file = scratch.path("token");
    std::fs::write(&token_file, "s3cret-token\n").expect("token");
    let allowed = scratch.path("allowed");
    let outside = scratch.path("outside");
    let (_coordinator, address) = coordinator_with(
        &[etcd.endpoint()],
        NO_S3,
        &[
            "--auth-token-file",
            &token_file,
            "--allowed-datasets",
            &format!("file://{allowed}/"),
        ],
    );
    runtime().block_on(async {
        let inside = tiny_dataset(std::path::Path::new(&allowed), 64, 16).await;
        let elsewhere = tiny_dataset(std::path::Path::new(&outside), 64, 16).await;
        let mut good = client_with_token(&address, Some("s3cret-token")).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let probe = good
                .get_status(v1::JobRequest {
                    job: "probe".into(),
                })
                .await;
            if matches!(&probe, Err(s) if s.code() == Code::NotFound) {
                break;
            }
            assert!(Instant::now() < deadline, "never led: {probe:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let before = snapshot(&etcd.endpoint()).await;
        for token in [None, Some("wrong")] {
            let mut bad = client_with_token(&address, token).await;
            let url = format!("file://{inside}");
            expect(
                bad.create_job(create("j", config(&url, v1::Mode::Sync)))
                    .await,
                Code::Unauthenticated,
                "token",
            );
            expect(
                bad.get_status(v1::JobRequest { job: "j".into() }).await,
                Code::Unauthenticated,
                "token",
            );
            expect(
                bad.join(torchrun("j", 0, 1, 0)).await,
                Code::Unauthenticated,
                "token",
            );
        }
        for url in [
            format!("file://{elsewhere}"),
            format!("file://{allowed}/../outside"),
            elsewhere.clone(),
        ] {
            expect(
                good.create_job(create("j", config(&url, v1::Mode::Sync)))
                    .await,
                Code::PermissionDenied,
                "allowed dataset prefix",
            );
        }
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");
        good.create_job(create(
            "j",
            config(&format!("file://{inside}"), v1::Mode::Sync),
        ))
        .await
        .expect("a dataset under the allowed prefix, with the token");
    });
}
