//! A large world's progress and commits are stored in parts of
//! `RANKS_PER_KEY` ranks: each call writes its rank's part alone, and a
//! load merges them (with the one key an earlier coordinator wrote).

use super::finish::two_ranks;
use super::*;
use crate::model::sync::RANKS_PER_KEY;

const WORLD: u32 = RANKS_PER_KEY + 44;

fn ranks(job: &mut Job, kv: &mut Kv) -> Vec<Caller> {
    (0..WORLD)
        .map(|r| {
            let member = MemberId::from(format!("run.0.{r}"));
            let identity = Identity::Torchrun {
                rank: r,
                world: WORLD,
                run_id: "run".into(),
                restart: 0,
                dp: None,
            };
            let (joined, effects) =
                job.join(joiner(identity, member.clone(), ""), "e".repeat(32), now());
            kv.apply(&effects);
            Caller {
                member,
                secret: joined.expect("join").secret,
            }
        })
        .collect()
}

#[test]
fn a_call_writes_its_ranks_part_alone_and_a_load_merges_the_parts() {
    let (job, _) = created(v1::Mode::Sync);
    let mut job = Job::load(
        &job.name,
        job.stored.clone(),
        Dataset::single(vec![WORLD; 2]),
        &[],
    )
    .expect("a job of two shards of WORLD samples");
    let mut kv = Kv::default();
    let callers = ranks(&mut job, &mut kv);
    for (r, caller) in callers.iter().enumerate() {
        let r = r as u32;
        let (_, effects) = job.report(caller, Generation(0), 1, &[]);
        let [Op::Put { key, value, .. }] = effects.ops.as_slice() else {
            panic!("one put: {effects:?}");
        };
        let part = r / RANKS_PER_KEY;
        assert!(key.ends_with(&format!("/sync/progress/{part:06}")), "{key}");
        let stored: BTreeMap<u32, (Generation, u64)> = serde_json::from_slice(value).expect("json");
        assert!(stored.len() as u32 <= RANKS_PER_KEY);
        assert!(
            stored.keys().all(|&k| k / RANKS_PER_KEY == part),
            "{stored:?}"
        );
        kv.apply(&effects);
        let (done, effects) = job.commit(caller, Generation(0), 1).expect("commit");
        let () = done;
        assert!(effects.ops.iter().any(|op| matches!(op, Op::Put { key, .. }
            if key.ends_with(&format!("/sync/commits/{part:06}")))));
        kv.apply(&effects);
    }
    let loaded = Job::load(
        &job.name,
        job.stored.clone(),
        job.dataset.clone(),
        &kv.kvs(),
    )
    .expect("load");
    assert_eq!(loaded.status().mode, job.status().mode);
    assert_eq!(job.status().mode.commit_samples, 1, "every rank committed");
    assert_eq!(loaded.status().mode.progress.len(), WORLD as usize);

    // A rank in a part it is not of is refused, naming the key.
    let key = format!("/tributary/j/sync/commits/{:06}", 0);
    let mut bad: BTreeMap<u32, serde_json::Value> =
        serde_json::from_slice(&kv.0[&key]).expect("json");
    bad.insert(RANKS_PER_KEY, bad[&0].clone());
    kv.0.insert(key.clone(), serde_json::to_vec(&bad).expect("json"));
    let error = Job::load(
        &job.name,
        job.stored.clone(),
        job.dataset.clone(),
        &kv.kvs(),
    )
    .expect_err("a rank out of its part");
    assert!(error.to_string().contains(&key), "{error}");
}

#[test]
fn the_one_key_an_earlier_coordinator_wrote_is_read_under_the_parts() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let callers = two_ranks(&mut job, &mut kv);
    for caller in &callers {
        let (_, effects) = job.report(caller, Generation(0), 3, &[]);
        kv.apply(&effects);
    }
    // As an earlier coordinator kept them: every rank in one key, rank 0
    // behind what its part now says.
    let parts: Vec<String> =
        kv.0.keys()
            .filter(|k| k.contains("/sync/progress/"))
            .cloned()
            .collect();
    assert_eq!(parts.len(), 1);
    let whole: BTreeMap<u32, (Generation, u64)> =
        [(0, (Generation(0), 1)), (1, (Generation(0), 2))].into();
    kv.0.insert(
        "/tributary/j/sync/progress".into(),
        serde_json::to_vec(&whole).expect("json"),
    );
    let loaded = kv.load(&job.name).expect("load");
    assert_eq!(
        loaded.status().mode.progress,
        job.status().mode.progress,
        "the parts win"
    );
    kv.0.remove(&parts[0]);
    let loaded = kv.load(&job.name).expect("load");
    let samples: Vec<u64> = loaded
        .status()
        .mode
        .progress
        .iter()
        .map(|p| p.samples)
        .collect();
    assert_eq!(samples, [1, 2], "the old key alone is read");
}
