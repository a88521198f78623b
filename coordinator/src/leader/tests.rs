//! Changes hold no lock across their writes; one job's slow load holds up
//! no other job.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tributary_common::ids::{Generation, JobId, MemberId};
use tributary_common::proto::v1;

use super::*;
use crate::datasets::Manifests;
use crate::keys::Key;
use crate::limits::Limits;
use crate::model::{Caller, Dataset, Identity, StoredJob};
use crate::server::ServerConfig;
use crate::store::{Compare, MemoryStore, StoreResult, TxnOutcome, WatchEvent};

/// A memory store whose transactions wait while the gate is shut.
#[derive(Debug)]
struct Gated {
    store: MemoryStore,
    gate: Semaphore,
    shut: AtomicBool,
    waiting: AtomicU64,
}

#[async_trait]
impl MetaStore for Gated {
    async fn get(&self, key: &str) -> StoreResult<Option<KeyValue>> {
        self.store.get(key).await
    }
    async fn range(&self, prefix: &str) -> StoreResult<(Vec<KeyValue>, i64)> {
        self.store.range(prefix).await
    }
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> StoreResult<i64> {
        self.store.put(key, value, lease).await
    }
    async fn txn(
        &self,
        compares: Vec<Compare>,
        ops: Vec<crate::store::Op>,
    ) -> StoreResult<TxnOutcome> {
        if self.shut.load(Ordering::SeqCst) {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let _pass = self.gate.acquire().await.expect("gate");
        }
        self.store.txn(compares, ops).await
    }
    async fn grant(&self, ttl: Duration) -> StoreResult<LeaseId> {
        self.store.grant(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> StoreResult<Duration> {
        self.store.keep_alive(lease).await
    }
    async fn revoke(&self, lease: LeaseId) -> StoreResult<()> {
        self.store.revoke(lease).await
    }
    async fn watch(
        &self,
        prefix: &str,
        from_revision: i64,
    ) -> StoreResult<BoxStream<'static, StoreResult<WatchEvent>>> {
        self.store.watch(prefix, from_revision).await
    }
}

fn stored() -> StoredJob {
    let config = crate::config::job_spec(Some(v1::JobConfig {
        manifest_url: "memory:///ds".into(),
        batch_size: 4,
        epochs: 1,
        mode: v1::Mode::Sync as i32,
        ..v1::JobConfig::default()
    }))
    .expect("config");
    StoredJob {
        config,
        manifest_crc32c: 0,
        manifest_sha256: None,
        source_sha256: Vec::new(),
        samples: 32,
        shards: 1,
    }
}

/// A leader on a [`Gated`] store with one sync job, `j`, which rank 0 of
/// a world of 1 joined: the store, the leader, the job and the rank.
async fn joined() -> (Arc<Gated>, Arc<Leader>, Arc<JobHandle>, Caller) {
    let store = Arc::new(Gated {
        store: MemoryStore::new(),
        gate: Semaphore::new(0),
        shut: AtomicBool::new(false),
        waiting: AtomicU64::new(0),
    });
    let interval = Duration::from_millis(1);
    let leader = Leader::load(
        Arc::clone(&store) as Arc<dyn MetaStore>,
        leadership(),
        ServerConfig {
            flush_interval: interval,
            ..ServerConfig::new("here")
        }
        .leader(),
    )
    .await
    .expect("leader");
    let dataset = Dataset::single(vec![32]);
    let (job, effects) = Job::create(JobId::from("j"), stored(), dataset).expect("create");
    let handle = leader.start_job(job, 1);
    leader
        .change(&handle, |_| (Ok(()), effects))
        .await
        .expect("created");
    let identity = Identity::Torchrun {
        rank: 0,
        world: 1,
        run_id: "run".into(),
        restart: 0,
        dp: None,
    };
    let member = MemberId::from("run.0.0");
    let secret = "a".repeat(32);
    let join = |job: &mut Job| {
        job.join(
            joiner(identity, member.clone(), ""),
            secret.clone(),
            std::time::Instant::now(),
        )
    };
    leader.change(&handle, join).await.expect("join");

    (store, leader, handle, Caller { member, secret })
}

/// Waits until the gated store holds a transaction back.
async fn until_held(store: &Gated) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.waiting.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "no write reached the store");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    store.waiting.store(0, Ordering::SeqCst);
}

