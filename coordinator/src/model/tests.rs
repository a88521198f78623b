//! The model's calls, their effects, and loading what they stored.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tributary_common::ids::{Epoch, Generation, JobId, MemberId};
use tributary_common::proto::v1;

use super::*;

fn stored(mode: v1::Mode) -> StoredJob {
    let config = crate::config::job_spec(Some(v1::JobConfig {
        manifest_url: "memory:///ds".into(),
        batch_size: 4,
        epochs: 2,
        mode: mode as i32,
        unit_samples: 8,
        ..v1::JobConfig::default()
    }))
    .expect("config");
    StoredJob {
        config,
        manifest_crc32c: 0,
        manifest_sha256: Some("00".into()),
        source_sha256: Vec::new(),
        samples: 32,
        shards: 2,
    }
}

fn now() -> Instant {
    Instant::now()
}

fn dataset() -> Dataset {
    Dataset::single(vec![16, 16])
}

fn rank(rank: u32) -> Identity {
    Identity::Torchrun {
        rank,
        world: 2,
        run_id: "run".into(),
        restart: 0,
        dp: None,
    }
}

/// The store as a map, with `ops` applied in order.
#[derive(Default)]
struct Kv(BTreeMap<String, Vec<u8>>);

impl Kv {
    fn apply(&mut self, effects: &Effects) {
        for op in &effects.ops {
            match op {
                Op::Put { key, value, .. } => {
                    self.0.insert(key.clone(), value.clone());
                }
                Op::Delete { key } => {
                    self.0.remove(key);
                }
                Op::DeletePrefix { prefix } => self.0.retain(|k, _| !k.starts_with(prefix)),
            }
        }
    }

    fn kvs(&self) -> Vec<KeyValue> {
        self.0
            .iter()
            .map(|(key, value)| KeyValue {
                key: key.clone(),
                value: value.clone(),
                create_revision: 1,
                mod_revision: 1,
                lease: 0,
            })
            .collect()
    }

    fn load(&self, name: &JobId) -> Result<Job> {
        let kvs = self.kvs();
        let stored = Job::stored_of(name, &kvs)?.expect("a stored job");
        Job::load(name, stored, dataset(), &kvs)
    }
}

fn created(mode: v1::Mode) -> (Job, Kv) {
    let (job, effects) = Job::create(JobId::from("j"), stored(mode), dataset()).expect("create");
    let mut kv = Kv::default();
    kv.apply(&effects);
    (job, kv)
}

#[test]
fn a_refused_join_writes_nothing_and_a_rejoin_keeps_the_secret() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let member = MemberId::from("run.0.0");
    let (joined, effects) = job.join(joiner(rank(0), member.clone(), ""), "f".repeat(32), now());
    let joined = joined.expect("join");
    assert_eq!(joined.secret, "f".repeat(32));
    assert_eq!(joined.ttl, job.member_ttl());
    assert!(effects.revoke.is_empty(), "{effects:?}");
    assert_eq!(effects.events, [Event::Generation(Generation(0))]);
    kv.apply(&effects);

    // A name on a sync job, and the member again without its secret: both
    // refused, neither writing anything.
    let name = Identity::Name("n".into());
    let (refused, effects) = job.join(joiner(name, MemberId::from("n"), ""), "f".repeat(32), now());
    assert!(refused.is_err());
    assert_eq!((effects.revoke.len(), effects.ops.len()), (0, 0));
    let (refused, effects) = job.join(
        joiner(rank(0), member.clone(), "wrong"),
        "0".repeat(32),
        now(),
    );
    assert!(matches!(refused, Err(CoordError::AlreadyJoined { .. })));
    assert_eq!((effects.revoke.len(), effects.ops.len()), (0, 0));

    // With its secret the member is replaced, keeping the secret; its
    // record is stored under no lease.
    let (again, effects) = job.join(
        joiner(rank(0), member.clone(), &joined.secret),
        "0".repeat(32),
        now(),
    );
    assert_eq!(again.expect("rejoin").secret, joined.secret);
    assert!(effects.revoke.is_empty(), "{effects:?}");
    kv.apply(&effects);
    assert_eq!(job.member(&member).expect("member").store_lease(), None);
    assert_eq!(kv.load(&job.name).expect("load").members, job.members);
}

