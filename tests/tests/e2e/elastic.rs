//! Elastic assignment end to end: etcd on loopback, coordinator replicas and
//! rank processes reading from a real S3-compatible server, killed with
//! `kill -9` on purpose.

#![allow(
    clippy::print_stdout,
    reason = "the tests print the recovery times they measure"
)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tributary_common::ids::{Epoch, Generation};
use tributary_common::invariants::{check_exactly_once, check_unit_acks};
use tributary_common::plan::generation::{
    emitted, generation_cut, rank_part, CommitPoint, GenerationRecord,
};
use tributary_common::plan::lease::units;
use tributary_common::plan::shuffle::ShuffleSpec;
use tributary_common::plan::span::SpanSet;
use tributary_common::plan::{epoch_spans, Remainder};
use tributary_tests::cluster::{
    self, coordinator, coordinators, leader_status, named_members, torchrun_group, JobArgs,
    DYNAMIC_UNIT,
};
use tributary_tests::dataset::{sample_ids, shard_counts, S3Dataset};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::wait_until;

const SEED: u64 = 7;
const SHUFFLE: u32 = 64;

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Per generation, per rank: the sample ids a rank printed, in order.
fn printed(procs: &[&Proc]) -> BTreeMap<u64, Vec<(u32, Vec<u64>)>> {
    let mut out: BTreeMap<u64, Vec<(u32, Vec<u64>)>> = BTreeMap::new();
    for proc in procs {
        let mut current: Option<(u64, u32)> = None;
        let mut ids = Vec::new();
        for line in proc.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.first() {
                Some(&"gen") => {
                    if let Some((g, r)) = current.take() {
                        out.entry(g)
                            .or_default()
                            .push((r, std::mem::take(&mut ids)));
                    }
                    current = Some((
                        parts[1].parse().expect("gen"),
                        parts[3].parse().expect("rank"),
                    ));
                }
                Some(&"batch") => {
                    ids.extend(parts[3..].iter().map(|s| s.parse::<u64>().expect("id")))
                }
                _ => {}
            }
        }
        if let Some((g, r)) = current {
            out.entry(g).or_default().push((r, ids));
        }
    }
    out
}

