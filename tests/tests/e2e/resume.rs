//! Exactly-once resume for every way a rank comes back: a torchrun restart,
//! a plain re-run, a SLURM-style requeue (same rank and world, a new
//! process), a single process on its own in-process coordinator; and a
//! group whose rank died behind while another went on committing. Real
//! etcd, a real S3-compatible server, rank processes killed with `kill -9`.

use std::collections::BTreeMap;
use std::time::Duration;

use tributary_tests::cluster::{
    self, coordinator, plain_rank, torchrun_rank, torchrun_rank_with, JobArgs,
};
use tributary_tests::dataset::S3Dataset;
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::wait_until;

const WAIT: Duration = Duration::from_secs(120);

/// Every sample id of the dataset, once, sorted.
fn every_sample(data: &S3Dataset) -> Vec<u64> {
    let manifest = &data.manifest;
    let mut ids: Vec<u64> = manifest
        .shards
        .iter()
        .enumerate()
        .flat_map(|(s, shard)| (0..shard.samples).map(move |i| manifest.sample_id(s, i)))
        .collect();
    ids.sort_unstable();
    ids
}

/// The ids `procs` printed in batches, each batch with its generation and
/// the samples its rank had emitted after it.
fn batches(procs: &[&Proc]) -> Vec<(u64, u64, Vec<u64>)> {
    let mut out = Vec::new();
    for proc in procs {
        for line in proc.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts[0] == "batch" {
                let ids = parts[3..]
                    .iter()
                    .map(|id| id.parse().expect("id"))
                    .collect();
                out.push((
                    parts[1].parse().expect("generation"),
                    parts[2].parse().expect("samples"),
                    ids,
                ));
            }
        }
    }
    out
}

/// The ids `procs` delivered up to the group's commit `(generation,
/// samples)`: what the checkpoint trained on.
fn committed(procs: &[&Proc], commit: (u64, u64)) -> Vec<u64> {
    batches(procs)
        .into_iter()
        .filter(|(g, k, _)| (*g, *k) <= commit)
        .flat_map(|(_, _, ids)| ids)
        .collect()
}

/// Every id `procs` delivered, in generations `gens` (all when `None`).
fn all_delivered(procs: &[&Proc], gens: Option<&[u64]>) -> Vec<u64> {
    batches(procs)
        .into_iter()
        .filter(|(g, _, _)| gens.is_none_or(|gens| gens.contains(g)))
        .flat_map(|(_, _, ids)| ids)
        .collect()
}

fn sorted(mut ids: Vec<u64>) -> Vec<u64> {
    ids.sort_unstable();
    ids
}

/// What `first` delivered up to the job's `commit`, and all that `second`
/// (the processes that resumed from it) delivered: every sample of the
/// epoch, each once.
fn assert_exactly_once(data: &S3Dataset, first: &[Proc], commit: (u64, u64), second: &[Proc]) {
    let first: Vec<&Proc> = first.iter().collect();
    let second: Vec<&Proc> = second.iter().collect();
    let mut delivered = committed(&first, commit);
    delivered.extend(all_delivered(&second, None));
    assert_eq!(sorted(delivered), every_sample(data), "exactly once");
}

fn holding(procs: &[Proc], at: u64) -> bool {
    let line = format!("holding {at}");
    procs.iter().all(|p| p.lines().contains(&line))
}

/// The job's commit, as GetStatus reports it.
fn job_commit(address: &str, job: &str) -> Option<(u64, u64)> {
    let status = cluster::status(address, job).expect("status");
    status.commit_generation.map(|g| (g, status.commit_samples))
}

/// A scratch folder for the ranks' saved states.
fn state_dir(data: &S3Dataset) -> String {
    let dir = data.scratch.path("states");
    std::fs::create_dir_all(&dir).expect("the states folder");
    dir
}

/// The state rank `rank` saved when it committed `(generation, samples)`.
fn saved(dir: &str, rank: u32, (generation, samples): (u64, u64)) -> String {
    format!("{dir}/rank-{rank}-{generation}-{samples}.json")
}

/// Flags of a sync job of 2 ranks over 480 samples (240 each): batches of
/// 8, a commit (and a saved state) every 24 samples.
fn flags<'a>(dir: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut flags = vec![
        "--batch-size",
        "8",
        "--commit-every",
        "24",
        "--member-ttl-s",
        "2",
        "--shuffle-buffer",
        "64",
        "--state-dir",
        dir,
    ];
    flags.extend_from_slice(more);
    flags
}

/// The two ranks of a group started again as plain processes (a re-run
/// or a requeue, `run_id` as the launcher names it), both resuming from
/// the state each saved at the job's commit; they read to the end.
fn resume_plain(
    job: &JobArgs<'_>,
    dir: &str,
    run_id: Option<&str>,
    commit: (u64, u64),
) -> Vec<Proc> {
    let mut ranks: Vec<Proc> = (0..2)
        .map(|r| {
            let state = saved(dir, r, commit);
            plain_rank(job, r, 2, run_id, &["--resume", &state])
        })
        .collect();
    for rank in &mut ranks {
        rank.wait_ok(WAIT);
    }
    ranks
}