#[tokio::test]
async fn a_write_in_flight_holds_no_lock_of_its_job() {
    let (store, leader, handle, caller) = joined().await;
    store.shut.store(true, Ordering::SeqCst);
    let commit = tokio::spawn({
        let (leader, handle) = (Arc::clone(&leader), Arc::clone(&handle));
        async move {
            let commit =
                |job: &mut Job| crate::model::outcome(job.commit(&caller, Generation(0), 8));
            leader.change(&handle, commit).await
        }
    });
    until_held(&store).await;
    // The write is in the store's hands: the job and the jobs map are free.
    assert!(
        handle.job.try_lock().is_ok(),
        "the job's lock is held across its write"
    );
    assert!(leader.jobs.try_lock().is_ok());
    assert!(!commit.is_finished());
    store.gate.add_permits(1);
    commit.await.expect("task").expect("commit");
    let status = handle.job.lock().await.status();
    assert_eq!(
        (status.mode.commit_generation, status.mode.commit_samples),
        (Some(0), 8)
    );
}

/// A call whose client goes away while its write waits (tonic drops the
/// handler) still has its whole change applied once the write lands: the
/// commit is counted, the departed member's record deleted.
#[tokio::test]
async fn a_change_whose_caller_went_away_is_still_applied_whole() {
    let (store, leader, handle, caller) = joined().await;
    let key = Key::Member {
        job: JobId::from("j"),
        member: caller.member.clone(),
    }
    .to_string();
    assert!(store.get(&key).await.expect("get").is_some());
    store.shut.store(true, Ordering::SeqCst);
    let call = |change: fn(&mut Job, &Caller) -> Outcome<()>| {
        let (leader, handle, caller) = (Arc::clone(&leader), Arc::clone(&handle), caller.clone());
        tokio::spawn(async move { leader.change(&handle, |job| change(job, &caller)).await })
    };
    let commit = call(|job, caller| crate::model::outcome(job.commit(caller, Generation(0), 8)));
    until_held(&store).await;
    commit.abort();
    assert!(commit.await.expect_err("aborted").is_cancelled());
    store.gate.add_permits(1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while leader.metrics.commits.get() == 0 {
        assert!(Instant::now() < deadline, "the commit was never counted");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let leave = call(|job, caller| crate::model::outcome(job.leave(caller)));
    until_held(&store).await;
    leave.abort();
    store.gate.add_permits(1);
    while store.get(&key).await.expect("get").is_some() {
        assert!(
            Instant::now() < deadline,
            "the member's record was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A local dataset of two shards of 8 samples: its manifest, which is all
/// the coordinator reads of a dataset.
fn manifest_only_dataset(dir: &std::path::Path) -> String {
    use tributary_common::format::shard::ShardWriter;
    use tributary_common::manifest::{Compression, CompressionKind, Manifest, MANIFEST_NAME};
    let shards = (0..2)
        .map(|s| {
            let mut writer = ShardWriter::new(format!("shard-{s:06}.tar"), Compression::NONE);
            for i in 0..8 {
                writer
                    .push(&format!("c/{s}-{i}"), &[("cls", b"0")])
                    .expect("push");
            }
            writer.finish().expect("finish").meta
        })
        .collect();
    let manifest = Manifest::new(
        CompressionKind::None,
        vec!["cls".into()],
        vec!["c".into()],
        shards,
    )
    .expect("manifest");
    std::fs::write(dir.join(MANIFEST_NAME), manifest.to_json()).expect("write the manifest");
    dir.display().to_string()
}

fn leadership() -> Leadership {
    Leadership {
        key: keys::ELECTION.into(),
        revision: 0,
        lost: watch::channel(false).1,
        _guard: None,
    }
}

#[tokio::test]
async fn a_job_whose_manifest_hangs_never_holds_up_another() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let good_url = manifest_only_dataset(scratch.path());
    let good = JobId::from("good");
    let slow = JobId::from("slow");
    // An S3 endpoint that accepts connections and never answers.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut options: StoreOptions = Default::default();
    for (key, value) in [
        (
            "aws_endpoint",
            format!("http://{}", hung.local_addr().expect("addr")),
        ),
        ("aws_allow_http", "true".into()),
        ("aws_access_key_id", "test".into()),
        ("aws_secret_access_key", "test".into()),
        ("aws_region", "us-east-1".into()),
    ] {
        options.set(key, value);
    }
    let mut config = stored().config;
    config.manifest_url = good_url.clone();
    let opened = Manifests::new(options.clone(), Limits::default())
        .open(&good, &config)
        .await
        .expect("good manifest");
    let store = MemoryStore::new();
    for (job, url) in [(&good, good_url.as_str()), (&slow, "s3://bucket/ds")] {
        let mut stored = stored();
        stored.config.manifest_url = url.into();
        stored.manifest_sha256 = Some(opened.sha256.clone());
        let key = Key::Config { job: job.clone() }.to_string();
        let value = serde_json::to_vec(&stored).expect("json");
        store.put(&key, value, None).await.expect("put");
    }
    let started = Instant::now();
    let leader = Leader::load(
        Arc::new(store),
        leadership(),
        ServerConfig {
            store_options: options,
            flush_interval: Duration::from_millis(1),
            ..ServerConfig::new("here")
        }
        .leader(),
    )
    .await
    .expect("leader");
    let handle = tokio::time::timeout(Duration::from_secs(10), leader.job(&good))
        .await
        .expect("the good job waits for the slow one")
        .expect("the good job loads");
    assert_eq!(handle.job.lock().await.name, good);
    assert!(
        matches!(leader.jobs.lock().await.get(&slow), Some(Slot::Loading(_))),
        "the slow job's manifest read ended within {:?}",
        started.elapsed()
    );
}

fn joiner(identity: Identity, member: MemberId, secret: &str) -> crate::model::Joiner {
    crate::model::Joiner {
        identity,
        member,
        secret: secret.to_owned(),
        resume: None,
    }
}

/// A member an earlier coordinator put under a store lease of its own is
/// forgotten when the store deletes its record (the lease ran out); a
/// member of this coordinator, under no lease, is the leader's to expire.
#[tokio::test]
async fn a_member_under_an_earlier_coordinators_lease_goes_with_it() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let url = manifest_only_dataset(scratch.path());
    let job = JobId::from("old");
    let mut stored = stored();
    stored.config.manifest_url = url;
    let opened = Manifests::new(StoreOptions::default(), Limits::default())
        .open(&job, &stored.config)
        .await
        .expect("manifest");
    stored.manifest_sha256 = Some(opened.sha256.clone());
    let store = MemoryStore::new();
    let config_key = Key::Config { job: job.clone() }.to_string();
    let value = serde_json::to_vec(&stored).expect("json");
    store.put(&config_key, value, None).await.expect("config");
    let lease = store.grant(Duration::from_secs(60)).await.expect("lease");
    for (rank, lease) in [(0u32, lease), (1, 0)] {
        let record = crate::model::MemberRecord {
            identity: Identity::Torchrun {
                rank,
                world: 2,
                run_id: "run".into(),
                restart: 0,
                dp: None,
            },
            lease,
            secret_sha256: crate::auth::secret_digest(&"s".repeat(32)),
        };
        let key = Key::Member {
            job: job.clone(),
            member: MemberId::from(format!("run.0.{rank}")),
        };
        let value = serde_json::to_vec(&record).expect("json");
        let under = (lease != 0).then_some(lease);
        store
            .put(&key.to_string(), value, under)
            .await
            .expect("member");
    }
    let leader = Leader::load(
        Arc::new(store.clone()),
        leadership(),
        ServerConfig::new("here").leader(),
    )
    .await
    .expect("leader");
    let handle = leader.job(&job).await.expect("the job loads");
    assert_eq!(handle.job.lock().await.members.len(), 2);
    store.revoke(lease).await.expect("revoke");
    let deadline = Instant::now() + Duration::from_secs(10);
    while handle.job.lock().await.members.len() == 2 {
        assert!(
            Instant::now() < deadline,
            "the leased member was never forgotten"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let members: Vec<MemberId> = handle.job.lock().await.members.keys().cloned().collect();
    assert_eq!(
        members,
        [MemberId::from("run.0.1")],
        "the member under no lease stays"
    );
}
