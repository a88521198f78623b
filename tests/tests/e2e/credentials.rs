//! Job credentials against a real coordinator on etcd with an operator
//! token: CreateJob hands the operator the job's credential, which reaches
//! that job's calls only; another job, ListJobs and DeleteJob are refused,
//! and a forged credential is no credential. The refused calls change
//! nothing in etcd.

use tonic::Code;
use tributary_common::proto::v1;
use tributary_tests::cli::Scratch;
use tributary_tests::cluster::coordinator_with;
use tributary_tests::coordinator::{
    client_with_token, create_request, expect_status, job_config, leader_client_with_token,
    named_join, torchrun_join, MemberCalls,
};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::{snapshot, EtcdServer};
use tributary_tests::process::Proc;

/// No S3 here: every dataset is a local directory.
const NO_S3: &str = "http://127.0.0.1:9";
const OPERATOR: &str = "operator-s3cret";

/// etcd, a scratch directory, the operator token's file in it, and a
/// coordinator that requires the token.
struct Bed {
    etcd: EtcdServer,
    scratch: Scratch,
    token_file: String,
    coordinator: Proc,
    address: String,
}

impl Bed {
    fn start() -> Self {
        let etcd = EtcdServer::start();
        let scratch = Scratch::new();
        let token_file = scratch.path("token");
        std::fs::write(&token_file, format!("{OPERATOR}\n")).expect("token");
        let (coordinator, address) = coordinator_with(
            &[etcd.endpoint()],
            NO_S3,
            &["--auth-token-file", &token_file],
        );
        Self {
            etcd,
            scratch,
            token_file,
            coordinator,
            address,
        }
    }
}

#[test]
fn a_job_credential_reaches_its_own_job_only() {
    let Bed {
        etcd,
        scratch,
        token_file,
        coordinator: _coordinator,
        address,
    } = Bed::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let url = tiny_dataset(scratch.root(), 64, 16).await;
        let sync = job_config(&url, v1::Mode::Sync);
        let dynamic = job_config(&url, v1::Mode::Dynamic);
        let mut operator = leader_client_with_token(&address, OPERATOR).await;
        let created = operator
            .create_job(create_request("mine", dynamic.clone()))
            .await
            .expect("create")
            .into_inner();
        assert!(created.job_token.starts_with("tj1:mine:"), "{created:?}");
        let theirs = operator
            .create_job(create_request("theirs", sync.clone()))
            .await
            .expect("create")
            .into_inner();
        assert_ne!(theirs.job_token, created.job_token);

        let mut job = client_with_token(&address, Some(&created.job_token)).await;
        // Its own job: create (the same config), join, member calls, status.
        let again = job
            .create_job(create_request("mine", dynamic.clone()))
            .await
            .expect("its own job's CreateJob")
            .into_inner();
        assert!(!again.created && again.job_token.is_empty(), "{again:?}");
        let member = job
            .join(named_join("mine", "m", ""))
            .await
            .expect("join its job")
            .into_inner();
        job.acquire(MemberCalls::own("mine", &member).acquire(1))
            .await
            .expect("acquire in its job");
        job.get_status(v1::JobRequest { job: "mine".into() })
            .await
            .expect("its job's status");

        // Nothing else.
        let before = snapshot(&etcd.endpoint()).await;
        let elsewhere = "it cannot act on job \"theirs\"";
        expect_status(
            job.join(torchrun_join("theirs", 0, 1, 0)).await,
            Code::PermissionDenied,
            elsewhere,
        );
        expect_status(
            job.get_status(v1::JobRequest {
                job: "theirs".into(),
            })
            .await,
            Code::PermissionDenied,
            elsewhere,
        );
        expect_status(
            job.create_job(create_request("new", sync.clone())).await,
            Code::PermissionDenied,
            "it cannot act on job \"new\"",
        );
        // Its member's secret, sent as another job's member call.
        let mut foreign = MemberCalls::own("mine", &member).member();
        foreign.job = "theirs".into();
        expect_status(
            job.keep_alive(foreign).await,
            Code::PermissionDenied,
            elsewhere,
        );
        expect_status(
            job.list_jobs(v1::ListJobsRequest {}).await,
            Code::PermissionDenied,
            "ListJobs needs the operator's token",
        );
        expect_status(
            job.delete_job(v1::JobRequest { job: "mine".into() }).await,
            Code::PermissionDenied,
            "DeleteJob needs the operator's token",
        );
        // A credential with its tag changed, or moved to another job's
        // name, is no credential.
        let mut flipped = created.job_token.clone();
        let last = flipped.pop().expect("a tag");
        flipped.push(if last == '0' { '1' } else { '0' });
        let moved = created.job_token.replacen("mine", "theirs", 1);
        for forged in [flipped, moved] {
            let mut forged = client_with_token(&address, Some(&forged)).await;
            expect_status(
                forged
                    .get_status(v1::JobRequest {
                        job: "theirs".into(),
                    })
                    .await,
                Code::Unauthenticated,
                "wrong bearer token",
            );
        }
        assert_eq!(snapshot(&etcd.endpoint()).await, before, "nothing changed");
        // The operator reaches everything.
        operator
            .list_jobs(v1::ListJobsRequest {})
            .await
            .expect("the operator lists jobs");
    });
    // `tributary job token` derives the same credential offline.
    let out = std::process::Command::new(tributary_tests::cli::tributary_bin())
        .args(["job", "token", "mine"])
        .env("TRIBUTARY_AUTH_TOKEN_FILE", &token_file)
        .env_remove("TRIBUTARY_AUTH_TOKEN")
        .output()
        .expect("tributary job token");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert!(printed.starts_with("tj1:mine:"), "{printed}");
    runtime.block_on(async {
        let mut job = client_with_token(&address, Some(printed.trim())).await;
        job.get_status(v1::JobRequest { job: "mine".into() })
            .await
            .expect("the derived credential reaches its job");
    });
}

