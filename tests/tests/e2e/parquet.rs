//! Parquet datasets read in place, end to end: files written by `pyarrow`
//! in the Hugging Face layout, indexed from their footers, read through an
//! S3 server whose request log shows that only the projected columns'
//! bytes were fetched; a coordinated sync job of two epochs and a dynamic
//! job with a member killed (`kill -9`) deliver every row exactly once.

#![allow(
    clippy::print_stdout,
    reason = "the figures a run measured, for the closing note"
)]

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

use tributary_common::invariants::check_exactly_once;
use tributary_common::plan::epoch_spans;
use tributary_tests::cli::{parse_read, success_stdout, tributary, Scratch};
use tributary_tests::cluster::{coordinator, delivered, named_member, torchrun_group, JobArgs};
use tributary_tests::dataset::{sample_ids, shard_counts};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::faulty_s3::FaultyS3;
use tributary_tests::parquet::{write_parquet, S3Parquet};
use tributary_tests::s3::S3_ENV;
use tributary_tests::wait_until;

const WAIT: Duration = Duration::from_secs(180);
const SEED: u64 = 7;

/// Reading `image` and `label` of an HF-style dataset from S3 fetches the
/// footers and those columns' pages, never a byte of the 20 KB-a-row
/// `blob` column beside them: the log's ranges are checked against the
/// blob's column chunks, and bytes fetched / file bytes is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_projected_columns_byte_ranges_are_fetched_from_s3() {
    let scratch = Scratch::new();
    let dir = scratch.path("pq");
    let (manifest, report) = write_parquet(&scratch, &dir, 60, 25, 10);
    assert_eq!(manifest.samples, 60);
    let server = FaultyS3::start().await.expect("start server");
    server
        .put_dir("datasets", "hub", std::path::Path::new(&dir))
        .expect("serve");
    for fields in ["image,label", "label"] {
        server.clear_log();
        let endpoint = server.endpoint.clone();
        let output = tokio::task::spawn_blocking(move || {
            tributary(
                &[
                    "read",
                    "s3://datasets/hub",
                    "--s3-endpoint",
                    &endpoint,
                    "--fields",
                    fields,
                    "--image-size",
                    "16",
                    "--batch-size",
                    "8",
                ],
                &S3_ENV,
            )
        })
        .await
        .expect("run tributary");
        let rows = parse_read(&success_stdout("tributary read", output));
        check_exactly_once(0..60, rows.iter().map(|r| r.0)).expect("every row once");
        let (mut fetched, mut total, mut blob_bytes) = (0u64, 0u64, 0u64);
        for (name, file) in report["files"].as_object().expect("files") {
            total += file["size"].as_u64().expect("size");
            let blobs: Vec<Range<u64>> = file["blob"]
                .as_array()
                .expect("blob ranges")
                .iter()
                .map(|r| r[0].as_u64().expect("start")..r[1].as_u64().expect("end"))
                .collect();
            blob_bytes += blobs.iter().map(|b| b.end - b.start).sum::<u64>();
            let path = format!("/datasets/hub/{name}");
            for entry in server.log().iter().filter(|l| l.path == path) {
                assert_eq!(entry.method, "GET", "{entry:?}");
                let range = entry
                    .range
                    .clone()
                    .expect("ranged GETs only, never the whole file");
                for blob in &blobs {
                    assert!(
                        range.end <= blob.start || blob.end <= range.start,
                        "{name}: {range:?} reads the unprojected blob column at {blob:?}"
                    );
                }
                fetched += range.end - range.start;
            }
        }
        println!(
            "parquet projection --fields {fields}: fetched {fetched} of {total} file bytes \
             ({:.1}%; the unprojected blob column is {:.1}% of them)",
            100.0 * fetched as f64 / total as f64,
            100.0 * blob_bytes as f64 / total as f64
        );
        assert!(
            fetched + blob_bytes <= total,
            "{fetched} of {total} bytes fetched"
        );
        if fields == "label" {
            assert!(
                fetched * 20 < total,
                "labels alone: {fetched} of {total} bytes"
            );
        }
    }
}

fn job<'a>(address: &str, name: &'a str, data: &'a S3Parquet, flags: &[&str]) -> JobArgs<'a> {
    JobArgs {
        coordinators: address.to_owned(),
        job: name,
        dataset: &data.url,
        s3_endpoint: data.endpoint(),
        extra: flags.iter().map(|f| (*f).to_owned()).collect(),
    }
}

/// A coordinated sync job of 3 ranks over a Parquet dataset in S3, two
/// epochs: every row of each epoch is delivered exactly once.
#[test]
fn a_sync_job_over_parquet_delivers_every_row_once_per_epoch() {
    let etcd = EtcdServer::start();
    let data = S3Parquet::start(90, 40, 7);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let flags = [
        "--epochs",
        "2",
        "--batch-size",
        "6",
        "--shuffle-buffer",
        "12",
    ];
    let job = job(&address, "pq-sync", &data, &flags);
    let world = 3u32;
    let mut ranks = torchrun_group(&job, world, 0);
    for rank in &mut ranks {
        rank.wait_ok(WAIT);
    }
    let manifest = &data.manifest;
    let counts = shard_counts(manifest);
    let mut delivered = delivered(&ranks);
    assert_eq!(delivered.len(), 2, "one generation per epoch");
    for (epoch, (_, ids)) in std::mem::take(&mut delivered).into_iter().enumerate() {
        let all = sample_ids(manifest, &epoch_spans(&counts, SEED, epoch as u64));
        assert_eq!(all.len(), 90);
        check_exactly_once(all, ids).unwrap_or_else(|e| panic!("epoch {epoch}: {e}"));
    }
}

/// A dynamic job over a Parquet dataset: one of two members is killed
/// with `kill -9` after its first acks; the other finishes the epoch.
/// No unit is acknowledged twice and every row is delivered.
#[test]
fn a_dynamic_job_over_parquet_takes_over_a_killed_members_rows() {
    let etcd = EtcdServer::start();
    let data = S3Parquet::start(96, 32, 8);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let flags = [
        "--batch-size",
        "4",
        "--unit-samples",
        "8",
        "--step-ms",
        "20",
        "--member-ttl-s",
        "2",
        "--shuffle-buffer",
        "8",
    ];
    let job = job(&address, "pq-dyn", &data, &flags);
    let mut victim = named_member(&job, "m0");
    let mut survivor = named_member(&job, "m1");
    wait_until("the victim acked a unit", WAIT, || {
        victim.count("ack ") >= 1
    });
    victim.kill();
    survivor.wait_ok(WAIT);
    let mut acked = Vec::new();
    let mut rows = BTreeSet::new();
    for member in [&victim, &survivor] {
        for line in member.lines() {
            if let Some(rest) = line.strip_prefix("ack ") {
                let (_epoch, unit) = rest.split_once(' ').expect("ack EPOCH UNIT");
                acked.push(unit.parse::<u32>().expect("unit"));
            }
            if let Some(ids) = line.strip_prefix("got ") {
                rows.extend(ids.split(' ').map(|id| id.parse::<u64>().expect("id")));
            }
        }
    }
    // The victim may die between the coordinator confirming an ack and
    // printing it: acks printed are checked for repeats, rows for all.
    let unique: BTreeSet<u32> = acked.iter().copied().collect();
    assert_eq!(unique.len(), acked.len(), "a unit acknowledged twice");
    assert_eq!(rows.len(), 96, "every row delivered");
}