fn max_commit(proc: &Proc) -> u64 {
    proc.lines()
        .iter()
        .filter_map(|l| l.strip_prefix("commit "))
        .filter_map(|l| l.split(' ').nth(1)?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// a, c, d: a sync job of 4 ranks under two coordinator replicas. Mid-epoch
/// the leader is killed (the ranks carry on with the new one), then a rank
/// is killed and the group torn down as torchrun would; every coordinator is
/// stopped and one started afresh; the group restarts as 3 ranks from the
/// last commit and finishes the epoch. Every sample is committed exactly
/// once (minus the documented remainder), parts are equal in every
/// generation, and each rank emitted exactly what the planner recomputes.
#[test]
fn sync_ranks_survive_rank_kill_leader_kill_and_full_restart() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 24);
    let (manifest, scratch) = (&data.manifest, &data.scratch);
    let endpoints = vec![etcd.endpoint()];
    let (mut replicas, addresses) = coordinators(2, &endpoints, data.endpoint());
    // Each rank's part of the epoch is 120 samples. The ranks hold at 48
    // (committed through the first leader) until the failover is done, and
    // at 96 (committed through the second) until they are killed: the kill
    // always lands mid-part, however the two cores are shared.
    let (failed_over, never) = (scratch.path("failed-over"), scratch.path("never"));
    let (hold_48, hold_96) = (format!("48:{failed_over}"), format!("96:{never}"));
    let flags = [
        "--batch-size",
        "8",
        "--commit-every",
        "24",
        "--hold",
        &hold_48,
        "--hold",
        &hold_96,
        "--step-ms",
        "20",
        // As short as the leader's TTL: the failover outlasts some
        // members' leases, and those ranks must rejoin their generation.
        "--member-ttl-s",
        "2",
        "--shuffle-buffer",
        &SHUFFLE.to_string(),
    ];
    let job = JobArgs::new(addresses.join(","), "sync-e2e", &data, &flags);
    let mut group = torchrun_group(&job, 4, 0);
    let holding = |group: &[Proc], at: u64| {
        let line = format!("holding {at}");
        group.iter().all(|p| p.lines().contains(&line))
    };
    wait_until(
        "every rank at 48, committed",
        Duration::from_secs(60),
        || holding(&group, 48),
    );

    // c: kill -9 the leader mid-epoch.
    let leader = leader_status(&addresses, "sync-e2e")
        .expect("status")
        .leader;
    let dead_at = usize::from(leader != addresses[0]);
    let mut dead = replicas.remove(dead_at);
    let survivor = (replicas.remove(0), addresses[1 - dead_at].clone());
    let killed_at = Instant::now();
    dead.kill();
    wait_until(
        "the other replica to serve",
        Duration::from_secs(30),
        || cluster::status(&survivor.1, "sync-e2e").is_ok(),
    );
    println!(
        "leader killed: the other replica served after {:?}",
        killed_at.elapsed()
    );
    let before = max_commit(&group[0]);
    assert_eq!(before, 48, "rank 0 committed up to its hold point");
    std::fs::write(&failed_over, b"").expect("release the ranks");
    wait_until(
        "every rank at 96, committed through the new leader",
        Duration::from_secs(60),
        || holding(&group, 96),
    );
    assert_eq!(max_commit(&group[0]), 96);

    // a: kill -9 one rank; torchrun tears the group down.
    group[2].kill();
    for proc in &mut group {
        proc.kill();
    }
    // d: stop every coordinator, start one afresh: it loads everything from etcd.
    let status_before = cluster::status(&survivor.1, "sync-e2e").expect("status");
    let (mut replica, _) = survivor;
    replica.kill();
    drop(dead);
    let (restarted, c) = coordinator(&endpoints, data.endpoint());
    let job = JobArgs {
        coordinators: c.clone(),
        ..job
    };
    wait_until(
        "the fresh coordinator to serve",
        Duration::from_secs(30),
        || cluster::status(&c, "sync-e2e").is_ok(),
    );
    let status_after = cluster::status(&c, "sync-e2e").expect("status");
    assert_eq!(
        status_before.generations, status_after.generations,
        "generations survive a full restart"
    );
    assert_eq!(
        status_before.commit_samples, status_after.commit_samples,
        "the commit survives a full restart"
    );

    let mut second_group = torchrun_group(&job, 3, 1);
    for proc in &mut second_group {
        proc.wait_ok(Duration::from_secs(120));
    }
    let status = cluster::status(&c, "sync-e2e").expect("status");
    drop(restarted);

    // Replay the plan from the generation history and check it.
    let history: Vec<GenerationRecord> = status
        .generations
        .iter()
        .map(|g| GenerationRecord {
            generation: Generation(g.generation),
            epoch: Epoch(g.epoch),
            world: g.world,
            from: g.from_generation.map(|f| CommitPoint {
                generation: Generation(f),
                samples: g.from_samples,
            }),
        })
        .collect();
    assert_eq!(history.len(), 2, "one generation per restart: {history:?}");
    let resumed = history[1]
        .from
        .expect("the second generation resumes from a commit");
    assert_eq!(resumed.generation, Generation(0));
    let counts = shard_counts(manifest);
    let spec = ShuffleSpec::new(SHUFFLE as usize);
    let cut = |g: u64| {
        generation_cut(
            &counts,
            SEED,
            Remainder::Drop,
            spec,
            &history,
            Generation(g),
        )
        .expect("cut")
    };
    let printed_ids = printed(&group.iter().chain(&second_group).collect::<Vec<_>>());
    let mut committed = Vec::new();
    for (g, record) in history.iter().enumerate() {
        let world = record.world as usize;
        let parts: Vec<SpanSet> = (0..world)
            .map(|r| rank_part(&cut(g as u64), world, r, Remainder::Drop))
            .collect();
        assert!(
            parts.iter().all(|p| p.len() == parts[0].len()),
            "equal parts in generation {g}"
        );
        let k = if g == 0 {
            resumed.samples
        } else {
            parts[0].len()
        };
        for (rank, part) in parts.iter().enumerate() {
            let mine = emitted(part, k, SEED, 0, g as u64, rank as u64, spec);
            let planned: BTreeSet<u64> = sample_ids(manifest, &mine).into_iter().collect();
            committed.extend(planned.iter().copied());
            // What the rank printed agrees with the planner's replay.
            let seen = printed_ids
                .get(&(g as u64))
                .and_then(|ranks| ranks.iter().find(|(r, _)| *r as usize == rank))
                .map(|(_, ids)| ids.clone())
                .unwrap_or_default();
            let prefix: BTreeSet<u64> = seen.iter().take(k as usize).copied().collect();
            if seen.len() as u64 >= k {
                assert_eq!(
                    prefix, planned,
                    "generation {g} rank {rank}: printed vs replayed"
                );
            } else {
                assert!(
                    prefix.is_subset(&planned),
                    "generation {g} rank {rank}: printed ids outside the plan"
                );
            }
        }
    }
    let epoch = epoch_spans(&counts, SEED, 0);
    let last = cut(1);
    let dropped = last.len() % 3;
    let expected: Vec<u64> = {
        let all = sample_ids(manifest, &epoch);
        let tail: BTreeSet<u64> = sample_ids(manifest, &last.split_at(last.len() - dropped).1)
            .into_iter()
            .collect();
        all.into_iter().filter(|id| !tail.contains(id)).collect()
    };
    check_exactly_once(expected, committed).expect("every sample committed exactly once");
    println!(
        "sync: {} samples, generation 0 committed {} per rank, {} dropped at the end (< world 3)",
        manifest.samples, resumed.samples, dropped
    );
    drop(etcd);
}

