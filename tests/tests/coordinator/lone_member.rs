//! A dynamic member's wait for the pool is not a call timing out: a lone
//! member whose coordinator calls time out sooner than an `Acquire` waits
//! (at an epoch's end it waits out its own leased units) reads every epoch.
//! A real loader against an in-process coordinator over loopback gRPC.

use std::sync::Arc;
use std::time::Duration;

use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_tests::dataset::{packed_images, small_loader_config};
use tributary_worker::coordinated::{
    create_job, Client, DynamicLoader, DynamicOptions, Identity, Session,
};
use tributary_worker::{Dataset, StoreOptions};

const IMAGES: usize = 32;
const EPOCHS: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_dynamic_member_with_a_short_timeout_reads_every_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = packed_images(dir.path(), IMAGES, 16, 5).await;
    let dataset = Dataset::open(&url, &StoreOptions::default())
        .await
        .expect("dataset");
    let coordinator = LocalCoordinator::start(StoreOptions::default())
        .await
        .expect("start");
    // `timeout_s` of 2 s: shorter than an Acquire's 5 s wait for the pool.
    let client = Arc::new(
        Client::new(&[coordinator.address().to_owned()])
            .expect("client")
            .with_deadline(Duration::from_secs(2)),
    );
    let config = v1::JobConfig {
        manifest_url: url,
        batch_size: 4,
        epochs: EPOCHS,
        mode: v1::Mode::Dynamic as i32,
        shuffle_buffer: 8,
        unit_samples: 8,
        ..v1::JobConfig::default()
    };
    create_job(&client, "lone", config).await.expect("create");
    let session = Arc::new(
        Session::join(Arc::clone(&client), "lone", &Identity::Name("a".into()))
            .await
            .expect("join"),
    );
    let mut loader = DynamicLoader::start(
        Arc::clone(&session),
        dataset,
        small_loader_config().decode,
        DynamicOptions::default(),
    )
    .await
    .expect("start");
    let mut per_epoch = Vec::new();
    loop {
        let mut samples = 0;
        while let Some(batch) = loader.next().await {
            samples += batch.expect("a batch within the timeout").len();
        }
        per_epoch.push(samples);
        if !loader.next_epoch().await.expect("the next epoch") {
            break;
        }
    }
    assert_eq!(
        per_epoch,
        vec![IMAGES; EPOCHS as usize],
        "every sample of every epoch"
    );
    coordinator.stop().await.expect("stop");
}
