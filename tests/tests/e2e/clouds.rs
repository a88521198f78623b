//! Azure Blob Storage (Azurite) and GCS (gcp-storage-emulator), really
//! exercised, as S3 is in `s3.rs`: `tributary pack` an image folder into
//! the cloud, `tributary index` WebDataset shards uploaded there, `tributary
//! read` both back, then a coordinator job (real etcd, `tributary
//! coordinator`, two rank processes) reads the dataset from the cloud for
//! two epochs. Every process gets its credentials only through the
//! environment variables a user would set for that cloud.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use tributary_common::invariants::check_exactly_once;
use tributary_common::manifest::Manifest;
use tributary_common::plan::epoch_spans;
use tributary_tests::azurite::Azurite;
use tributary_tests::cli::{parse_read, python, tributary, tributary_bin, tributary_ok, Scratch};
use tributary_tests::cluster::{delivered, leader_status, rank_bin};
use tributary_tests::dataset::{sample_ids, shard_counts};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::gcs::GcsServer;
use tributary_tests::process::Proc;
use tributary_tests::{free_port, wait_until};
use tributary_worker::{Location, StoreOptions};

/// An emulated cloud holding the bucket (container) `data`.
enum Cloud {
    Azure(Azurite),
    Gcs(GcsServer),
}

impl Cloud {
    fn azure() -> Self {
        let azurite = Azurite::start();
        azurite.create_container("data");
        Self::Azure(azurite)
    }

    fn gcs() -> Self {
        let gcs = GcsServer::start();
        gcs.create_bucket("data");
        Self::Gcs(gcs)
    }

    /// The URL of `path` in the bucket.
    fn url(&self, path: &str) -> String {
        let scheme = match self {
            Self::Azure(_) => "az",
            Self::Gcs(_) => "gs",
        };
        format!("{scheme}://data/{path}")
    }

    fn env(&self) -> Vec<(&'static str, &str)> {
        match self {
            Self::Azure(azurite) => azurite.env(),
            Self::Gcs(gcs) => gcs.env(),
        }
    }

    fn options(&self) -> StoreOptions {
        match self {
            Self::Azure(azurite) => azurite.options(),
            Self::Gcs(gcs) => gcs.options(),
        }
    }
}

const IMAGES: u64 = 40;
const CLASSES: [&str; 4] = ["class_000", "class_001", "class_002", "class_003"];
const SEED: u64 = 7;
const EPOCHS: u64 = 2;

/// The label `tributary read` gives the sample `key` (`CLASS/NAME`).
fn class_index(key: &str) -> i64 {
    let class = key.split('/').next().expect("class");
    CLASSES
        .iter()
        .position(|c| *c == class)
        .unwrap_or_else(|| panic!("unknown class of {key}")) as i64
}

/// Everything, in one go per cloud (one emulator start).
fn pack_index_read_and_a_job(cloud: &Cloud) {
    let scratch = Scratch::new();
    let images = &scratch.synth("images", IMAGES as usize, CLASSES.len());
    let env = cloud.env();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");

    // Pack into the cloud and, the same way, locally: the packer is
    // deterministic, so the two manifests must match byte for byte, and the
    // cloud's shards must match the checksums in it.
    let train = &cloud.url("train");
    let local = &scratch.path("local");
    let pack = ["--max-samples", "12"];
    let out = tributary_ok(&[&["pack", images, train][..], &pack].concat(), &env);
    assert!(
        out.contains("packed 40 samples of 4 classes into 4 shards"),
        "{out}"
    );
    tributary_ok(&[&["pack", images, local][..], &pack].concat(), &[]);
    let remote = Location::open(train, &cloud.options(), false).expect("open the cloud dataset");
    let manifest_bytes = runtime
        .block_on(remote.get("manifest.json"))
        .expect("read the manifest from the cloud");
    let local_bytes = std::fs::read(format!("{local}/manifest.json")).expect("local manifest");
    assert_eq!(
        manifest_bytes,
        Bytes::from(local_bytes),
        "the manifests differ"
    );
    let manifest = Manifest::from_json(&manifest_bytes).expect("manifest");
    let out = tributary_ok(&["inspect", train], &env);
    assert!(
        out.contains("checksums    ok") && out.contains("4 of 4 shards, 40 of 40 samples"),
        "{out}"
    );
    let rows = parse_read(&tributary_ok(&["read", train], &env));
    assert_eq!(rows, parse_read(&tributary_ok(&["read", local], &[])));
    check_exactly_once(0..IMAGES, rows.iter().map(|r| r.0)).expect("read: exactly once");

    // WebDataset shards written by the `webdataset` library, uploaded, then
    // indexed where they are.
    let wds = &scratch.path("wds");
    assert_eq!(python("make_wds.py", &[images, wds, "16"]).trim(), "40");
    let shards = cloud.url("wds");
    let dest = Location::open(&shards, &cloud.options(), false).expect("open the shards' URL");
    let mut names: Vec<String> = std::fs::read_dir(wds)
        .expect("list the shards")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    for name in &names {
        let data = std::fs::read(format!("{wds}/{name}")).expect("read a shard");
        runtime
            .block_on(dest.put(name, Bytes::from(data)))
            .expect("upload a shard");
    }
    let out = tributary_ok(&["index", &shards], &env);
    assert!(
        out.contains("indexed 3 shards, 40 samples") && out.contains("cls,jpg,json"),
        "{out}"
    );
    let rows = parse_read(&tributary_ok(&["read", &shards, "--batch-size", "7"], &env));
    check_exactly_once(0..IMAGES, rows.iter().map(|r| r.0)).expect("index: exactly once");
    for (_, key, label) in &rows {
        assert_eq!(*label, class_index(key), "{key}");
    }

    multipart_upload_lands_whole(cloud, &runtime);
    two_epoch_job(train, &manifest, &env);
}

