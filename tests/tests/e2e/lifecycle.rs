//! Job lifecycle against the `tributary coordinator` binary on etcd:
//! DeleteJob removes a job's keys and state while a member is in it, a
//! finished job expires after `--finished-job-ttl`, and a soak of
//! create/finish/delete cycles (sync jobs through many torchrun restarts,
//! dynamic jobs through an epoch) leaves nothing behind in etcd and keeps
//! the coordinator's memory bounded.
//!
//! The soak runs `TRIBUTARY_SOAK_CYCLES` cycles (CI: 600; the closing
//! figures of issue 17 are from 10,000) and prints the coordinator's RSS.

#![allow(
    clippy::print_stdout,
    reason = "the soak prints the memory it measures"
)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use tonic::transport::Channel;
use tonic::Code;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_tests::cluster::coordinator_with;
use tributary_tests::coordinator::{
    create_request, expect_status, job_config, leader_client, named_join, torchrun_join, unit_refs,
    MemberCalls,
};
use tributary_tests::dataset::S3Dataset;
use tributary_tests::etcd::{snapshot, EtcdServer};
use tributary_tests::eventually;

type Client = CoordinatorClient<Channel>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Keys etcd holds under the job's prefix.
async fn keys_of(etcd: &str, job: &str) -> Vec<String> {
    let prefix = format!("/tributary/{job}/");
    snapshot(etcd)
        .await
        .0
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with(&prefix))
        .collect()
}

async fn listed(client: &mut Client) -> Vec<String> {
    let jobs = client
        .list_jobs(v1::ListJobsRequest {})
        .await
        .expect("list")
        .into_inner()
        .jobs;
    jobs.into_iter().map(|j| j.job).collect()
}

/// Creates `job` with `config` and joins it as the dynamic member `m`.
async fn create_and_join(
    client: &mut Client,
    job: &str,
    config: v1::JobConfig,
) -> v1::JoinResponse {
    client
        .create_job(create_request(job, config))
        .await
        .expect("create");
    client
        .join(named_join(job, "m", ""))
        .await
        .expect("join")
        .into_inner()
}

/// A dynamic job of one epoch, run to its end by one member that then
/// leaves.
async fn finish_dynamic(client: &mut Client, job: &str, url: &str) {
    let mut config = job_config(url, v1::Mode::Dynamic);
    config.epochs = 1;
    config.unit_samples = 1 << 16;
    let joined = create_and_join(client, job, config).await;
    let calls = MemberCalls::own(job, &joined);
    let units = client
        .acquire(calls.acquire(1000))
        .await
        .expect("acquire")
        .into_inner()
        .units;
    assert!(!units.is_empty());
    let acked = unit_refs(&units);
    client
        .report(v1::ReportRequest {
            job: job.into(),
            member: joined.member.clone(),
            acked,
            secret: joined.secret.clone(),
            ..v1::ReportRequest::default()
        })
        .await
        .expect("ack");
    client.leave(calls.member()).await.expect("leave");
}

/// A sync job of `epochs` epochs, each through `restarts` torchrun
/// restarts of one rank that each commit a little further, then finished;
/// returns the most generations its status listed at any epoch's end.
async fn finish_sync(
    client: &mut Client,
    job: &str,
    url: &str,
    epochs: u64,
    restarts: u64,
) -> usize {
    let mut config = job_config(url, v1::Mode::Sync);
    config.epochs = epochs;
    client
        .create_job(create_request(job, config))
        .await
        .expect("create");
    let mut restart = 0;
    let mut most = 0;
    let mut last = None;
    for epoch in 0..epochs {
        for _ in 0..restarts {
            let joined = client
                .join(torchrun_join(job, 0, 1, restart))
                .await
                .expect("join")
                .into_inner();
            restart += 1;
            let calls = MemberCalls::own(job, &joined);
            if joined.epoch < epoch {
                // Resumed into what was left of the epoch before the
                // commit: read it to its end first.
                let rest = client
                    .get_assignment(calls.assignment(joined.epoch))
                    .await
                    .expect("the rest of the epoch")
                    .into_inner();
                let samples = rest.spans.iter().map(|s| u64::from(s.end - s.start)).sum();
                client
                    .report(calls.report(rest.generation, samples))
                    .await
                    .expect("report");
            }
            let part = client
                .get_assignment(calls.assignment(epoch))
                .await
                .expect("assignment")
                .into_inner();
            let samples: u64 = part.spans.iter().map(|s| u64::from(s.end - s.start)).sum();
            // Commit one sample of what is left: the next restart resumes
            // after it, in the same epoch.
            client
                .commit(calls.commit(part.generation, 1.min(samples)))
                .await
                .expect("commit");
            last = Some((joined, part.generation, samples));
        }
        let (joined, generation, samples) = last.as_ref().expect("a restart");
        // The last restart's rank reads its part to the end.
        client
            .report(MemberCalls::own(job, joined).report(*generation, *samples))
            .await
            .expect("report");
        let status = client
            .get_status(v1::JobRequest { job: job.into() })
            .await
            .expect("status")
            .into_inner();
        most = most.max(status.generations.len());
        // The last restart's rank goes on to the next epoch.
        let next = client
            .get_assignment(MemberCalls::own(job, joined).assignment(epoch + 1))
            .await
            .expect("next epoch")
            .into_inner();
        assert_eq!(next.finished, epoch + 1 == epochs, "{next:?}");
    }
    let (joined, ..) = last.expect("a restart");
    let calls = MemberCalls::own(job, &joined);
    let status = client
        .get_status(v1::JobRequest { job: job.into() })
        .await
        .expect("status")
        .into_inner();
    assert!(status.finished && status.finished_at_ms > 0, "{status:?}");
    client.leave(calls.member()).await.expect("leave");
    most
}

