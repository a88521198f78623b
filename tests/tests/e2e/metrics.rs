//! The coordinator's and a rank's /metrics scraped during a dynamic job on
//! etcd while a member is killed with `kill -9`: both expositions pass
//! `promtool check metrics`, and the counters moved as the job did (a
//! member lease expired, the killed member's units were reassigned, every
//! unit acked once, the rank counted what it delivered).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tributary_common::plan::lease::units;
use tributary_tests::cluster::{self, coordinator_with, named_members, JobArgs, DYNAMIC_UNIT};
use tributary_tests::dataset::{shard_counts, S3Dataset};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::{free_port, wait_until};

const SEED: u64 = 7;

/// `GET /metrics` at `address`: the body.
pub fn scrape(address: &str) -> String {
    let mut stream = TcpStream::connect(address).expect("connect to the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_owned()
}

/// The value of the series `series` (name and labels exactly as exposed,
/// labels sorted by name); 0 when absent.
pub fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .filter_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .filter_map(|v| v.trim().parse().ok())
        .next()
        .unwrap_or(0.0)
}

/// promtool from the test virtualenv (scripts/setup.sh unpacks it there).
fn promtool() -> PathBuf {
    let venv = std::env::var_os("TRIBUTARY_VENV").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv"),
        PathBuf::from,
    );
    let promtool = venv.join("bin/promtool");
    assert!(
        promtool.exists(),
        "{} is missing: run scripts/setup.sh",
        promtool.display()
    );
    promtool
}

/// Runs `promtool check metrics` on `text`; panics with its complaints.
pub fn promtool_check(text: &str) {
    let mut child = Command::new(promtool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Scrapes a live member's own endpoint once it has handed the trainer a
/// batch: promtool passes, and it counted at least the samples it printed
/// before the scrape. (A member may get no unit until the others' leases
/// run short: on this small dataset the first to ask leases several.)
fn rank_metrics_count_what_it_delivered(member: &tributary_tests::process::Proc) {
    wait_until(
        "the member handed a batch over",
        Duration::from_secs(60),
        || member.count("got ") >= 1,
    );
    let address = member
        .lines()
        .iter()
        .find_map(|l| l.strip_prefix("metrics ").map(str::to_owned))
        .expect("the member printed its metrics address");
    let printed: usize = member
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("got "))
        .map(|ids| ids.split(' ').count())
        .sum();
    let text = scrape(&address);
    promtool_check(&text);
    let labels = "{job=\"metrics-e2e\",rank=\"m0\"}";
    let get = |name: &str| value(&text, &format!("tributary_rank_{name}{labels}"));
    assert!(
        get("samples_total") >= printed as f64,
        "{printed} printed:\n{text}"
    );
    assert!(get("samples_total") > 0.0, "{text}");
    assert!(get("fetched_bytes_total") > 0.0, "{text}");
    assert!((0.0..=1.0).contains(&get("data_wait_ratio")), "{text}");
    assert_eq!(get("bad_samples_total"), 0.0);
}

#[test]
fn coordinator_metrics_count_a_killed_members_expiry_and_reassigned_units() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(240, 48);
    let metrics = format!("127.0.0.1:{}", free_port());
    let (_coordinator, address) = coordinator_with(
        &[etcd.endpoint()],
        data.endpoint(),
        &["--metrics-listen", &metrics],
    );
    wait_until("the metrics endpoint", Duration::from_secs(30), || {
        TcpStream::connect(&metrics).is_ok()
    });
    let before = scrape(&metrics);
    promtool_check(&before);
    let ttl_s = 2u64;
    let mut job = JobArgs::dynamic(address.clone(), "metrics-e2e", &data, 40, ttl_s);
    job.extra
        .extend(["--epochs", "2", "--metrics-listen", "127.0.0.1:0"].map(String::from));
    let mut members = named_members(&job, 3);
    // Kill m1 while it holds a unit it has not acked.
    let holding = |m: &tributary_tests::process::Proc| m.count("lease ") > m.count("ack ");
    wait_until("m1 holds a unit", Duration::from_secs(60), || {
        members[1].count("ack ") >= 1 && holding(&members[1])
    });
    members[1].kill();
    let during = scrape(&metrics);
    promtool_check(&during);
    rank_metrics_count_what_it_delivered(&members[0]);
    assert_eq!(value(&during, "tributary_coordinator_leader"), 1.0);
    // Job gauges are rebuilt every 2 s.
    wait_until("the job counted running", Duration::from_secs(10), || {
        let now = scrape(&metrics);
        value(&now, "tributary_coordinator_jobs{state=\"running\"}") == 1.0
            && value(
                &now,
                "tributary_coordinator_job_members{job=\"metrics-e2e\"}",
            ) >= 2.0
    });
    wait_until(
        "the killed member's lease expiry",
        Duration::from_secs(30),
        || {
            value(
                &scrape(&metrics),
                "tributary_coordinator_member_leases_expired_total",
            ) >= 1.0
        },
    );
    for i in [0usize, 2] {
        members[i].wait_ok(Duration::from_secs(180));
    }
    let status = cluster::status(&address, "metrics-e2e").expect("status");
    assert!(status.finished, "{status:?}");
    wait_until("the job counted finished", Duration::from_secs(30), || {
        value(
            &scrape(&metrics),
            "tributary_coordinator_jobs{state=\"finished\"}",
        ) == 1.0
    });
    let after = scrape(&metrics);
    promtool_check(&after);
    let counts = shard_counts(&data.manifest);
    // Units follow each epoch's shard order, so their number may differ.
    let total: f64 = (0..2)
        .map(|epoch| units(&counts, SEED, epoch, DYNAMIC_UNIT).len() as f64)
        .sum();
    let get = |name: &str| value(&after, &format!("tributary_coordinator_{name}"));
    assert_eq!(get("member_leases_expired_total"), 1.0, "{after}");
    let reassigned = get("units_reassigned_total");
    assert!(reassigned >= 1.0, "m1 held a unit when killed: {after}");
    // Every unit of both epochs acked exactly once, and leased once more
    // for each time it went back to the pool.
    assert_eq!(get("units_acked_total"), total, "{after}");
    assert_eq!(get("units_leased_total"), total + reassigned, "{after}");
    assert!(get("rpc_requests_total{code=\"OK\",method=\"Acquire\"}") >= 1.0);
    assert!(get("rpc_requests_total{code=\"OK\",method=\"Report\"}") >= 1.0);
    assert!(get("store_txn_duration_seconds_count") >= 1.0);
    assert_eq!(get("store_txn_failures_total"), 0.0);
    assert!(
        get("rpc_duration_seconds_count{method=\"Join\"}") >= 3.0,
        "{after}"
    );
    drop(etcd);
}
