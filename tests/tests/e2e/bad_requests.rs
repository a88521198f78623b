//! e: bad requests against a real coordinator on etcd. Each gets a precise
//! status naming what is wrong, none changes the job's state in etcd (the
//! keys and the store revision stay as they were), and the coordinator keeps
//! serving, garbage on its port included.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use etcd_client::GetOptions;
use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use tonic::transport::Channel;
use tonic::Code;
use tributary_common::proto::v1::coordinator_client::CoordinatorClient;
use tributary_common::proto::v1::{self, join_request::Identity};
use tributary_tests::coordinator::leader_client;
use tributary_tests::etcd::EtcdServer;

use crate::cluster::coordinator;
use crate::elastic::dataset;
use crate::harness::{S3Server, Scratch};

const JOB: &str = "bad";
const RUN: &str = "run";

fn config(manifest_url: &str) -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: manifest_url.to_owned(),
        seed: 11,
        batch_size: 4,
        epochs: 2,
        remainder: v1::RemainderPolicy::RemainderDrop as i32,
        mode: v1::Mode::Sync as i32,
        shuffle_buffer: 16,
        unit_samples: 8,
        member_ttl_s: 120,
    }
}

fn torchrun(job: &str, rank: u32, world: u32, restart: u64) -> v1::JoinRequest {
    v1::JoinRequest {
        job: job.to_owned(),
        identity: Some(Identity::Torchrun(v1::TorchrunIdentity {
            rank,
            world_size: world,
            run_id: RUN.to_owned(),
            restart_count: restart,
        })),
        secret: String::new(),
    }
}

fn member(name: &str) -> v1::MemberRequest {
    v1::MemberRequest {
        job: JOB.to_owned(),
        member: name.to_owned(),
        secret: String::new(),
    }
}

fn commit(member: &str, generation: u64, samples: u64) -> v1::CommitRequest {
    v1::CommitRequest {
        job: JOB.to_owned(),
        member: member.to_owned(),
        generation,
        samples,
        secret: String::new(),
    }
}

/// Asserts that `result` failed with `code` and a message containing `what`.
#[track_caller]
fn expect<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, tonic::Status>,
    code: Code,
    what: &str,
) {
    let status = result.expect_err(&format!("expected {code:?} ({what})"));
    assert_eq!(status.code(), code, "{}", status.message());
    assert!(
        status.message().contains(what),
        "{code:?}: message {:?} should mention {what:?}",
        status.message()
    );
}

/// Every key under `/tributary/` with its value, and the store revision.
async fn snapshot(etcd: &str) -> (Vec<(String, Vec<u8>)>, i64) {
    let mut client = etcd_client::Client::connect([etcd], None)
        .await
        .expect("connect etcd");
    let response = client
        .get("/tributary/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("range");
    let revision = response.header().expect("header").revision();
    let kvs = response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().expect("utf-8 key").to_owned(),
                kv.value().to_vec(),
            )
        })
        .collect();
    (kvs, revision)
}

/// Sends `bytes` to the gRPC port and reads until the server closes.
fn garbage(address: &str, bytes: &[u8]) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // The server may close mid-write: that is a fine answer to garbage.
    let _ = stream.write_all(bytes);
    let mut sink = Vec::new();
    let _ = stream.read_to_end(&mut sink);
}