#[test]
fn a_dynamic_job_loads_back_what_its_calls_stored() {
    let (mut job, mut kv) = created(v1::Mode::Dynamic);
    let (a, b) = (MemberId::from("a"), MemberId::from("b"));
    let mut callers = Vec::new();
    for member in [&a, &b] {
        let name = Identity::Name(member.to_string());
        let (joined, effects) = job.join(joiner(name, member.clone(), ""), "e".repeat(32), now());
        kv.apply(&effects);
        callers.push(Caller {
            member: member.clone(),
            secret: joined.expect("join").secret,
        });
    }
    let (got, effects) = job.acquire(&callers[0], 2).expect("acquire");
    kv.apply(&effects);
    let Acquired::Units { units, epoch } = got else {
        panic!("no units: {got:?}");
    };
    assert_eq!(epoch, Epoch(0));
    let (got, effects) = job.acquire(&callers[1], 1).expect("acquire");
    kv.apply(&effects);
    assert!(matches!(got, Acquired::Units { .. }), "{got:?}");
    let acked = [UnitRef {
        epoch: Epoch(0),
        unit: units[0].id,
    }];
    let (reported, effects) = job.report(&callers[0], Generation(0), 0, &acked);
    reported.expect("report");
    kv.apply(&effects);

    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(loaded.status(), job.status());
    assert_eq!(loaded.members, job.members);

    // b leaves: its unit returns to the pool, in the store as in memory.
    let (left, effects) = job.leave(&callers[1]).expect("leave");
    let () = left;
    assert!(effects.revoke.is_empty(), "no store lease: {effects:?}");
    assert!(effects.wake);
    assert_eq!(effects.events, [Event::PoolChanged(Epoch(0))]);
    kv.apply(&effects);
    assert_eq!(kv.load(&job.name).expect("load").status(), job.status());
}

#[test]
fn a_sync_job_loads_back_its_generations_and_commit() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let mut callers = Vec::new();
    for r in 0..2 {
        let member = MemberId::from(format!("run.0.{r}"));
        let (joined, effects) =
            job.join(joiner(rank(r), member.clone(), ""), "d".repeat(32), now());
        kv.apply(&effects);
        callers.push(Caller {
            member,
            secret: joined.expect("join").secret,
        });
    }
    let (part, effects) = job.assignment(&callers[1], Epoch(0)).expect("assignment");
    assert_eq!((part.rank, part.world), (1, 2));
    kv.apply(&effects);
    let (reported, effects) = job.report(&callers[1], Generation(0), 3, &[]);
    reported.expect("report");
    kv.apply(&effects);
    let ((), effects) = job.commit(&callers[0], Generation(0), 4).expect("commit");
    kv.apply(&effects);
    // The next epoch opens once both ranks read their parts.
    let refused = job.assignment(&callers[0], Epoch(1));
    assert!(
        matches!(&refused, Err(CoordError::Precondition(m)) if m.contains("rank 0 asked for epoch 1 but has read none")),
        "{refused:?}"
    );
    for caller in &callers {
        let (reported, effects) = job.report(caller, Generation(0), part.spans.len(), &[]);
        reported.expect("report");
        kv.apply(&effects);
    }
    // The next epoch: a new generation, told to the watchers.
    let (next, effects) = job.assignment(&callers[0], Epoch(1)).expect("next epoch");
    assert_eq!(
        effects.events,
        [Event::Generation(Generation(next.generation))]
    );
    kv.apply(&effects);

    let loaded = kv.load(&job.name).expect("load");
    // Progress of the generations before the current one is not kept.
    let mut was = job.status();
    was.mode.progress.clear();
    assert_eq!(loaded.status(), was);
}