#[test]
fn a_deleted_job_leaves_nothing_and_a_finished_one_expires() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(64, 16);
    let (_coordinator, address) = coordinator_with(
        &[etcd.endpoint()],
        data.endpoint(),
        &["--finished-job-ttl", "2s"],
    );
    runtime().block_on(async {
        let mut client = leader_client(&address).await;
        // Delete a job while a member is in it and watching.
        let job = "doomed";
        let config = job_config(&data.url, v1::Mode::Dynamic);
        let joined = create_and_join(&mut client, job, config).await;
        let calls = MemberCalls::own(job, &joined);
        let mut events = client
            .watch(calls.member())
            .await
            .expect("watch")
            .into_inner();
        assert!(!keys_of(&etcd.endpoint(), job).await.is_empty());
        client
            .delete_job(v1::JobRequest { job: job.into() })
            .await
            .expect("delete");
        assert!(keys_of(&etcd.endpoint(), job).await.is_empty());
        expect_status(client.keep_alive(calls.member()).await, Code::NotFound, job);
        expect_status(
            client.get_status(v1::JobRequest { job: job.into() }).await,
            Code::NotFound,
            job,
        );
        expect_status(
            client.delete_job(v1::JobRequest { job: job.into() }).await,
            Code::NotFound,
            job,
        );
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(Ok(_)) = events.next().await {}
        })
        .await;
        assert!(ended.is_ok(), "the member's Watch stream ended");
        assert!(!listed(&mut client).await.contains(&job.to_owned()));
        // The name is free again: a new job, not the old one's state.
        client
            .create_job(create_request(
                job,
                job_config(&data.url, v1::Mode::Dynamic),
            ))
            .await
            .expect("create again");
        let status = client
            .get_status(v1::JobRequest { job: job.into() })
            .await
            .expect("status")
            .into_inner();
        assert!(
            status.members.is_empty() && status.acked_units == 0,
            "{status:?}"
        );

        // A finished job is listed until its retention passes, then gone
        // with its keys.
        finish_dynamic(&mut client, "done", &data.url).await;
        let finished_at = Instant::now();
        assert!(listed(&mut client).await.contains(&"done".to_owned()));
        eventually(
            "the finished job to expire",
            Duration::from_secs(30),
            Duration::from_millis(100),
            async || !listed(&mut client).await.contains(&"done".to_owned()),
        )
        .await;
        let kept = finished_at.elapsed();
        assert!(kept >= Duration::from_millis(1500), "kept only {kept:?}");
        assert!(keys_of(&etcd.endpoint(), "done").await.is_empty());
        println!("lifecycle: a finished job was deleted {kept:?} after it finished (ttl 2 s)");
    });
}