/// A multipart upload (what a store client does for large objects) of two
/// parts, the first of the smallest size S3 allows, reads back whole.
fn multipart_upload_lands_whole(cloud: &Cloud, runtime: &tokio::runtime::Runtime) {
    use object_store::{ObjectStoreExt, PutPayload};
    let location = Location::open(&cloud.url("multipart"), &cloud.options(), false)
        .expect("open the multipart URL");
    let path = location.path("object");
    let parts = [vec![1u8; 5 << 20], vec![2u8; 1 << 20]];
    let read = runtime.block_on(async {
        let mut upload = location.store.put_multipart(&path).await?;
        for part in &parts {
            upload.put_part(PutPayload::from(part.clone())).await?;
        }
        upload.complete().await?;
        location.store.get(&path).await?.bytes().await
    });
    let read = read.unwrap_or_else(|e| panic!("multipart upload to {}: {e}", location.url));
    assert!(read == parts.concat(), "the parts came back otherwise");
}

/// A sync job of two ranks over two epochs on `url`, through one
/// coordinator on one etcd member: every sample exactly once an epoch.
///
/// The ranks keep no lockstep of their own (no all-reduce, as DDP has), so
/// a rank could finish the first epoch before the other one has joined it,
/// which the coordinator refuses as it would a stale rank: both hold at the
/// end of the first epoch until both got there.
fn two_epoch_job(url: &str, manifest: &Manifest, env: &[(&str, &str)]) {
    let scratch = Scratch::new();
    let release = scratch.path("release");
    let hold = format!("{}:{release}", IMAGES / 2);
    let etcd = EtcdServer::start();
    let address = format!("127.0.0.1:{}", free_port());
    let mut command = std::process::Command::new(tributary_bin());
    command
        .args([
            "coordinator",
            "--listen",
            &address,
            "--etcd",
            &etcd.endpoint(),
        ])
        .args(["--leader-ttl-s", "2"])
        .envs(env.iter().copied());
    let _coordinator = Proc::spawn(&format!("coordinator {address}"), command);
    let world = 2u32;
    let epochs = EPOCHS.to_string();
    let mut ranks: Vec<Proc> = (0..world)
        .map(|rank| {
            let mut command = std::process::Command::new(rank_bin());
            command
                .args(["--coordinator", &address, "--job", "clouds"])
                .args(["--dataset", url, "--epochs", &epochs])
                .args(["--batch-size", "8", "--shuffle-buffer", "16"])
                .args(["--hold", &hold])
                .envs(env.iter().copied())
                .envs([
                    ("RANK", rank.to_string()),
                    ("WORLD_SIZE", world.to_string()),
                    ("TORCHELASTIC_RUN_ID", "clouds".to_owned()),
                    ("TORCHELASTIC_RESTART_COUNT", "0".to_owned()),
                ]);
            Proc::spawn(&format!("rank {rank}/{world}"), command)
        })
        .collect();
    let holding = format!("holding {}", IMAGES / 2);
    wait_until(
        "both ranks at the end of the first epoch",
        Duration::from_secs(120),
        || ranks.iter().all(|rank| rank.lines().contains(&holding)),
    );
    std::fs::write(&release, "").expect("release the ranks");
    for rank in &mut ranks {
        rank.wait_ok(Duration::from_secs(120));
    }
    // "batch GENERATION SAMPLES IDS...": one generation per epoch here.
    let mut delivered = delivered(&ranks);
    let status = leader_status(std::slice::from_ref(&address), "clouds").expect("status");
    assert_eq!(status.generations.len() as u64, EPOCHS, "{status:?}");
    let counts = shard_counts(manifest);
    let mut epochs_seen = BTreeSet::new();
    for generation in &status.generations {
        epochs_seen.insert(generation.epoch);
        let all = sample_ids(manifest, &epoch_spans(&counts, SEED, generation.epoch));
        assert_eq!(all.len() as u64, IMAGES);
        let ids = delivered.remove(&generation.generation).unwrap_or_default();
        check_exactly_once(all, ids).unwrap_or_else(|e| panic!("epoch {}: {e}", generation.epoch));
    }
    assert_eq!(epochs_seen, (0..EPOCHS).collect(), "{status:?}");
    assert!(
        delivered.is_empty(),
        "batches of no generation: {delivered:?}"
    );
}

