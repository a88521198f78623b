//! Reads through object_store's S3 backend, configured as production
//! configures it (`Location::open` of an `s3://` URL with an endpoint), from
//! an S3-compatible server on loopback that misbehaves on command: error
//! statuses, connection resets and clean closes mid-body, slow and stalled
//! bodies, and `Content-Length` headers that lie. Every read gives the
//! samples of a clean run, in the same order, or fails after its retry
//! budget with an error that names the object, the range and the attempts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::ObjectStoreExt;
use tributary_common::manifest::{Compression, Manifest, MANIFEST_NAME};
use tributary_common::plan::span::{Span, SpanSet};
use tributary_common::sample::Sample;
use tributary_io::{IoError, RetryPolicy};
use tributary_tests::dataset::pack_local;
use tributary_tests::faulty_s3::{Fault, FaultyS3};
use tributary_tests::s3::s3_options;
use tributary_tools::pack::PackOptions;
use tributary_tools::synth::{write_image_folder, SynthOptions};
use tributary_worker::pipeline::fetch::FetchConfig;
use tributary_worker::pipeline::metrics::Metrics;
use tributary_worker::pipeline::span_samples;
use tributary_worker::{
    Batch, Dataset, DecodeConfig, Loader, LoaderConfig, Location, PlanConfig, StoreOptions,
    WorkerError,
};
use tributary_worker::{Size, Transform};

const URL: &str = "s3://datasets/train";

/// A short budget with short pauses: tests that exhaust it stay fast.
fn policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 5,
        first_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(40),
        stall_timeout: Duration::from_secs(1),
    }
}

/// The options the CLI builds for `--s3-endpoint http://...`.
fn options(server: &FaultyS3) -> StoreOptions {
    let mut options = s3_options(&server.endpoint);
    options.retry = policy();
    options
}

/// A packed dataset served by a faulty server at [`URL`].
struct Served {
    server: FaultyS3,
    /// The local copy of what the server serves.
    dir: tempfile::TempDir,
    /// The shards' object names, from the manifest.
    shards: Vec<String>,
}

impl Served {
    /// Breaks the next `times` GETs of each shard with `fault`.
    fn fail_shards(&self, fault: &Fault, times: u32) {
        for shard in &self.shards {
            self.server.fail(shard, fault.clone(), times);
        }
    }

    /// The bytes of shard `i`, as the server holds them.
    fn shard(&self, i: usize) -> Vec<u8> {
        std::fs::read(self.dir.path().join("shards").join(&self.shards[i])).expect("read shard")
    }
}

/// Packs a small dataset into a local directory and serves it from a
/// faulty server at [`URL`].
async fn served() -> Served {
    let dir = tempfile::tempdir().expect("tempdir");
    let images = dir.path().join("images");
    let synth = SynthOptions {
        images: 48,
        classes: 3,
        seed: 5,
    };
    write_image_folder(&images, &synth, &|_| ()).expect("synth");
    let shards = dir.path().join("shards");
    let pack_options = PackOptions {
        max_samples: 12,
        compression: Compression::ZSTD,
        block_bytes: 4096,
        ..PackOptions::default()
    };
    pack_local(&images, &shards, &pack_options).await;
    let server = FaultyS3::start().await.expect("start server");
    let objects = server.put_dir("datasets", "train", &shards).expect("serve");
    assert_eq!(objects, 9, "4 shards, their indexes and a manifest");
    let manifest = std::fs::read(shards.join(MANIFEST_NAME)).expect("read manifest");
    let manifest = Manifest::from_json(&manifest).expect("parse manifest");
    let shards = manifest.shards.iter().map(|s| s.name.clone()).collect();
    Served {
        server,
        dir,
        shards,
    }
}

/// Every sample but each shard's first, shards in reverse order: a span
/// order the reads must keep.
fn spans(dataset: &Dataset) -> SpanSet {
    let spans: Vec<Span> = (0..dataset.manifest.shards.len())
        .rev()
        .map(|i| Span::new(i as u32, 1, dataset.manifest.shards[i].samples))
        .collect();
    SpanSet::new(spans)
}

/// Small reads, several in flight: many GETs for faults to land on.
fn fetch_config() -> FetchConfig {
    FetchConfig {
        max_requests: 4,
        first_read_bytes: 2048,
        max_read_bytes: 16 << 10,
        ..FetchConfig::default()
    }
}

async fn samples(server: &FaultyS3) -> Result<Vec<Sample>, WorkerError> {
    let dataset = Dataset::open(URL, &options(server)).await?;
    let spans = spans(&dataset);
    let fetched: Vec<_> = span_samples(
        dataset,
        &spans,
        &fetch_config(),
        Arc::new(Metrics::default()),
    )
    .try_collect()
    .await?;
    Ok(fetched.into_iter().flat_map(|f| f.samples).collect())
}