#[test]
fn create_finish_delete_soak_keeps_memory_and_etcd_bounded() {
    let cycles: usize = std::env::var("TRIBUTARY_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(64, 16);
    let (coordinator, address) =
        coordinator_with(&[etcd.endpoint()], data.endpoint(), &["--flush-ms", "2"]);
    let rss = || coordinator.rss().expect("the coordinator runs");
    runtime().block_on(async {
        let client = leader_client(&address).await;
        // Every 10th cycle is a sync job of 4 epochs with 5 restarts in
        // each (20 generations, 20 commits); the others dynamic. 8 at a
        // time.
        let run = |from: usize, to: usize, delete: bool| {
            let client = client.clone();
            let url = data.url.clone();
            async move {
                let mut tasks = tokio::task::JoinSet::new();
                for lane in 0..8 {
                    let (mut client, url) = (client.clone(), url.clone());
                    tasks.spawn(async move {
                        let mut most_generations = 0;
                        for i in (from + lane..to).step_by(8) {
                            let job = format!("soak-{i}");
                            if i.is_multiple_of(10) {
                                let kept = finish_sync(&mut client, &job, &url, 4, 5).await;
                                most_generations = most_generations.max(kept);
                            } else {
                                finish_dynamic(&mut client, &job, &url).await;
                            }
                            if delete {
                                client
                                    .delete_job(v1::JobRequest { job })
                                    .await
                                    .expect("delete");
                            }
                        }
                        most_generations
                    });
                }
                let mut most = 0;
                while let Some(kept) = tasks.join_next().await {
                    most = most.max(kept.expect("lane"));
                }
                most
            }
        };
        // Warm up (allocator pools, connections), then measure.
        let warm = cycles / 10;
        let idle = rss();
        run(0, warm, true).await;
        let before = rss();
        let started = Instant::now();
        let most_generations = run(warm, cycles, true).await;
        let took = started.elapsed();
        let after = rss();
        let measured = (cycles - warm) as f64;
        let growth = after as f64 - before as f64;
        println!(
            "soak: coordinator RSS {:.1} MiB idle; after {warm} warm-up cycles, {} more create/finish/delete cycles in {took:.1?} ({:.0}/s); RSS {:.1} MiB -> {:.1} MiB \
             ({:+.0} bytes per cycle); at most {most_generations} of a sync job's 20 generations kept",
            idle as f64 / 1048576.0,
            cycles - warm,
            measured / took.as_secs_f64(),
            before as f64 / 1048576.0,
            after as f64 / 1048576.0,
            growth / measured,
        );
        assert!(listed(&mut client.clone()).await.is_empty(), "every job deleted");
        let left: Vec<String> = snapshot(&etcd.endpoint())
            .await
            .0
            .into_iter()
            .map(|(k, _)| k)
            // The election, and transaction guards (they expire with
            // their lease, 60 s after their transaction).
            .filter(|k| !k.starts_with("/tributary/."))
            .collect();
        assert!(left.is_empty(), "etcd keeps {left:?}");
        // The epoch in progress keeps its restarts' chain (5), plus the
        // previous epoch's last generation and the commit's: never all 20.
        assert!(most_generations <= 7, "generations compacted: {most_generations}");
        // Before jobs were freed, each kept about 14 kB: 100 kB of
        // RSS growth here is 16 bytes per cycle at 10,000 cycles.
        assert!(
            growth / measured < 2048.0,
            "RSS grew {growth} bytes over {measured} cycles"
        );
        // Baseline, same run: the same cycles without the delete, the
        // coordinator's memory before jobs could be freed.
        let kept = warm.max(100);
        let before_kept = rss();
        run(cycles, cycles + kept, false).await;
        let per_kept = (rss() as f64 - before_kept as f64) / kept as f64;
        println!(
            "soak baseline: {kept} cycles without DeleteJob grew RSS {per_kept:+.0} bytes per job \
             ({:.0} bytes per cycle with it)",
            growth / measured
        );
    });
}

#[test]
fn json_logs_carry_the_call_its_job_member_rank_and_generation() {
    let data = S3Dataset::start(16, 16);
    let address = format!("127.0.0.1:{}", tributary_tests::free_port());
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut coordinator = std::process::Command::new(tributary_tests::cli::tributary_bin())
        .args([
            "coordinator",
            "--listen",
            &address,
            "--s3-endpoint",
            data.endpoint(),
            "--log-format",
            "json",
        ])
        .envs(tributary_tests::s3::S3_ENV)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("coordinator");
    runtime().block_on(async {
        let mut client = leader_client(&address).await;
        client
            .create_job(create_request(
                "logged",
                job_config(&data.url, v1::Mode::Sync),
            ))
            .await
            .expect("create");
        client
            .join(torchrun_join("logged", 0, 1, 3))
            .await
            .expect("join");
    });
    let _ = coordinator.kill();
    let _ = coordinator.wait();
    let text = std::fs::read_to_string(log.path()).expect("log");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let joined = lines
        .iter()
        .find(|l| l["fields"]["message"] == "member joined")
        .unwrap_or_else(|| panic!("no 'joined' line in\n{text}"));
    let span = &joined["span"];
    assert_eq!(span["name"], "rpc", "{joined}");
    assert_eq!(span["method"], "Join", "{joined}");
    assert_eq!(span["job"], "logged", "{joined}");
    assert_eq!(span["member"], "run.3.0", "{joined}");
    assert_eq!(span["rank"], 0, "{joined}");
    assert_eq!(span["generation"], 0, "{joined}");
}

/// The `tributary coordinator` binary alone on the in-memory store, with
/// its own default log filter (no RUST_LOG) and stderr into `log`.
fn memory_coordinator(
    data: &S3Dataset,
    log: &tempfile::NamedTempFile,
) -> (std::process::Child, String) {
    let address = format!("127.0.0.1:{}", tributary_tests::free_port());
    let coordinator = std::process::Command::new(tributary_tests::cli::tributary_bin())
        .args([
            "coordinator",
            "--listen",
            &address,
            "--s3-endpoint",
            data.endpoint(),
        ])
        .envs(tributary_tests::s3::S3_ENV)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("coordinator");
    (coordinator, address)
}

#[test]
fn a_rank_of_a_deleted_job_hears_it_was_deleted_and_a_conflicting_create_says_how_to_proceed() {
    let data = S3Dataset::start(16, 16);
    let log = tempfile::NamedTempFile::new().expect("log file");
    let (mut coordinator, address) = memory_coordinator(&data, &log);
    runtime().block_on(async {
        let mut client = leader_client(&address).await;
        let config = job_config(&data.url, v1::Mode::Sync);
        client
            .create_job(create_request("gone", config.clone()))
            .await
            .expect("create");
        let other = v1::JobConfig {
            seed: config.seed + 1,
            ..config.clone()
        };
        let conflict = client
            .create_job(create_request("gone", other))
            .await
            .expect_err("another config");
        assert_eq!(conflict.code(), Code::AlreadyExists, "{conflict:?}");
        assert!(
            conflict.message().contains("`tributary job delete gone`")
                && conflict.message().contains("another job name"),
            "{conflict:?}"
        );
        let joined = client
            .join(torchrun_join("gone", 0, 1, 0))
            .await
            .expect("join")
            .into_inner();
        let calls = MemberCalls::own("gone", &joined);
        client
            .delete_job(v1::JobRequest { job: "gone".into() })
            .await
            .expect("delete");
        let refused = client
            .keep_alive(calls.member())
            .await
            .expect_err("a deleted job's rank");
        assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
        assert!(
            refused.message().contains("job \"gone\" was deleted"),
            "{refused:?}"
        );
        // Created again, the name is the new job's.
        client
            .create_job(create_request("gone", config))
            .await
            .expect("create again");
        let unknown = client
            .keep_alive(calls.member())
            .await
            .expect_err("the old member is not the new job's");
        assert!(!unknown.message().contains("was deleted"), "{unknown:?}");
    });
    let _ = coordinator.kill();
    let _ = coordinator.wait();
}

#[test]
fn the_coordinator_logs_job_events_at_info_without_colour_codes_into_a_redirected_log() {
    let data = S3Dataset::start(16, 16);
    let log = tempfile::NamedTempFile::new().expect("log file");
    let (mut coordinator, address) = memory_coordinator(&data, &log);
    runtime().block_on(async {
        let mut client = leader_client(&address).await;
        client
            .create_job(create_request(
                "events",
                job_config(&data.url, v1::Mode::Sync),
            ))
            .await
            .expect("create");
        let joined = client
            .join(torchrun_join("events", 0, 1, 0))
            .await
            .expect("join")
            .into_inner();
        let calls = MemberCalls::own("events", &joined);
        // Calls made often log nothing each at info.
        for _ in 0..3 {
            client.commit(calls.commit(0, 0)).await.expect("commit");
        }
        client.leave(calls.member()).await.expect("leave");
        client
            .delete_job(v1::JobRequest {
                job: "events".into(),
            })
            .await
            .expect("delete");
    });
    let _ = coordinator.kill();
    let _ = coordinator.wait();
    let text = std::fs::read_to_string(log.path()).expect("log");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI escapes in a redirected log:\n{text}"
    );
    for event in [
        "job created",
        "member joined",
        "generation started",
        "member left",
        "job deleted",
    ] {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(" INFO ") && l.contains(event))
            .collect();
        assert_eq!(lines.len(), 1, "one `{event}` line at info in\n{text}");
        assert!(
            lines[0].contains("job=\"events\"") || lines[0].contains("job=events"),
            "{}",
            lines[0]
        );
    }
    assert!(!text.contains("commit"), "a line per commit call:\n{text}");
}