/// `tributary job token JOB ARGS` with `token` as TRIBUTARY_AUTH_TOKEN.
fn minted(token: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(tributary_tests::cli::tributary_bin())
        .args(["job", "token"])
        .args(args)
        .env("TRIBUTARY_AUTH_TOKEN", token)
        .env_remove("TRIBUTARY_AUTH_TOKEN_FILE")
        .output()
        .expect("tributary job token")
}

#[test]
fn a_rank_credential_joins_as_its_ranks_only_so_no_holder_squats_another_ranks_place() {
    let Bed {
        etcd,
        scratch,
        token_file: _,
        coordinator: _coordinator,
        address,
    } = Bed::start();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let url = runtime.block_on(tiny_dataset(scratch.root(), 64, 16));
    let job_token = runtime.block_on(async {
        let mut operator = leader_client_with_token(&address, OPERATOR).await;
        operator
            .create_job(create_request("ranked", job_config(&url, v1::Mode::Sync)))
            .await
            .expect("create")
            .into_inner()
            .job_token
    });
    // An init container holding only the job's credential narrows it to
    // its pod's ranks, offline; the operator token mints the same.
    let narrowed = |token: &str, ranks: &str| {
        let out = minted(token, &["ranked", "--ranks", ranks]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    };
    let (first, second) = (narrowed(&job_token, "0-0"), narrowed(&job_token, "1-1"));
    assert!(first.starts_with("tm1:ranked:ranks=0-0:"), "{first}");
    assert_eq!(narrowed(OPERATOR, "1-1"), second);
    for (args, why) in [
        (vec!["other", "--ranks", "0-0"], "another job's"),
        (vec!["ranked", "--ranks", "3-1"], "is not a scope"),
        (vec!["ranked"], "needs the operator token"),
    ] {
        let out = minted(&job_token, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(why),
            "{args:?}: {stderr}"
        );
    }
    runtime.block_on(async {
        // Rank 0's credential may not take rank 1's place, and changes
        // nothing trying.
        let mut rank0 = client_with_token(&address, Some(&first)).await;
        let before = snapshot(&etcd.endpoint()).await;
        expect_status(
            rank0.join(torchrun_join("ranked", 1, 2, 0)).await,
            Code::PermissionDenied,
            "as ranks=0-0 only, not as rank 1",
        );
        assert_eq!(snapshot(&etcd.endpoint()).await, before);
        // Widened by hand, it is no credential.
        let widened = first.replace("ranks=0-0", "ranks=0-1");
        let mut forged = client_with_token(&address, Some(&widened)).await;
        expect_status(
            forged.join(torchrun_join("ranked", 1, 2, 0)).await,
            Code::Unauthenticated,
            "wrong bearer token",
        );
        // Each rank joins with its own, and reads its part.
        rank0
            .join(torchrun_join("ranked", 0, 2, 0))
            .await
            .expect("rank 0 joins as itself");
        let mut rank1 = client_with_token(&address, Some(&second)).await;
        let joined = rank1
            .join(torchrun_join("ranked", 1, 2, 0))
            .await
            .expect("rank 1 joins as itself")
            .into_inner();
        rank1
            .get_assignment(MemberCalls::own("ranked", &joined).assignment(0))
            .await
            .expect("rank 1's part");
        // It is a job credential otherwise: no other job, no operator call.
        expect_status(
            rank1.list_jobs(v1::ListJobsRequest {}).await,
            Code::PermissionDenied,
            "ListJobs needs the operator's token",
        );
    });
}