#[test]
fn a_stored_key_that_is_no_fact_of_the_job_fails_its_load_naming_the_key() {
    for bad in [
        "/tributary/j/sync/what",
        "/tributary/j/dyn/x/acked/0000000001",
        "/tributary/j/dyn/000000/acked/7",
    ] {
        let (_, mut kv) = created(v1::Mode::Dynamic);
        kv.0.insert(bad.into(), b"\"a\"".to_vec());
        let error = kv.load(&JobId::from("j")).expect_err(bad);
        assert!(matches!(error, CoordError::Corrupt(_)), "{error}");
        assert!(error.to_string().contains(bad), "{error}");
    }
}

#[test]
fn a_stored_unit_the_epoch_does_not_have_fails_the_load_naming_its_key() {
    let (_, mut kv) = created(v1::Mode::Dynamic);
    let key = Key::Acked {
        job: JobId::from("j"),
        epoch: Epoch(0),
        unit: 999,
    }
    .to_string();
    kv.0.insert(key.clone(), b"\"a\"".to_vec());
    let error = kv.load(&JobId::from("j")).expect_err("unknown unit");
    assert!(error.to_string().contains(&key), "{error}");
    // A value that does not read is named too.
    let (_, mut kv) = created(v1::Mode::Dynamic);
    let key = Key::DynEpoch {
        job: JobId::from("j"),
    }
    .to_string();
    kv.0.insert(key.clone(), b"\"three\"".to_vec());
    let error = kv.load(&JobId::from("j")).expect_err("bad epoch");
    assert!(error.to_string().contains(&key), "{error}");
}

fn joiner(identity: Identity, member: MemberId, secret: &str) -> Joiner {
    Joiner {
        identity,
        member,
        secret: secret.to_owned(),
        resume: None,
    }
}

/// Rank 0 of a world of 1 at torchrun restart `restart`.
fn solo(restart: u64) -> (Identity, MemberId) {
    let identity = Identity::Torchrun {
        rank: 0,
        world: 1,
        run_id: "run".into(),
        restart,
        dp: None,
    };
    (identity, MemberId::from(format!("run.{restart}.0")))
}

#[test]
fn generations_of_epochs_behind_the_commit_are_compacted_and_the_job_loads_back() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let mut restart = 0;
    let mut assigned = None;
    for epoch in 0..2u64 {
        for _ in 0..4 {
            let (identity, member) = solo(restart);
            restart += 1;
            let (joined, effects) =
                job.join(joiner(identity, member.clone(), ""), "c".repeat(32), now());
            kv.apply(&effects);
            let joined = joined.expect("join");
            let caller = Caller {
                member,
                secret: joined.secret,
            };
            if joined.epoch < epoch {
                // Resumed into what was left of the epoch before: read it.
                let (rest, effects) = job.assignment(&caller, Epoch(joined.epoch)).expect("rest");
                kv.apply(&effects);
                let generation = Generation(rest.generation);
                let (reported, effects) = job.report(&caller, generation, rest.spans.len(), &[]);
                reported.expect("report");
                kv.apply(&effects);
            }
            let (part, effects) = job.assignment(&caller, Epoch(epoch)).expect("assignment");
            kv.apply(&effects);
            let ((), effects) = job
                .commit(&caller, Generation(part.generation), 1)
                .expect("commit");
            kv.apply(&effects);
            assigned = Some((caller, part));
        }
        let (caller, part) = assigned.as_ref().expect("a restart");
        // Read to its end (a sync rank's next epoch waits for that).
        let (reported, effects) =
            job.report(caller, Generation(part.generation), part.spans.len(), &[]);
        reported.expect("report");
        kv.apply(&effects);
        let (next, effects) = job.assignment(caller, Epoch(epoch + 1)).expect("next");
        kv.apply(&effects);
        assert_eq!(next.finished, epoch == 1);
    }
    // As the leader does after every change: a finished sync job is
    // finished in the store, not only in memory.
    let op = job.mark_finished(42).expect("finished");
    kv.apply(&Effects::ops(vec![op]));
    let State::Sync(model) = &job.state else {
        panic!("a sync job")
    };
    // Epoch 1's chain of 4 restarts stays (it replans the epoch); all of
    // epoch 0 is gone, from memory and from the store.
    assert_eq!(
        model.generations(),
        4,
        "{:?}",
        job.status().mode.generations
    );
    let stored_gens = kv.0.keys().filter(|k| k.contains("/sync/gen/")).count();
    assert_eq!(stored_gens, 4);
    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(loaded.status(), job.status());
    assert!(job.is_finished() && loaded.is_finished());
    // The last generation's plan is the same after the load.
    let (caller, part) = assigned.expect("a restart");
    let mut loaded = loaded;
    let (again, _) = loaded.assignment(&caller, Epoch(1)).expect("assignment");
    assert_eq!(again.spans, part.spans);
}