/// 1a: a plain re-run (`python train.py` again: no restart count) that
/// hands its checkpoint to load_state_dict reads on from it: every sample
/// of the epoch delivered exactly once across the kill and the re-run. A
/// re-run that does not load its checkpoint is refused before its first
/// batch, naming load_state_dict.
#[test]
fn a_restart_without_a_higher_restart_count_resumes_exactly_once_after_a_plain_rerun() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 24);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let dir = state_dir(&data);
    let never = data.scratch.path("never");
    let hold = format!("48:{never}");
    let first_flags = flags(&dir, &["--hold", &hold]);
    let job = JobArgs::new(address.clone(), "rerun", &data, &first_flags);
    let mut first: Vec<Proc> = (0..2).map(|r| plain_rank(&job, r, 2, None, &[])).collect();
    wait_until("both ranks committed 48", WAIT, || holding(&first, 48));
    for rank in &mut first {
        rank.kill();
    }
    let commit = job_commit(&address, "rerun").expect("a commit");
    assert_eq!(commit, (0, 48));

    let job = JobArgs::new(address.clone(), "rerun", &data, &flags(&dir, &[]));
    // Without load_state_dict: refused, not a silent replay.
    let mut careless = plain_rank(&job, 0, 2, None, &[]);
    assert!(!careless.wait_exit(WAIT).success());
    let said = careless.lines().join("\n");
    assert!(said.contains("load_state_dict"), "{said}");
    assert_eq!(careless.count("batch "), 0, "{said}");
    drop(careless);

    let second = resume_plain(&job, &dir, None, commit);
    for rank in &second {
        assert!(
            rank.lines().contains(&"resumed 1 0".to_owned()),
            "{:?}",
            rank.lines()
        );
    }
    assert_exactly_once(&data, &first, commit, &second);
}

/// 1a, 1c: a SLURM-style requeue (same rank and world, same run id, new
/// processes) after the ranks were killed at different points: the job's
/// commit is the point both reached; the rank that went further cannot
/// resume from its own later state (the error names the rank behind), and
/// the requeued group resumes from the common one exactly once.
#[test]
fn a_slurm_style_requeue_resumes_exactly_once_from_the_point_every_rank_committed() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 24);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let dir = state_dir(&data);
    let never = data.scratch.path("never");
    let (hold_72, hold_48) = (format!("72:{never}"), format!("48:{never}"));
    let run = Some("slurm-4242");
    let ahead = flags(&dir, &["--hold", &hold_72]);
    let behind = flags(&dir, &["--hold", &hold_48]);
    let (job_ahead, job_behind) = (
        JobArgs::new(address.clone(), "requeue", &data, &ahead),
        JobArgs::new(address.clone(), "requeue", &data, &behind),
    );
    let mut first = vec![
        plain_rank(&job_ahead, 0, 2, run, &[]),
        plain_rank(&job_behind, 1, 2, run, &[]),
    ];
    wait_until("rank 0 at 72, rank 1 at 48", WAIT, || {
        holding(&first[..1], 72) && holding(&first[1..], 48)
    });
    for rank in &mut first {
        rank.kill();
    }
    let commit = job_commit(&address, "requeue").expect("a commit");
    assert_eq!(commit, (0, 48), "the minimum over the ranks");

    let job = JobArgs::new(address.clone(), "requeue", &data, &flags(&dir, &[]));
    let own = saved(&dir, 0, (0, 72));
    let mut too_far = plain_rank(&job, 0, 2, run, &["--resume", &own]);
    assert!(!too_far.wait_exit(WAIT).success());
    let said = too_far.lines().join("\n");
    assert!(
        said.contains("rank(s) 1 ") && said.contains("commit(state)"),
        "{said}"
    );
    drop(too_far);

    let second = resume_plain(&job, &dir, run, commit);
    assert_exactly_once(&data, &first, commit, &second);
}

/// 1a: a torchrun restart (a higher restart count) whose ranks also load
/// their checkpoint opens one new generation, not two, and reads on
/// exactly once.
#[test]
fn a_torchrun_restart_that_loads_its_checkpoint_resumes_exactly_once() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 24);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let dir = state_dir(&data);
    let never = data.scratch.path("never");
    let hold = format!("48:{never}");
    let first_flags = flags(&dir, &["--hold", &hold]);
    let job = JobArgs::new(address.clone(), "torchrun", &data, &first_flags);
    let mut first: Vec<Proc> = (0..2).map(|r| torchrun_rank(&job, r, 2, 0)).collect();
    wait_until("both ranks committed 48", WAIT, || holding(&first, 48));
    for rank in &mut first {
        rank.kill();
    }
    let commit = job_commit(&address, "torchrun").expect("a commit");
    let job = JobArgs::new(address.clone(), "torchrun", &data, &flags(&dir, &[]));
    let mut second: Vec<Proc> = (0..2)
        .map(|r| {
            let state = saved(&dir, r, commit);
            torchrun_rank_with(&job, r, 2, 1, &["--resume", &state])
        })
        .collect();
    for rank in &mut second {
        rank.wait_ok(WAIT);
    }
    let status = cluster::status(&address, "torchrun").expect("status");
    assert_eq!(status.generations.len(), 2, "one generation per restart");
    assert_exactly_once(&data, &first, commit, &second);
}