/// GETs of the shards, as (path, range start) -> requests.
fn shard_gets(served: &Served) -> HashMap<(String, u64), usize> {
    let mut gets = HashMap::new();
    for logged in served.server.log() {
        if logged.method == "GET" && !logged.path.ends_with(MANIFEST_NAME) {
            let start = logged.range.map_or(0, |r| r.start);
            *gets.entry((logged.path, start)).or_default() += 1;
        }
    }
    gets
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_reads_through_each_fault_give_the_samples_of_a_clean_run_in_order() {
    let served = served().await;
    let server = &served.server;
    let clean = samples(server).await.expect("clean read");
    assert_eq!(clean.len(), 44, "48 samples less one per shard");
    let requests = server.log().len();
    assert!(requests > 10, "{requests} requests in a clean run");

    let faults = [
        Fault::Status(503),
        Fault::Status(500),
        Fault::ResetAfter(0),
        Fault::ResetAfter(1500),
        Fault::CloseAfter(1000),
        Fault::Slow {
            chunk: 700,
            pause: Duration::from_millis(2),
        },
        Fault::StallAfter(100),
        Fault::ShortLength(10),
        Fault::ClaimLength(1 << 40),
    ];
    for fault in faults {
        server.heal();
        server.clear_log();
        served.fail_shards(&fault, 3);
        let got = samples(server)
            .await
            .unwrap_or_else(|e| panic!("read under {fault:?}: {e}"));
        assert!(got == clean, "{fault:?}: different samples or order");
        let hit = server
            .log()
            .iter()
            .filter(|l| l.fault.as_ref() == Some(&fault))
            .count();
        assert_eq!(hit, 12, "{fault:?} was injected three times per shard");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_closed_midway_is_resumed_from_the_first_missing_byte() {
    let served = served().await;
    let server = &served.server;
    let location = Location::open(URL, &options(server), false).expect("open");
    let shard = &served.shards[1];
    let object = served.shard(1);
    server.fail(shard, Fault::CloseAfter(1234), 1);
    let range = 100..object.len() as u64 - 50;
    let data = location
        .get_range(shard, range.clone())
        .await
        .expect("read");
    assert_eq!(&data[..], &object[range.start as usize..range.end as usize]);
    let ranges: Vec<_> = server.log().into_iter().filter_map(|l| l.range).collect();
    assert_eq!(
        ranges,
        [range.clone(), range.start + 1234..range.end],
        "one retry, for the bytes that were missing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_reads_under_mixed_faults_give_the_batches_of_a_clean_run() {
    let served = served().await;
    let server = &served.server;
    let read = || async {
        let dataset = Dataset::open(URL, &options(server)).await?;
        let config = LoaderConfig {
            plan: PlanConfig {
                seed: 11,
                batch_size: 8,
                shuffle_buffer: 16,
                ..PlanConfig::default()
            },
            decode: DecodeConfig {
                transform: Transform {
                    size: Size::square(32),
                    ..Transform::default()
                },
                decode_threads: 2,
                fetch: fetch_config(),
                ..DecodeConfig::default()
            },
        };
        let mut loader = Loader::builder(dataset).config(config).build().await?;
        let mut batches: Vec<Batch> = Vec::new();
        while let Some(batch) = loader.next().await {
            batches.push(batch?);
        }
        Ok::<_, WorkerError>(batches)
    };
    let clean = read().await.expect("clean read");
    assert_eq!(clean.len(), 6, "48 samples in batches of 8");
    server.fail(&served.shards[0], Fault::ResetAfter(300), 2);
    server.fail(&served.shards[1], Fault::Status(503), 2);
    server.fail(&served.shards[2], Fault::CloseAfter(10), 2);
    server.fail(&served.shards[3], Fault::ShortLength(1), 2);
    server.fail(MANIFEST_NAME, Fault::CloseAfter(20), 1);
    let faulty = read().await.expect("read under faults");
    assert!(faulty == clean, "the same batches, bit for bit");
    assert!(
        server.log().iter().filter(|l| l.fault.is_some()).count() == 9,
        "every fault was injected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_reads_give_up_after_their_budget_naming_object_range_and_attempts() {
    let served = served().await;
    for shard in &served.shards {
        served.server.fail_always(shard, Fault::Status(503));
    }
    let error = samples(&served.server)
        .await
        .expect_err("every shard GET fails");
    let message = error.to_string();
    assert!(
        served
            .shards
            .iter()
            .any(|s| message.contains(&format!("s3://datasets/train/{s} (bytes ")))
            && message.contains("gave up after 5 attempts")
            && message.contains("503"),
        "{message}"
    );
    let gets = shard_gets(&served);
    assert!(
        gets.values().all(|&n| n <= 5),
        "no read is retried past its budget, and object_store adds no hidden retries: {gets:?}"
    );
    assert!(gets.values().any(|&n| n == 5), "{gets:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_fails_after_the_budget_instead_of_hanging() {
    let served = served().await;
    let mut options = options(&served.server);
    options.retry = RetryPolicy {
        attempts: 2,
        stall_timeout: Duration::from_millis(300),
        ..policy()
    };
    let location = Location::open(URL, &options, false).expect("open");
    let shard = &served.shards[0];
    served.server.fail_always(shard, Fault::StallAfter(64));
    let error = location
        .get_range(shard, 0..4096)
        .await
        .expect_err("stalls every time");
    // 64 bytes from each attempt: the second asked for bytes 64..4096.
    assert!(
        matches!(
            error,
            IoError::ReadFailed {
                attempts: 2,
                received: 128,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("no byte arrived for 300ms"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_claimed_content_length_is_never_allocated() {
    let served = served().await;
    let server = &served.server;
    // The manifest is read whole, under a size limit: a claim past it is
    // refused before the body is read.
    server.fail(MANIFEST_NAME, Fault::ClaimLength(1 << 50), 1);
    let error = Dataset::open(URL, &options(server))
        .await
        .expect_err("the manifest claims a petabyte");
    assert!(
        matches!(error, IoError::TooLarge { size, .. } if size == 1 << 50),
        "{error:?}"
    );
    // A whole-object read without a limit grows with the bytes that
    // arrive: the lie surfaces as a short body, then the resumed read asks
    // for a range the server cannot serve (416, a client error: not
    // retried). No allocation of the claim (which would abort the process).
    server.heal();
    let shard = &served.shards[2];
    server.fail_always(shard, Fault::ClaimLength(1 << 50));
    let location = Location::open(URL, &options(server), false).expect("open");
    let error = location
        .get(shard)
        .await
        .expect_err("the object is never as long as claimed");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("s3://datasets/train/{shard}: "))
            && message.contains("416 Range Not Satisfiable"),
        "{message}"
    );
    // Range reads know their length: a lying Content-Length on one changes
    // nothing.
    let object = served.shard(2);
    let data = location
        .get_range(shard, 10..2000)
        .await
        .expect("a range read stops at its range");
    assert_eq!(&data[..], &object[10..2000]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_and_missing_objects_answer_as_s3_does() {
    let served = served().await;
    let server = &served.server;
    let location = Location::open(URL, &options(server), false).expect("open");
    let meta = location
        .store
        .head(&location.path(&served.shards[3]))
        .await
        .expect("head");
    assert_eq!(meta.size, served.shard(3).len() as u64);
    let error = location
        .get_range("absent.tar", 0..10)
        .await
        .expect_err("absent");
    assert!(matches!(error, IoError::NotFound { .. }), "{error:?}");
    let gets = server
        .log()
        .iter()
        .filter(|l| l.path.contains("absent"))
        .count();
    assert_eq!(gets, 1, "not found is not retried");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_error_fails_at_once_and_a_throttle_is_ridden_out() {
    // 400 and 405 say the request is wrong: no retry, the error names the
    // object and the status. (403/404 already fail at once.) Each on a
    // server of its own: a failed read's loader may still have requests in
    // flight when it is dropped, which would count as the next one's.
    for status in [400, 405] {
        let served = served().await;
        let server = &served.server;
        server.fail_always(&served.shards[2], Fault::Status(status));
        let message = samples(server)
            .await
            .expect_err("a client error fails the read")
            .to_string();
        assert!(
            message.contains(&format!("s3://datasets/train/{}", served.shards[2]))
                && message.contains(&status.to_string())
                && !message.contains("gave up"),
            "{message}"
        );
        let gets = shard_gets(&served);
        let sent = gets
            .iter()
            .filter(|((path, _), _)| path.ends_with(&served.shards[2]))
            .map(|(_, n)| *n)
            .max();
        assert_eq!(sent, Some(1), "{status} is not retried: {gets:?}");
    }
    let served = served().await;
    let server = &served.server;
    let clean = samples(server).await.expect("clean read");
    // 429 Too Many Requests and 408 Request Timeout are worth a retry.
    for status in [429, 408] {
        server.heal();
        served.fail_shards(&Fault::Status(status), 2);
        let got = samples(server)
            .await
            .unwrap_or_else(|e| panic!("read through {status}s: {e}"));
        assert!(got == clean, "{status}: different samples or order");
    }
}