#[test]
fn azure_pack_index_read_and_a_two_epoch_job_through_azurite() {
    let cloud = Cloud::azure();
    pack_index_read_and_a_job(&cloud);

    // Azurite's own variables (as its docs give them) reach it too.
    let Cloud::Azure(azurite) = &cloud else {
        unreachable!()
    };
    let blob_url = azurite.endpoint.trim_end_matches("/tributary");
    let emulator = [
        ("AZURE_STORAGE_USE_EMULATOR", "true"),
        ("AZURITE_BLOB_STORAGE_URL", blob_url),
        (
            "AZURE_STORAGE_ACCOUNT_NAME",
            tributary_tests::azurite::ACCOUNT,
        ),
        ("AZURE_STORAGE_ACCOUNT_KEY", tributary_tests::azurite::KEY),
    ];
    let out = tributary_ok(&["inspect", &cloud.url("train")], &emulator);
    assert!(out.contains("checksums    ok"), "{out}");
}

#[test]
fn gcs_pack_index_read_and_a_two_epoch_job_through_the_emulator() {
    pack_index_read_and_a_job(&Cloud::gcs());
}

/// The stderr of a `tributary` run that must fail.
fn failure(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = tributary(args, env);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "tributary {args:?} succeeded:\n{stderr}"
    );
    stderr
}

#[test]
fn a_wrong_azure_key_is_refused_naming_the_url() {
    let scratch = Scratch::new();
    let images = &scratch.synth("images", 4, 2);
    let azurite = Azurite::start();
    azurite.create_container("data");
    // Another key of the same length: the signature is wrong, nothing else.
    let wrong = azurite.env_with_key("d3JvbmctYXp1cml0ZS10ZXN0LWtleS0wMTIzNDU2Nzg5MA==");
    // The packer's first request (is there a dataset here already?) fails.
    let stderr = failure(&["pack", images, "az://data/ds"], &wrong);
    assert!(
        stderr.contains("az://data/ds/manifest.json") && stderr.contains("403"),
        "{stderr}"
    );
    tributary_ok(&["pack", images, "az://data/ds"], &azurite.env());
    let stderr = failure(&["read", "az://data/ds"], &wrong);
    assert!(
        stderr.contains("az://data/ds/manifest.json") && stderr.contains("403"),
        "{stderr}"
    );
    assert_eq!(
        parse_read(&tributary_ok(&["read", "az://data/ds"], &azurite.env())).len(),
        4
    );
}

#[test]
fn gcs_errors_name_the_url_and_the_credentials_file() {
    let gcs = GcsServer::start();
    gcs.create_bucket("data");
    let stderr = failure(&["read", "gs://nothing/ds"], &gcs.env());
    assert!(
        stderr.contains("gs://nothing/ds/manifest.json") && stderr.contains("not found"),
        "{stderr}"
    );
    let missing = "/nonexistent/service-account.json";
    let stderr = failure(
        &["read", "gs://data/ds"],
        &[
            ("GOOGLE_SERVICE_ACCOUNT", missing),
            ("GOOGLE_ALLOW_HTTP", "true"),
        ],
    );
    assert!(
        stderr.contains("gs://data/ds") && stderr.contains(missing),
        "{stderr}"
    );
}
