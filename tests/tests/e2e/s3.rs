//! Pack, inspect and read through a real S3-compatible HTTP server, and
//! compare with the same dataset on the local file system.

use tributary_worker::{
    Batch, Dataset, DecodeConfig, Loader, LoaderConfig, PlanConfig, StoreOptions,
};
use tributary_worker::{Size, Transform};

use tributary_tests::cli::{tributary, tributary_ok, Scratch};
use tributary_tests::s3::{S3Server, S3_ENV};

async fn read_all(url: &str, options: &StoreOptions) -> (Dataset, Vec<Batch>) {
    let dataset = Dataset::open(url, options).await.expect("open dataset");
    let mut batches = Vec::new();
    for rank in 0..2 {
        let config = LoaderConfig {
            plan: PlanConfig {
                seed: 3,
                rank,
                world: 2,
                batch_size: 8,
                shuffle_buffer: 32,
                ..PlanConfig::default()
            },
            decode: DecodeConfig {
                transform: Transform {
                    size: Size::square(48),
                    ..Transform::default()
                },
                ..DecodeConfig::default()
            },
        };
        let mut loader = Loader::builder(dataset.clone())
            .config(config)
            .build()
            .await
            .expect("build loader");
        while let Some(batch) = loader.next().await {
            batches.push(batch.expect("batch"));
        }
    }
    (dataset, batches)
}

#[test]
fn pack_inspect_and_read_through_s3_match_the_local_copy() {
    let scratch = Scratch::new();
    let images = &scratch.synth("images", 40, 4);
    let local = &scratch.path("local");

    let server = S3Server::start();
    server.create_bucket("datasets");
    let pack_args = ["--max-samples", "12", "--compression", "zstd:5"];
    let out = tributary_ok(
        &[
            &[
                "pack",
                images,
                "s3://datasets/train",
                "--s3-endpoint",
                &server.endpoint,
            ][..],
            &pack_args,
        ]
        .concat(),
        &S3_ENV,
    );
    assert!(
        out.contains("packed 40 samples of 4 classes into 4 shards"),
        "{out}"
    );
    tributary_ok(&[&["pack", images, local][..], &pack_args].concat(), &[]);

    let out = tributary_ok(&["inspect", "s3://datasets/train"], &server.env());
    assert!(
        out.contains("checksums    ok") && out.contains("4 of 4 shards, 40 of 40 samples"),
        "{out}"
    );

    let missing = tributary(&["read", "s3://datasets/nothing-here"], &server.env());
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("s3://datasets/nothing-here/manifest.json") && stderr.contains("not found"),
        "{stderr}"
    );

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (remote, remote_batches) =
        runtime.block_on(read_all("s3://datasets/train", &server.options()));
    let (local, local_batches) = runtime.block_on(read_all(local, &StoreOptions::default()));
    assert_eq!(
        remote.manifest, local.manifest,
        "the packer is deterministic"
    );
    assert_eq!(
        remote_batches.len(),
        6,
        "2 ranks x 20 samples in batches of 8"
    );
    assert_eq!(
        remote_batches, local_batches,
        "S3 and local reads give the same batches bit for bit"
    );
    let ids = remote_batches.iter().flat_map(|b| b.ids.iter().copied());
    tributary_common::invariants::check_exactly_once(0..40, ids).expect("exactly once");
}