#[test]
fn a_finished_job_records_when_once_and_a_deleted_one_leaves_no_key() {
    let (mut job, mut kv) = created(v1::Mode::Dynamic);
    let member = MemberId::from("a");
    let (joined, effects) = job.join(
        joiner(Identity::Name("a".into()), member.clone(), ""),
        "b".repeat(32),
        now(),
    );
    kv.apply(&effects);
    let caller = Caller {
        member,
        secret: joined.expect("join").secret,
    };
    assert_eq!(job.mark_finished(5), None, "not finished yet");
    for _ in 0..2 {
        loop {
            let (got, effects) = job.acquire(&caller, 100).expect("acquire");
            kv.apply(&effects);
            match got {
                Acquired::Units { units, .. } => {
                    let acked: Vec<UnitRef> = units
                        .iter()
                        .map(|u| UnitRef {
                            epoch: Epoch(u.epoch),
                            unit: u.id,
                        })
                        .collect();
                    let (reported, effects) = job.report(&caller, Generation(0), 0, &acked);
                    reported.expect("ack");
                    assert_eq!(effects.tally.units_acked, acked.len() as u64);
                    kv.apply(&effects);
                }
                Acquired::Advanced => {}
                Acquired::Finished(_) | Acquired::Empty(_) => break,
            }
        }
    }
    assert!(job.is_finished());
    let op = job.mark_finished(1234).expect("recorded");
    kv.apply(&Effects::ops(vec![op]));
    assert_eq!(job.mark_finished(9999), None, "recorded once");
    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(loaded.finished_at, Some(1234));
    assert_eq!(loaded.summary().finished_at_ms, 1234);

    let effects = job.delete();
    assert!(job.deleted && job.members.is_empty());
    assert!(effects.revoke.is_empty(), "no store lease: {effects:?}");
    kv.apply(&effects);
    assert!(kv.0.is_empty(), "{:?}", kv.0.keys());
}

mod finish;
mod liveness;
mod parts;
mod rates;

/// Rank `r` of 4, in data-parallel group `r / 2` of 2 (TP=2, DP=2).
fn peer(r: u32) -> Identity {
    Identity::Torchrun {
        rank: r,
        world: 4,
        run_id: "run".into(),
        restart: 0,
        dp: Some(tributary_common::identity::DataParallel {
            rank: r / 2,
            size: 2,
        }),
    }
}

