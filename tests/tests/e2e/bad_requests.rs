//! e: bad requests against a real coordinator on etcd. Each gets a precise
//! status naming what is wrong, none changes the job's state in etcd (the
//! keys and the store revision stay as they were), and the coordinator keeps
//! serving, garbage on its port included.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};
use tonic::Code;
use tributary_common::proto::v1;
use tributary_tests::cluster::coordinator;
use tributary_tests::coordinator::{
    expect_status, job_config, job_status, leader_client, torchrun_join, MemberCalls,
};
use tributary_tests::dataset::S3Dataset;
use tributary_tests::etcd::{snapshot, EtcdServer};

const JOB: &str = "bad";

fn config(manifest_url: &str) -> v1::JobConfig {
    v1::JobConfig {
        seed: 11,
        remainder: v1::RemainderPolicy::RemainderDrop as i32,
        ..job_config(manifest_url, v1::Mode::Sync)
    }
}

fn member(name: &str) -> v1::MemberRequest {
    v1::MemberRequest {
        job: JOB.to_owned(),
        member: name.to_owned(),
        secret: String::new(),
    }
}

/// `joined` commits `samples` of `generation`, with its secret.
fn commit(joined: &v1::JoinResponse, generation: u64, samples: u64) -> v1::CommitRequest {
    MemberCalls::own(JOB, joined).commit(generation, samples)
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
    let data = S3Dataset::start(40, 10);
    let url = &data.url;
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut c = leader_client(&address).await;

        // A job in a known state: both ranks of generation 0 of restart 0
        // committed 4 samples, restart 1 began generation 1 from that commit.
        let created = c
            .create_job(v1::CreateJobRequest {
                job: JOB.into(),
                config: Some(config(url)),
            })
            .await
            .expect("create")
            .into_inner();
        assert!(created.created);
        let old = c
            .join(torchrun_join(JOB, 0, 2, 0))
            .await
            .expect("join")
            .into_inner();
        let old_1 = c
            .join(torchrun_join(JOB, 1, 2, 0))
            .await
            .expect("join")
            .into_inner();
        // Every rank commits: the job's commit is the point both reached.
        c.commit(commit(&old, 0, 4)).await.expect("commit");
        c.commit(commit(&old_1, 0, 4)).await.expect("commit");
        let new = c
            .join(torchrun_join(JOB, 0, 2, 1))
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
        let status_before = job_status(&mut c, JOB).await;

        // Jobs: conflicting and malformed configs, unreadable manifests.
        let create = |job: &str, config: Option<v1::JobConfig>| v1::CreateJobRequest {
            job: job.into(),
            config,
        };
        let conflicting = v1::JobConfig {
            seed: 12,
            ..config(url)
        };
        let zero_batch = v1::JobConfig {
            batch_size: 0,
            ..config(url)
        };
        let bad_mode = v1::JobConfig {
            mode: 42,
            ..config(url)
        };
        let missing = config("s3://data/no-such-dataset");
        for (job, config, code, what) in [
            (JOB, Some(conflicting), Code::AlreadyExists, "seed"),
            (
                "other",
                Some(zero_batch),
                Code::InvalidArgument,
                "batch_size",
            ),
            ("other", None, Code::InvalidArgument, "config"),
            (
                "../etc",
                Some(config(url)),
                Code::InvalidArgument,
                "job name",
            ),
            ("other", Some(bad_mode), Code::InvalidArgument, "mode"),
            (
                "other",
                Some(missing),
                Code::FailedPrecondition,
                "no-such-dataset",
            ),
        ] {
            expect_status(c.create_job(create(job, config)).await, code, what);
        }
        expect_status(
            c.get_status(v1::JobRequest {
                job: "other".into(),
            })
            .await,
            Code::NotFound,
            "other",
        );

        // Members: unknown job, rank outside the world, stale restarts,
        // a world that contradicts its generation, no identity.
        let no_identity = v1::JoinRequest {
            job: JOB.into(),
            identity: None,
            secret: String::new(),
            ..v1::JoinRequest::default()
        };
        // Rank 1 of restart 1 in data-parallel group `dp_rank` of `dp_size`.
        let grouped = |dp_rank, dp_size| {
            let mut join = torchrun_join(JOB, 1, 2, 1);
            if let Some(v1::join_request::Identity::Torchrun(t)) = &mut join.identity {
                (t.dp_rank, t.dp_size) = (dp_rank, dp_size);
            }
            join
        };
        for (join, code, what) in [
            (torchrun_join("missing", 0, 2, 1), Code::NotFound, "missing"),
            (torchrun_join(JOB, 2, 2, 1), Code::OutOfRange, "rank 2"),
            (
                torchrun_join(JOB, 1, 2, 0),
                Code::FailedPrecondition,
                "restart count 0",
            ),
            (
                torchrun_join(JOB, 1, 3, 1),
                Code::FailedPrecondition,
                "world size",
            ),
            (no_identity, Code::InvalidArgument, "identity"),
            (
                grouped(1, 1),
                Code::InvalidArgument,
                "torchrun.dp_rank/dp_size: dp_rank 1 must be below dp_size 1",
            ),
            (
                grouped(0, 3),
                Code::InvalidArgument,
                "dp_size 3 exceeds world_size 2",
            ),
            // Generation 1 plans over its 2 ranks: dp_size 2, not 1.
            (
                grouped(0, 1),
                Code::FailedPrecondition,
                "gives dp_size 1, but generation 1",
            ),
        ] {
            expect_status(c.join(join).await, code, what);
        }
        expect_status(
            c.keep_alive(member("nobody")).await,
            Code::NotFound,
            "nobody",
        );

        // Stale generations: the old restart's rank may not commit, report
        // or fetch an assignment; the new one may not name a generation
        // that does not exist or commit past its part.
        expect_status(
            c.commit(commit(&old, 0, 8)).await,
            Code::FailedPrecondition,
            "stale",
        );
        expect_status(
            c.report(v1::ReportRequest {
                job: JOB.into(),
                member: old.member.clone(),
                generation: 0,
                samples: 8,
                secret: old.secret.clone(),
                ..v1::ReportRequest::default()
            })
            .await,
            Code::FailedPrecondition,
            "stale",
        );
        expect_status(
            c.get_assignment(MemberCalls::own(JOB, &old).assignment(0))
                .await,
            Code::FailedPrecondition,
            "stale",
        );
        expect_status(
            c.commit(commit(&new, 7, 1)).await,
            Code::FailedPrecondition,
            "generation 7",
        );
        expect_status(
            c.commit(commit(&new, 1, 1_000_000)).await,
            Code::InvalidArgument,
            "exceeds",
        );
        expect_status(
            c.get_assignment(MemberCalls::own(JOB, &new).assignment(5))
                .await,
            Code::FailedPrecondition,
            "epoch 5",
        );
        expect_status(
            c.acquire(MemberCalls::own(JOB, &new).acquire(1)).await,
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
        // What changes with time alone: how long ago each member was seen.
        // A refused call is not a member's: none was seen again.
        let seen = |status: &mut v1::JobStatus| -> Vec<Option<u64>> {
            let seen = status
                .member_status
                .iter()
                .map(|m| m.last_seen_ms)
                .collect();
            status
                .member_status
                .iter_mut()
                .for_each(|m| m.last_seen_ms = None);
            seen
        };
        let (mut after, mut status_before) = (job_status(&mut c, JOB).await, status_before);
        let (seen_after, seen_before) = (seen(&mut after), seen(&mut status_before));
        for (a, b) in seen_after.iter().zip(&seen_before) {
            assert!(
                a >= b,
                "a member was seen again: {seen_before:?} then {seen_after:?}"
            );
        }
        assert_eq!(after, status_before);
        let mut fresh = leader_client(&address).await;
        let joined = fresh
            .join(torchrun_join(JOB, 1, 2, 1))
            .await
            .expect("a good join after the bad ones")
            .into_inner();
        assert_eq!((joined.generation, joined.rank), (1, 1));
    });
}
