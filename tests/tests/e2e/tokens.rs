//! Token jobs end to end: a token dataset in a real S3-compatible server,
//! a coordinator on real etcd, rank processes killed with `kill -9`. Every
//! row (a window of `L + 1` tokens) a rank delivers is checked against a
//! replay computed from the documents with the pure layout, and the rows
//! delivered across a kill and a restart with another world size are the
//! epoch's, each once: no token trained twice, none skipped beyond the
//! stated remainder (fewer rows than the last world size).

#![allow(
    clippy::print_stdout,
    reason = "the figures a run measured, for the closing note"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tributary_common::tokens::{Packing, SequenceSpec};
use tributary_tests::cluster::JobArgs;
use tributary_tests::cluster::{
    self, coordinator, named_member, torchrun_rank, torchrun_rank_with,
};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::tokens::S3Tokens;
use tributary_tests::wait_until;

const WAIT: Duration = Duration::from_secs(120);
const SEED: u64 = 7;
const LENGTH: u32 = 32;

fn job<'a>(address: &str, name: &'a str, data: &'a S3Tokens, flags: &[&str]) -> JobArgs<'a> {
    let mut extra = vec!["--sequence-length".to_owned(), LENGTH.to_string()];
    extra.extend(flags.iter().map(|f| (*f).to_owned()));
    JobArgs {
        coordinators: address.to_owned(),
        job: name,
        dataset: &data.url,
        s3_endpoint: data.endpoint(),
        extra,
    }
}

/// Each delivered batch of `procs`: (generation, rows emitted after it,
/// row ids, their CRCs), from the rank binary's `batch` and `rows` lines.
fn batches(procs: &[&Proc]) -> Vec<(u64, u64, Vec<u64>, Vec<String>)> {
    let mut out = Vec::new();
    for proc in procs {
        let lines = proc.lines();
        for pair in lines.windows(2) {
            let Some(batch) = pair[0].strip_prefix("batch ") else {
                continue;
            };
            // A rank killed between the two lines printed no CRCs.
            let Some(crcs) = pair[1].strip_prefix("rows ") else {
                continue;
            };
            let crcs = crcs.split(' ').map(str::to_owned).collect();
            let parts: Vec<u64> = batch
                .split(' ')
                .map(|p| p.parse().expect("a number"))
                .collect();
            out.push((parts[0], parts[1], parts[2..].to_vec(), crcs));
        }
    }
    out
}

/// Checks every (row, CRC) against the replay; returns the row ids.
fn checked(
    rows: impl IntoIterator<Item = (u64, String)>,
    replay: &BTreeMap<u64, String>,
) -> Vec<u64> {
    rows.into_iter()
        .map(|(id, crc)| {
            assert_eq!(
                replay.get(&id),
                Some(&crc),
                "row {id} holds other tokens than the replay"
            );
            id
        })
        .collect()
}

fn holding(procs: &[Proc], at: u64) -> bool {
    let line = format!("holding {at}");
    procs.iter().all(|p| p.lines().contains(&line))
}

