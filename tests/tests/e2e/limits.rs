//! The coordinator's caps against a real coordinator on etcd, run under a
//! memory limit: a request over a cap is refused naming it, the largest
//! request the caps allow is served, and a stored job over a smaller cap
//! (the replica restarted with it) fails alone while the others serve.

use tonic::Code;
use tributary_common::proto::v1;
use tributary_tests::cli::Scratch;
use tributary_tests::cluster::coordinator_limited;
use tributary_tests::coordinator::{
    create_request, expect_status, job_config, job_status, leader_client, named_join, MemberCalls,
};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::EtcdServer;

/// No S3 here: every dataset is a local directory.
const NO_S3: &str = "http://127.0.0.1:9";
/// The address space the coordinator runs in: the reproduction's 2 GB
/// leader died within a second of the unbounded request.
const ADDRESS_SPACE: u64 = 2 << 30;
/// The deployment's memory limit (deploy/): what the largest allowed job
/// must fit in, with room to spare.
const DEPLOYMENT_MEMORY: u64 = 1 << 30;

/// A dynamic job of `samples` per epoch taken from the dataset at `url`
/// (repeated as often as that needs), in units of one sample.
fn repeated(url: &str, samples: u64) -> v1::JobConfig {
    v1::JobConfig {
        manifest_url: String::new(),
        unit_samples: 1,
        sources: vec![v1::Source {
            manifest_url: url.to_owned(),
            take: Some(v1::source::Take::Samples(samples)),
        }],
        ..job_config("", v1::Mode::Dynamic)
    }
}

#[test]
fn a_coordinator_under_a_memory_limit_refuses_epochs_over_its_caps_and_serves_the_largest_it_allows(
) {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    let endpoints = [etcd.endpoint()];
    // A job's etcd share raised to 2 GiB: the units cap is what binds.
    let share = ["--max-job-store-bytes", "2147483648"];
    let (mut coordinator, address) = coordinator_limited(&endpoints, NO_S3, &share, ADDRESS_SPACE);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let url = runtime.block_on(async {
        // 200 samples in 10 shards.
        let url = tiny_dataset(scratch.root(), 200, 20).await;
        let mut c = leader_client(&address).await;
        c.create_job(create_request("small", job_config(&url, v1::Mode::Dynamic)))
            .await
            .expect("a small job");

        // The reproduction: 200,000,000 one-sample units of a 200-sample
        // dataset (about 4 GB of units, had they been built).
        let bomb = c
            .create_job(create_request("bomb", repeated(&url, 200_000_000)))
            .await;
        expect_status(bomb, Code::ResourceExhausted, "--max-units-per-epoch");
        // The cap is 4,194,304 units (and spans): 3,900,000 one-sample
        // units over 19,500 passes of 10 shards fit under it.
        let created = c
            .create_job(create_request("largest", repeated(&url, 3_900_000)))
            .await
            .expect("the largest job the caps allow")
            .into_inner();
        assert_eq!(created.samples, 3_900_000);
        let member = c
            .join(named_join("largest", "m", ""))
            .await
            .expect("join")
            .into_inner();
        let acquired = c
            .acquire(MemberCalls::own("largest", &member).acquire(4))
            .await
            .expect("acquire")
            .into_inner();
        assert_eq!(acquired.units.len(), 4, "the largest job serves units");
        let peak = coordinator.peak_rss().expect("the coordinator is alive");
        eprintln!(
            "coordinator peak RSS with the largest allowed job: {} MiB",
            peak >> 20
        );
        assert!(
            peak < DEPLOYMENT_MEMORY / 2,
            "the largest allowed job took the coordinator to {peak} bytes of memory"
        );
        url
    });
    drop(runtime);

    // Restarted with a cap below the large job: that job fails alone, with
    // the cap named; the small one serves.
    coordinator.kill();
    let (_coordinator, address) = coordinator_limited(
        &endpoints,
        NO_S3,
        &["--max-units-per-epoch", "100000"],
        ADDRESS_SPACE,
    );
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut c = leader_client(&address).await;
        let failed = job_status(&mut c, "largest").await;
        assert!(
            failed.failed.contains("--max-units-per-epoch"),
            "{failed:?}"
        );
        let small = job_status(&mut c, "small").await;
        assert!(small.failed.is_empty(), "{small:?}");
        c.join(named_join("small", "s", ""))
            .await
            .expect("the small job still takes members");
        // A new job over the new cap is refused the same way.
        let refused = c
            .create_job(create_request("again", repeated(&url, 200_000)))
            .await;
        expect_status(refused, Code::ResourceExhausted, "--max-units-per-epoch");
    });
}

#[test]
fn members_over_every_job_their_lease_renewals_and_a_jobs_etcd_share_are_capped() {
    let etcd = EtcdServer::start();
    let scratch = Scratch::new();
    // Two members over all jobs; 1 lease renewal a second (a member of a
    // 120 s job renews 0.025 times a second, of a 1 s job 3 times).
    let caps = ["--max-members", "2", "--max-lease-renewals", "1"];
    let (_coordinator, address) =
        coordinator_limited(&[etcd.endpoint()], NO_S3, &caps, ADDRESS_SPACE);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let url = tiny_dataset(scratch.root(), 64, 16).await;
            let mut c = leader_client(&address).await;
            // Under the default etcd share per job (512 MiB), fewer
            // one-sample units fit than `--max-units-per-epoch` allows.
            let refused = c
                .create_job(create_request("share", repeated(&url, 2_000_000)))
                .await;
            expect_status(refused, Code::ResourceExhausted, "--max-job-store-bytes");
            let quick = v1::JobConfig {
                member_ttl_s: 1,
                ..job_config(&url, v1::Mode::Dynamic)
            };
            for (job, config) in [
                ("a", job_config(&url, v1::Mode::Dynamic)),
                ("b", job_config(&url, v1::Mode::Dynamic)),
                ("quick", quick),
            ] {
                c.create_job(create_request(job, config))
                    .await
                    .expect("create");
            }
            expect_status(
                c.join(named_join("quick", "q", "")).await,
                Code::ResourceExhausted,
                "--max-lease-renewals 1",
            );
            let first = c
                .join(named_join("a", "m1", ""))
                .await
                .expect("join")
                .into_inner();
            c.join(named_join("b", "m2", "")).await.expect("join");
            expect_status(
                c.join(named_join("b", "m3", "")).await,
                Code::ResourceExhausted,
                "--max-members 2",
            );
            assert_eq!(job_status(&mut c, "b").await.members.len(), 1);
            c.leave(MemberCalls::own("a", &first).member())
                .await
                .expect("leave");
            c.join(named_join("b", "m3", ""))
                .await
                .expect("room again once a member left");
        });
}