#[test]
fn a_grouped_sync_job_answers_each_rank_its_group_and_loads_back() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    for r in 0..4 {
        let member = MemberId::from(format!("run.0.{r}"));
        let (joined, effects) = job.join(joiner(peer(r), member, ""), "e".repeat(32), now());
        let joined = joined.expect("join");
        assert_eq!((joined.rank, joined.world), (r / 2, 2), "rank {r}'s group");
        kv.apply(&effects);
    }
    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(loaded.status(), job.status());
    assert_eq!(
        loaded.members, job.members,
        "the identities keep their groups"
    );
    // A stored generation whose ranks do not split into its groups.
    let key = format!("/tributary/{}/sync/gen/{:020}", job.name.as_str(), 0);
    let value = kv.0.get_mut(&key).expect("generation 0");
    let text = String::from_utf8(value.clone()).expect("json");
    *value = text.replace("\"ranks\":4", "\"ranks\":3").into_bytes();
    let error = kv.load(&job.name).expect_err("3 ranks in 2 groups");
    assert!(matches!(error, CoordError::Corrupt(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("3 ranks in 2 data-parallel groups"),
        "{error}"
    );
}

#[test]
fn a_dynamic_job_refuses_a_data_parallel_member() {
    let (mut job, _) = created(v1::Mode::Dynamic);
    let member = MemberId::from("run.0.1");
    let (refused, effects) = job.join(joiner(peer(1), member, ""), "e".repeat(32), now());
    let error = refused.expect_err("dynamic");
    assert!(
        error
            .to_string()
            .contains("data_parallel=(0, 2) is for sync jobs"),
        "{error}"
    );
    assert_eq!((effects.revoke.len(), effects.ops.len()), (0, 0));
    assert!(job.members.is_empty());
}

#[test]
fn a_join_past_the_member_cap_is_refused_and_a_member_replacing_itself_is_not() {
    let (mut job, _) = created(v1::Mode::Dynamic);
    job.member_cap = 2;
    let name = |n: &str| (Identity::Name(n.into()), MemberId::from(n));
    let mut secrets = Vec::new();
    for n in ["a", "b"] {
        let (identity, member) = name(n);
        let (joined, _) = job.join(joiner(identity, member, ""), "c".repeat(32), now());
        secrets.push(joined.expect("within the cap").secret);
    }
    let (identity, member) = name("c");
    let refused = joiner(identity, member, "");
    let (answer, effects) = job.join(refused, "d".repeat(32), now());
    let error = answer.expect_err("over the cap");
    assert!(matches!(error, CoordError::Exhausted(_)), "{error}");
    assert!(
        error.to_string().contains("--max-members-per-job 2"),
        "{error}"
    );
    assert_eq!((effects.revoke.len(), effects.ops.len()), (0, 0));
    assert_eq!(job.members.len(), 2);
    // "a" joining again with its secret takes no new room.
    let (identity, member) = name("a");
    let (again, _) = job.join(joiner(identity, member, &secrets[0]), "e".repeat(32), now());
    again.expect("a member replacing itself");
}

#[test]
fn a_restart_that_skips_ahead_waits_for_the_live_generation_and_one_step_does_not() {
    let (mut job, _) = created(v1::Mode::Sync);
    let (identity, first) = solo(0);
    let (joined, _) = job.join(joiner(identity, first, ""), "a".repeat(32), now());
    joined.expect("restart 0");
    // Restart 2 (2^40 in the reproduction) while restart 0's member lives:
    // refused as ALREADY_EXISTS, which the client's Join retries.
    let (identity, skipping) = solo(2);
    let (answer, effects) = job.join(joiner(identity, skipping, ""), "b".repeat(32), now());
    let error = answer.expect_err("a skip past a live generation");
    assert!(matches!(error, CoordError::Stranding(_)), "{error}");
    assert_eq!(
        tonic::Status::from(error).code(),
        tonic::Code::AlreadyExists
    );
    assert!(effects.ops.is_empty(), "{effects:?}");
    // One step ahead, as torchrun restarts: joins at once.
    let (identity, next) = solo(1);
    let start = now();
    let (joined, _) = job.join(joiner(identity, next.clone(), ""), "c".repeat(32), start);
    joined.expect("restart 1");
    // Restart 3 waits for restart 1's member; once it expired, it joins.
    let (identity, later) = solo(3);
    let (answer, _) = job.join(
        joiner(identity.clone(), later.clone(), ""),
        "d".repeat(32),
        now(),
    );
    assert!(answer.is_err(), "restart 1's member lives");
    let (gone, _) = job.expire(start + job.member_ttl() + Duration::from_millis(1));
    assert!(gone.contains(&next), "{gone:?}");
    let (answer, _) = job.join(joiner(identity, later, ""), "d".repeat(32), now());
    answer.expect("the live generation is gone");
}