/// 1c: rank 1 is killed at 48 while rank 0, no collective holding it, goes
/// on committing to the end of its part, where it waits: the next epoch
/// opens only once every rank read its part. The job's commit stays where
/// rank 1 was; the restarted group reads every sample of every epoch exactly once
/// (what rank 0 read past the group's commit is read again, as its model is
/// restored from the checkpoint at that commit).
#[test]
fn a_commit_while_another_rank_is_dead_and_behind_skips_none_of_its_samples() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 24);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let dir = state_dir(&data);
    let never = data.scratch.path("never");
    let hold = format!("48:{never}");
    let alone = flags(&dir, &["--epochs", "3", "--step-ms", "40"]);
    let held = flags(&dir, &["--epochs", "3", "--hold", &hold]);
    let job_alone = JobArgs::new(address.clone(), "behind", &data, &alone);
    let job_held = JobArgs::new(address.clone(), "behind", &data, &held);
    let mut first = [
        torchrun_rank(&job_alone, 0, 2, 0),
        torchrun_rank(&job_held, 1, 2, 0),
    ];
    wait_until("rank 1 at 48", WAIT, || holding(&first[1..], 48));
    first[1].kill();
    // Rank 0 reads its part to the end, committing on the way, and does
    // not open epoch 1 without rank 1's part read.
    wait_until("rank 0 read its part of epoch 0", WAIT, || {
        first[0].lines().iter().any(|l| l == "end 0 0")
    });
    first[0].kill();
    let lines = first[0].lines();
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("gen ") && l.split(' ').nth(2) == Some("1")),
        "rank 0 opened epoch 1 while rank 1's part was unread: {lines:?}"
    );
    assert_eq!(
        job_commit(&address, "behind"),
        Some((0, 48)),
        "held back by rank 1"
    );

    let job = JobArgs::new(
        address.clone(),
        "behind",
        &data,
        &flags(&dir, &["--epochs", "3"]),
    );
    let mut second: Vec<Proc> = (0..2).map(|r| torchrun_rank(&job, r, 2, 1)).collect();
    for rank in &mut second {
        rank.wait_ok(WAIT);
    }
    // Each generation the restarted ranks read, by epoch, from their `gen
    // GENERATION EPOCH ...` lines (the store compacts old ones away).
    let mut epochs: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for line in second.iter().flat_map(Proc::lines) {
        let parts: Vec<&str> = line.split(' ').collect();
        if parts[0] == "gen" {
            let (g, e) = (
                parts[1].parse().expect("gen"),
                parts[2].parse().expect("epoch"),
            );
            let gens = epochs.entry(e).or_default();
            if !gens.contains(&g) {
                gens.push(g);
            }
        }
    }
    assert_eq!(epochs.len(), 3, "{epochs:?}");
    let first: Vec<&Proc> = first.iter().collect();
    let second: Vec<&Proc> = second.iter().collect();
    for (epoch, gens) in &epochs {
        let mut delivered = all_delivered(&second, Some(gens));
        if *epoch == 0 {
            delivered.extend(committed(&first, (0, 48)));
        }
        assert_eq!(
            sorted(delivered),
            every_sample(&data),
            "epoch {epoch} exactly once"
        );
    }
}

/// 1b: a single-process job on its own in-process coordinator (Python's
/// `coordinator=None`), killed mid-epoch after a commit, resumes from its
/// saved state alone: a fresh coordinator, no store, exactly once.
#[test]
fn a_single_process_job_resumes_mid_epoch_without_a_coordinator_process() {
    let data = S3Dataset::start(480, 24);
    let dir = state_dir(&data);
    let never = data.scratch.path("never");
    let hold = format!("96:{never}");
    let first_flags = flags(&dir, &["--hold", &hold]);
    let job = JobArgs::new("in-process".into(), "solo", &data, &first_flags);
    let mut first = plain_rank(&job, 0, 1, None, &[]);
    wait_until("committed 96", WAIT, || {
        holding(std::slice::from_ref(&first), 96)
    });
    first.kill();
    let job = JobArgs::new("in-process".into(), "solo", &data, &flags(&dir, &[]));
    let state = saved(&dir, 0, (0, 96));
    let mut second = plain_rank(&job, 0, 1, None, &["--resume", &state]);
    second.wait_ok(WAIT);
    let mut delivered = committed(&[&first], (0, 96));
    assert_eq!(delivered.len(), 96);
    delivered.extend(all_delivered(&[&second], None));
    assert_eq!(sorted(delivered), every_sample(&data), "exactly once");
}
