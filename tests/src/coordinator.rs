//! Helpers for tests and benches that talk to a coordinator directly.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_worker::tools::pack::{pack, PackOptions};
use tributary_worker::tools::progress::NoProgress;
use tributary_worker::{Location, StoreOptions};

/// Connects to the replica at `address` once it leads: it answers NOT_FOUND
/// for an unknown job rather than UNAVAILABLE. Panics after 30 s.
pub async fn leader_client(address: &str) -> CoordinatorClient<Channel> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut client) = CoordinatorClient::connect(format!("http://{address}")).await {
            let probe = client
                .get_status(v1::JobRequest {
                    job: "probe".into(),
                })
                .await;
            if matches!(probe, Err(ref s) if s.code() == tonic::Code::NotFound) {
                return client;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator at {address} never led"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Packs a dataset of `samples` tiny files (not images: a coordinator reads
/// only the manifest) into shards of `per_shard` under `dir`; returns its URL.
pub async fn tiny_dataset(dir: &Path, samples: u32, per_shard: u32) -> String {
    let src = dir.join("src");
    for i in 0..samples {
        let class = src.join(format!("c{}", i % 8));
        std::fs::create_dir_all(&class).expect("mkdir");
        std::fs::write(class.join(format!("{i:08}.jpg")), i.to_le_bytes()).expect("write");
    }
    let url = dir.join("ds").display().to_string();
    let dest = Location::open(&url, &StoreOptions::default(), true).expect("location");
    let options = PackOptions {
        max_samples: per_shard,
        ..PackOptions::default()
    };
    pack(&src, &dest, &options, Arc::new(NoProgress))
        .await
        .expect("pack");
    url
}