/// A sync token job of 3 ranks is killed (`kill -9`, rank 1 first) after
/// all committed 48 rows; torchrun restarts it with 2 ranks, each loading
/// its checkpoint. The rows trained up to the commit and all rows after
/// the restart are the epoch's, each exactly once, each holding the
/// tokens the replay says; what is left out is the last generation's
/// remainder (fewer than 2 rows).
#[test]
fn a_token_job_resized_after_a_kill_trains_every_window_of_the_epoch_once() {
    let etcd = EtcdServer::start();
    let data = S3Tokens::start(4, 150);
    let sequence = SequenceSpec {
        length: LENGTH,
        packing: Packing::Concat,
    };
    let replay = data.replay(sequence, SEED, 0);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let dir = data.scratch.path("states");
    std::fs::create_dir_all(&dir).expect("states dir");
    let never = data.scratch.path("never");
    let hold = format!("48:{never}");
    let common = [
        "--batch-size",
        "8",
        "--commit-every",
        "24",
        "--member-ttl-s",
        "2",
        "--shuffle-buffer",
        "32",
        "--state-dir",
        &dir,
    ];
    let mut first_flags = common.to_vec();
    first_flags.extend(["--hold", &hold]);
    let first_job = job(&address, "llm", &data, &first_flags);
    let mut first: Vec<Proc> = (0..3).map(|r| torchrun_rank(&first_job, r, 3, 0)).collect();
    wait_until("every rank committed 48 rows", WAIT, || holding(&first, 48));
    first[1].kill();
    for rank in &mut first {
        rank.kill();
    }
    let status = cluster::status(&address, "llm").expect("status");
    let commit = (
        status.commit_generation.expect("a commit"),
        status.commit_samples,
    );
    let second_job = job(&address, "llm", &data, &common);
    let mut second: Vec<Proc> = (0..2)
        .map(|r| {
            let state = format!("{dir}/rank-{r}-{}-{}.json", commit.0, commit.1);
            torchrun_rank_with(&second_job, r, 2, 1, &["--resume", &state])
        })
        .collect();
    for rank in &mut second {
        rank.wait_ok(WAIT);
    }
    let first: Vec<&Proc> = first.iter().collect();
    let second: Vec<&Proc> = second.iter().collect();
    let trained = batches(&first)
        .into_iter()
        .filter(|(g, k, _, _)| (*g, *k) <= commit)
        .chain(batches(&second))
        .flat_map(|(_, _, ids, crcs)| ids.into_iter().zip(crcs));
    let mut ids = checked(trained, &replay);
    ids.sort_unstable();
    let unique: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "a row trained twice");
    let left = replay.len() - ids.len();
    assert!(left < 2, "{left} rows of {} never trained", replay.len());
    println!(
        "tokens: {} rows of {LENGTH} tokens, commit {commit:?} of 3 ranks, resumed on 2, {left} left as the remainder",
        replay.len()
    );
}

/// A dynamic token job: two members lease units of rows; one is killed
/// with `kill -9` after its first acks; the other finishes the epoch. Every
/// row is delivered (each holding the replay's tokens) and no unit is
/// acknowledged twice.
#[test]
fn dynamic_members_of_a_token_job_take_over_a_killed_members_rows() {
    let etcd = EtcdServer::start();
    let data = S3Tokens::start(3, 120);
    let sequence = SequenceSpec {
        length: LENGTH,
        packing: Packing::BestFit,
    };
    let replay = data.replay(sequence, SEED, 0);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let flags = [
        "--packing",
        "bestfit",
        "--batch-size",
        "4",
        "--unit-samples",
        "16",
        "--step-ms",
        "20",
        "--member-ttl-s",
        "2",
        "--shuffle-buffer",
        "8",
    ];
    let job = job(&address, "llm-dyn", &data, &flags);
    let mut victim = named_member(&job, "m0");
    let mut survivor = named_member(&job, "m1");
    wait_until("the victim acked a unit", WAIT, || {
        victim.count("ack ") >= 2
    });
    victim.kill();
    survivor.wait_ok(WAIT);
    let mut acked = Vec::new();
    let mut delivered = Vec::new();
    let mut unchecked = Vec::new();
    for member in [&victim, &survivor] {
        let lines = member.lines();
        for (i, line) in lines.iter().enumerate() {
            if let Some(unit) = line.strip_prefix("ack ") {
                acked.push(unit.to_owned());
            }
            if let Some(ids) = line.strip_prefix("got ") {
                // A member killed between the two lines printed no CRCs:
                // its rows were delivered (and their unit may be acked,
                // so no one reads them again), only not checked.
                let Some(crcs) = lines.get(i + 1).and_then(|l| l.strip_prefix("rows ")) else {
                    unchecked.extend(ids.split(' ').map(|id| id.parse::<u64>().expect("id")));
                    continue;
                };
                for (id, crc) in ids.split(' ').zip(crcs.split(' ')) {
                    delivered.push((id.parse().expect("id"), crc.to_owned()));
                }
            }
        }
    }
    let unique: BTreeSet<&String> = acked.iter().collect();
    assert_eq!(unique.len(), acked.len(), "a unit acknowledged twice");
    let mut rows: BTreeSet<u64> = checked(delivered, &replay).into_iter().collect();
    assert!(unchecked.len() <= 8, "one batch at most lost its CRC line");
    rows.extend(unchecked);
    assert_eq!(rows.len(), replay.len(), "every row of the epoch delivered");
}
