//! A rank's metrics over whole passes: what `Rank::metrics` says once the
//! pipeline is idle, and what `/metrics` serves with the job and the rank.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tributary_tests::dataset::{small_loader_config, tiny_dataset};
use tributary_worker::coordinated::Identity;
use tributary_worker::rank::{Coordinator, JobSpec, Rank, RankConfig};
use tributary_worker::{DecodeConfig, WorkerError};

async fn scrape(address: SocketAddr) -> String {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let request = "GET /metrics HTTP/1.1\r\nHost: rank\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

/// The value of the series `name{job="eval",rank="2"}`.
fn value(text: &str, name: &str) -> f64 {
    let prefix = format!("{name}{{job=\"eval\",rank=\"2\"}} ");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}in:\n{text}"));
    line.parse().expect("a number")
}

/// Rank 2 of 3 reading its unshuffled part (no coordinator needed), labels
/// only (the tiny dataset's files are not images), serving its metrics.
async fn rank(url: String, listen: &str) -> Result<Rank, WorkerError> {
    let identity = Identity::Torchrun {
        rank: 2,
        world: 3,
        run_id: "r".into(),
        restart: 0,
        dp: None,
    };
    let spec = JobSpec {
        batch_size: 8,
        ..JobSpec::new(url)
    };
    let mut config = RankConfig::new(spec, Coordinator::Shared(Vec::new()), "eval", identity);
    config.shuffle = false;
    config.decode = DecodeConfig {
        fields: "cls".parse().expect("fields"),
        ..small_loader_config().decode
    };
    config.metrics_listen = Some(listen.into());
    Rank::start(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_pass_nothing_is_in_flight_and_every_read_is_timed_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = tiny_dataset(dir.path(), 90, 16).await;
    let mut rank = rank(url, "127.0.0.1:0").await.expect("start");
    let address = rank.metrics_address().expect("serving");
    assert_ne!(address.port(), 0, "port 0 asks for a free one");
    let mut delivered = 0;
    while let Some(batch) = rank.next().await {
        delivered += batch.expect("batch").len() as u64;
    }
    assert_eq!(delivered, 30, "a third of 90 samples");
    let m = rank.metrics();
    assert_eq!((m.samples, m.batches), (delivered, 4));
    assert_eq!(m.fetches_in_flight, 0, "{m:?}");
    assert!(m.fetch_requests > 0, "{m:?}");
    assert_eq!(m.fetch_latency.count, m.fetch_requests, "{m:?}");
    assert_eq!(m.parsed_samples, delivered);
    assert_eq!(m.decoded_samples, delivered);
    // The consumer waited for its first batch at least, and never more
    // than it was consuming.
    assert!(m.data_wait > 0.0 && m.data_wait <= 1.0, "{m:?}");
    assert!(m.consumer_wait > std::time::Duration::ZERO);

    let text = scrape(address).await;
    assert_eq!(value(&text, "tributary_rank_samples_total"), 30.0);
    assert_eq!(value(&text, "tributary_rank_batches_total"), 4.0);
    assert_eq!(value(&text, "tributary_rank_fetch_requests_in_flight"), 0.0);
    assert_eq!(
        value(&text, "tributary_rank_fetch_duration_seconds_count"),
        m.fetch_requests as f64
    );
    assert_eq!(
        value(&text, "tributary_rank_fetched_bytes_total"),
        m.fetched_bytes as f64
    );
    let ratio = value(&text, "tributary_rank_data_wait_ratio");
    assert!(ratio > 0.0 && ratio <= 1.0, "{ratio}");

    // The next pass counts on: the metrics cover the rank's life.
    assert!(rank.next_epoch().await.expect("next pass"));
    while let Some(batch) = rank.next().await {
        batch.expect("batch");
    }
    let m = rank.metrics();
    assert_eq!((m.samples, m.fetches_in_flight), (2 * delivered, 0));
    assert_eq!(m.fetch_latency.count, m.fetch_requests);
    assert_eq!(
        value(&scrape(address).await, "tributary_rank_samples_total"),
        60.0
    );
}

#[tokio::test]
async fn a_metrics_address_in_use_fails_the_start_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = tiny_dataset(dir.path(), 9, 16).await;
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = taken.local_addr().expect("address").to_string();
    let error = rank(url, &address).await.expect_err("in use");
    assert!(matches!(error, WorkerError::Listen { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&format!("cannot serve metrics on {address}")),
        "{error}"
    );
}
