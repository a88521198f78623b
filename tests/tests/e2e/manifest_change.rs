//! A manifest changed in place under a running job: the leader would plan
//! from the manifest it read at load until a failover. A rank's Join
//! carries the digest of the dataset it opened; one other than the job's
//! makes the leader read the manifest again and fail the job when it
//! changed, or refuse the Join when the rank reads another copy.

use tonic::Code;
use tributary_common::proto::v1;
use tributary_tests::cli::Scratch;
use tributary_tests::cluster::coordinator_with;
use tributary_tests::coordinator::{
    create_request, expect_status, job_config, job_status, leader_client, torchrun_join,
    MemberCalls,
};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::EtcdServer;

/// The digest a rank sends of the dataset at `url`, computed as the worker
/// does (one manifest, no mix).
async fn digest_of(url: &str) -> String {
    let opened = tributary_io::open_any(url, &tributary_io::StoreOptions::default())
        .await
        .expect("open");
    tributary_io::dataset_sha256(&[opened.manifest_sha256()], false)
}

/// Rank `rank` of 2's Join carrying `digest`.
fn join_with(job: &str, rank: u32, digest: &str) -> v1::JoinRequest {
    v1::JoinRequest {
        manifest_sha256: digest.into(),
        ..torchrun_join(job, rank, 2, 0)
    }
}

#[test]
fn a_manifest_changed_under_a_running_job_fails_it_when_a_rank_reads_the_new_one() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let (_coordinator, address) = coordinator_with(&[etcd.endpoint()], "http://127.0.0.1:9", &[]);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let url = tiny_dataset(&scratch.root().join("a"), 64, 16).await;
            let copy = tiny_dataset(&scratch.root().join("b"), 64, 16).await;
            let other = tiny_dataset(&scratch.root().join("c"), 48, 8).await;
            let mut c = leader_client(&address).await;
            for job in ["changing", "steady"] {
                let url = if job == "steady" { &copy } else { &url };
                c.create_job(create_request(job, job_config(url, v1::Mode::Sync)))
                    .await
                    .expect("create");
            }
            let (before, bogus) = (digest_of(&url).await, "ab".repeat(32));
            // A malformed digest is refused as such.
            expect_status(
                c.join(join_with("steady", 0, "xyz")).await,
                Code::InvalidArgument,
                "manifest_sha256",
            );
            // The job's own digest joins; another one while the manifest is
            // unchanged is refused, naming both, and the job goes on.
            let joined = c
                .join(join_with("changing", 0, &before))
                .await
                .expect("the job's digest joins")
                .into_inner();
            expect_status(
                c.join(join_with("steady", 0, &bogus)).await,
                Code::FailedPrecondition,
                "another copy",
            );
            assert!(job_status(&mut c, "steady").await.failed.is_empty());
            // Within the recheck window the same answer comes without a read.
            expect_status(
                c.join(join_with("steady", 1, &bogus)).await,
                Code::FailedPrecondition,
                "another copy",
            );

            // The manifest of "changing" is replaced in place.
            std::fs::copy(
                format!("{other}/manifest.json"),
                format!("{url}/manifest.json"),
            )
            .expect("replace the manifest");
            let after = digest_of(&url).await;
            assert_ne!(after, before);
            // Rank 1 opened the new manifest: the job fails, naming it.
            expect_status(
                c.join(join_with("changing", 1, &after)).await,
                Code::FailedPrecondition,
                "changed since the job was created",
            );
            let status = job_status(&mut c, "changing").await;
            assert!(
                status.failed.contains("changed since the job was created"),
                "{status:?}"
            );
            // Rank 0, joined before, is told too; the other job serves.
            let calls = MemberCalls::own("changing", &joined);
            expect_status(
                c.get_assignment(calls.assignment(0)).await,
                Code::FailedPrecondition,
                "changed since the job was created",
            );
            c.join(torchrun_join("steady", 0, 2, 0))
                .await
                .expect("the other job serves");
        });
}