/// b: a dynamic job of 4 members; two are killed at different moments; the
/// others finish. Every unit is acknowledged exactly once, and a killed
/// member's units flow to another within the lease TTL + 1 s.
#[test]
fn dynamic_members_take_over_the_units_of_killed_ones() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 48);
    let manifest = &data.manifest;
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let ttl_s = 2u64;
    let job = JobArgs::dynamic(address.clone(), "dyn-e2e", &data, 40, ttl_s);
    let mut members = named_members(&job, 4);
    let mut kills = Vec::new();
    for (victim, after_acks) in [(1usize, 2usize), (3, 4)] {
        wait_until("acks before a kill", Duration::from_secs(60), || {
            members[victim].count("ack ") >= after_acks
        });
        members[victim].kill();
        kills.push((victim, unix_ms()));
    }
    for i in [0usize, 2] {
        members[i].wait_ok(Duration::from_secs(120));
    }
    // Every unit acked exactly once, across all members (dead ones included).
    let mut acked = Vec::new();
    let mut leases: Vec<(usize, u32, u128)> = Vec::new();
    for (i, m) in members.iter().enumerate() {
        for line in m.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts[0] {
                "ack" => acked.push(parts[2].parse::<u32>().expect("unit")),
                "lease" => leases.push((
                    i,
                    parts[2].parse().expect("unit"),
                    parts[3].parse().expect("ms"),
                )),
                _ => {}
            }
        }
    }
    let counts = shard_counts(manifest);
    let plan = units(&counts, SEED, 0, DYNAMIC_UNIT);
    // A member killed while its ack was in flight may have had it accepted
    // and not lived to log it. Such a unit was last leased by a killed member
    // and never leased to anyone after it (the coordinator re-leases the
    // units of a dead member that it did not see acknowledged).
    let killed: BTreeSet<usize> = kills.iter().map(|&(victim, _)| victim).collect();
    let logged: BTreeSet<u32> = acked.iter().copied().collect();
    // It must also have delivered every sample of the unit before it died.
    let delivered = |member: usize| -> BTreeSet<u64> {
        members[member]
            .lines()
            .iter()
            .filter_map(|l| l.strip_prefix("got "))
            .flat_map(|ids| ids.split(' ').filter_map(|id| id.parse().ok()))
            .collect()
    };
    for unit in (0..plan.len() as u32).filter(|u| !logged.contains(u)) {
        let last = leases.iter().filter(|l| l.1 == unit).max_by_key(|l| l.2);
        let samples = sample_ids(manifest, &SpanSet::new([plan[unit as usize]]));
        match last {
            Some(&(member, _, _))
                if killed.contains(&member)
                    && samples.iter().all(|id| delivered(member).contains(id)) =>
            {
                println!("dynamic: unit {unit}'s ack by killed member m{member} went unlogged");
                acked.push(unit);
            }
            _ => panic!("unit {unit} was never acknowledged (last lease: {last:?})"),
        }
    }
    check_unit_acks(&epoch_spans(&counts, SEED, 0), &plan, acked.clone())
        .expect("each unit acked once");
    let status = cluster::status(&address, "dyn-e2e").expect("status");
    assert!(status.finished, "the job finished: {status:?}");
    // Kill to reassignment.
    let acked_by: HashMap<usize, BTreeSet<u32>> = members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            (
                i,
                m.lines()
                    .iter()
                    .filter_map(|l| l.strip_prefix("ack 0 "))
                    .filter_map(|u| u.parse().ok())
                    .collect(),
            )
        })
        .collect();
    for (victim, killed_ms) in kills {
        let orphaned: BTreeSet<u32> = leases
            .iter()
            .filter(|(i, u, _)| *i == victim && !acked_by[&victim].contains(u))
            .map(|(_, u, _)| *u)
            .collect();
        let taken = leases
            .iter()
            .filter(|(i, u, t)| *i != victim && orphaned.contains(u) && *t >= killed_ms)
            .map(|(_, _, t)| *t)
            .min();
        if let Some(taken) = taken {
            let delay = Duration::from_millis((taken - killed_ms) as u64);
            println!("dynamic: member m{victim} killed; its units flowed to another member after {delay:?} (ttl {ttl_s} s)");
            assert!(
                delay <= Duration::from_secs(ttl_s + 1),
                "reassignment took {delay:?}"
            );
        }
    }
    drop(etcd);
}