#[test]
fn bad_requests_get_precise_errors_and_change_nothing() {
    let etcd = EtcdServer::start();
    let s3 = S3Server::start();
    let scratch = Scratch::new();
    let (url, _) = dataset(&s3, &scratch, 40, 10);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], &s3.endpoint);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut c = leader_client(&address).await;

        // A job in a known state: generation 0 of restart 0 committed 4
        // samples, restart 1 began generation 1 from that commit.
        let created = c
            .create_job(v1::CreateJobRequest {
                job: JOB.into(),
                config: Some(config(&url)),
            })
            .await
            .expect("create")
            .into_inner();
        assert!(created.created);
        let old = c
            .join(torchrun(JOB, 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        c.join(torchrun(JOB, 1, 2, 0)).await.expect("join");
        c.commit(commit(&old.member, 0, 4)).await.expect("commit");
        let new = c
            .join(torchrun(JOB, 0, 2, 1))
            .await
            .expect("join")
            .into_inner();
        assert_eq!(new.generation, 1);
        let before = snapshot(&etcd.endpoint()).await;
        assert!(
            before.0.iter().any(|(k, _)| k.ends_with("/commit")),
            "the commit is in etcd: {:?}",
            before.0.iter().map(|(k, _)| k).collect::<Vec<_>>()
        );
        let status = |c: &mut CoordinatorClient<Channel>| {
            let mut c = c.clone();
            async move {
                c.get_status(v1::JobRequest { job: JOB.into() })
                    .await
                    .expect("status")
                    .into_inner()
            }
        };
        let status_before = status(&mut c).await;

        // Jobs: conflicting and malformed configs, unreadable manifests.
        let create = |job: &str, config: Option<v1::JobConfig>| v1::CreateJobRequest {
            job: job.into(),
            config,
        };
        let conflicting = v1::JobConfig {
            seed: 12,
            ..config(&url)
        };
        expect(
            c.create_job(create(JOB, Some(conflicting))).await,
            Code::AlreadyExists,
            "seed",
        );
        let zero_batch = v1::JobConfig {
            batch_size: 0,
            ..config(&url)
        };
        expect(
            c.create_job(create("other", Some(zero_batch))).await,
            Code::InvalidArgument,
            "batch_size",
        );
        expect(
            c.create_job(create("other", None)).await,
            Code::InvalidArgument,
            "config",
        );
        expect(
            c.create_job(create("../etc", Some(config(&url)))).await,
            Code::InvalidArgument,
            "job name",
        );
        let bad_mode = v1::JobConfig {
            mode: 42,
            ..config(&url)
        };
        expect(
            c.create_job(create("other", Some(bad_mode))).await,
            Code::InvalidArgument,
            "mode",
        );
        let missing = config("s3://data/no-such-dataset");
        expect(
            c.create_job(create("other", Some(missing))).await,
            Code::FailedPrecondition,
            "no-such-dataset",
        );
        expect(
            c.get_status(v1::JobRequest {
                job: "other".into(),
            })
            .await,
            Code::NotFound,
            "other",
        );

        // Members: unknown job, rank outside the world, stale restarts,
        // a world that contradicts its generation, no identity.
        expect(
            c.join(torchrun("missing", 0, 2, 1)).await,
            Code::NotFound,
            "missing",
        );
        expect(
            c.join(torchrun(JOB, 2, 2, 1)).await,
            Code::OutOfRange,
            "rank 2",
        );
        expect(
            c.join(torchrun(JOB, 1, 2, 0)).await,
            Code::FailedPrecondition,
            "restart count 0",
        );
        expect(
            c.join(torchrun(JOB, 1, 3, 1)).await,
            Code::FailedPrecondition,
            "world size",
        );
        expect(
            c.join(v1::JoinRequest {
                job: JOB.into(),
                identity: None,
                secret: String::new(),
            })
            .await,
            Code::InvalidArgument,
            "identity",
        );
        expect(
            c.keep_alive(member("nobody")).await,
            Code::NotFound,
            "nobody",
        );

        // Stale generations: the old restart's rank may not commit, report
        // or fetch an assignment; the new one may not name a generation
        // that does not exist or commit past its part.
        expect(
            c.commit(commit(&old.member, 0, 8)).await,
            Code::FailedPrecondition,
            "stale",
        );
        expect(
            c.report(v1::ReportRequest {
                job: JOB.into(),
                member: old.member.clone(),
                generation: 0,
                samples: 8,
                ..v1::ReportRequest::default()
            })
            .await,
            Code::FailedPrecondition,
            "stale",
        );
        expect(
            c.get_assignment(v1::AssignmentRequest {
                job: JOB.into(),
                member: old.member.clone(),
                epoch: 0,
                secret: String::new(),
            })
            .await,
            Code::FailedPrecondition,
            "stale",
        );
        expect(
            c.commit(commit(&new.member, 7, 1)).await,
            Code::FailedPrecondition,
            "generation 7",
        );
        expect(
            c.commit(commit(&new.member, 1, 1_000_000)).await,
            Code::InvalidArgument,
            "exceeds",
        );
        expect(
            c.get_assignment(v1::AssignmentRequest {
                job: JOB.into(),
                member: new.member.clone(),
                epoch: 5,
                secret: String::new(),
            })
            .await,
            Code::FailedPrecondition,
            "epoch 5",
        );
        expect(
            c.acquire(v1::AcquireRequest {
                job: JOB.into(),
                member: new.member.clone(),
                max_units: 1,
                wait_ms: 0,
                secret: String::new(),
            })
            .await,
            Code::FailedPrecondition,
            "sync job",
        );

        // Garbage on the gRPC port: random bytes, HTTP/1, and an HTTP/2
        // preface followed by nonsense frames.
        let mut noise = vec![0u8; 64 << 10];
        ChaCha8Rng::seed_from_u64(3).fill_bytes(&mut noise);
        let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        preface.extend_from_slice(&noise[..4096]);
        let address_ = address.clone();
        tokio::task::spawn_blocking(move || {
            garbage(&address_, &noise);
            garbage(&address_, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
            garbage(&address_, &preface);
        })
        .await
        .expect("garbage");

        // Nothing changed, and the coordinator still serves.
        assert_eq!(snapshot(&etcd.endpoint()).await, before);
        assert_eq!(status(&mut c).await, status_before);
        let mut fresh = leader_client(&address).await;
        let joined = fresh
            .join(torchrun(JOB, 1, 2, 1))
            .await
            .expect("a good join after the bad ones")
            .into_inner();
        assert_eq!((joined.generation, joined.rank), (1, 1));
    });
}
