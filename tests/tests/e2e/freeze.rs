//! Frozen processes (SIGSTOP: a long GC pause, a half-open connection) in a
//! dynamic job: a frozen leader coordinator is failed over by the members'
//! deadlines and keep-alive pings within the election TTL + 2 s, without
//! expiring the members; a member frozen past its TTL joins again as a new
//! member when it resumes and carries on. Every unit is acked exactly once.

#![allow(
    clippy::print_stdout,
    reason = "the tests print the recovery times they measure"
)]

use std::time::{Duration, Instant};

use tributary_common::invariants::check_unit_acks;
use tributary_common::manifest::Manifest;
use tributary_common::plan::epoch_spans;
use tributary_common::plan::lease::units;
use tributary_tests::cluster::{
    self, coordinator, coordinators, leader_status, named_members, JobArgs, DYNAMIC_UNIT,
};
use tributary_tests::dataset::{shard_counts, S3Dataset};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::wait_until;

const SEED: u64 = 7;
/// The coordinators' `--leader-ttl-s` (see `cluster::coordinator`).
const LEADER_TTL: Duration = Duration::from_secs(2);

fn acks(procs: &[Proc]) -> usize {
    procs.iter().map(|p| p.count("ack ")).sum()
}

/// Every member's acked units, checked against the epoch's plan: each unit
/// acked exactly once.
fn check_every_unit_acked_once(procs: &[Proc], manifest: &Manifest) {
    let acked: Vec<u32> = procs
        .iter()
        .flat_map(|p| p.lines())
        .filter_map(|l| l.strip_prefix("ack 0 ").and_then(|u| u.parse().ok()))
        .collect();
    let counts = shard_counts(manifest);
    let plan = units(&counts, SEED, 0, DYNAMIC_UNIT);
    check_unit_acks(&epoch_spans(&counts, SEED, 0), &plan, acked).expect("each unit acked once");
}

/// The leader coordinator is frozen mid-epoch for longer than the members'
/// TTL. The members' calls to it time out (keep-alive pings, deadlines),
/// they move to the other replica, which is elected meanwhile, and go on:
/// acks flow again within the election TTL + 2 s, and no member's lease
/// expires (none joins again). Resumed, the old leader is fenced.
#[test]
fn a_frozen_leader_is_failed_over_within_the_election_ttl_and_members_keep_their_leases() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 48);
    let (replicas, addresses) = coordinators(2, &[etcd.endpoint()], data.endpoint());
    let member_ttl = Duration::from_secs(6);
    let job = JobArgs::dynamic(
        addresses.join(","),
        "frozen-leader",
        &data,
        250,
        member_ttl.as_secs(),
    );
    let mut members = named_members(&job, 3);
    wait_until("a few acks", Duration::from_secs(60), || {
        acks(&members) >= 4
    });
    let leader = leader_status(&addresses, "frozen-leader")
        .expect("status")
        .leader;
    let frozen = &replicas[usize::from(leader != addresses[0])];
    frozen.signal("STOP");
    let frozen_at = Instant::now();
    // An answer the leader sent just before it froze may still be printed.
    std::thread::sleep(Duration::from_millis(200));
    let before = acks(&members);
    let bound = LEADER_TTL + Duration::from_secs(2);
    wait_until("acks through the new leader", bound * 3, || {
        acks(&members) > before
    });
    let resumed = frozen_at.elapsed();
    println!("leader frozen: members acked again after {resumed:?} (bound {bound:?})");
    assert!(
        resumed <= bound,
        "members stalled {resumed:?} behind a frozen leader"
    );
    // Stay frozen past the members' TTL: they renew through the new leader.
    let past_ttl = member_ttl + Duration::from_secs(2);
    if let Some(left) = past_ttl.checked_sub(frozen_at.elapsed()) {
        std::thread::sleep(left);
    }
    frozen.signal("CONT");
    for member in &mut members {
        member.wait_ok(Duration::from_secs(120));
    }
    for member in &members {
        assert!(
            !member.lines().iter().any(|l| l.starts_with("rejoin ")),
            "{} lost its lease while the leader was frozen",
            member.name
        );
    }
    check_every_unit_acked_once(&members, &data.manifest);
    let status = leader_status(&addresses, "frozen-leader").expect("status");
    assert!(status.finished, "the job finished: {status:?}");
    drop((replicas, etcd));
}

/// A member frozen past its TTL loses its units to the others; resumed, it
/// drops what it held, joins again as a new member and reads on; the epoch
/// completes with every unit acked exactly once.
#[test]
fn a_member_frozen_past_its_ttl_joins_again_and_the_epoch_completes() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(480, 48);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    let job = JobArgs::dynamic(address.clone(), "frozen-member", &data, 500, 2);
    let mut members = named_members(&job, 3);
    wait_until("m1's first acks", Duration::from_secs(60), || {
        members[1].count("ack ") >= 2
    });
    members[1].signal("STOP");
    wait_until(
        "the coordinator to forget m1",
        Duration::from_secs(30),
        || {
            cluster::status(&address, "frozen-member")
                .is_ok_and(|s| !s.members.iter().any(|m| m == "m1"))
        },
    );
    let status = cluster::status(&address, "frozen-member").expect("status");
    assert!(
        !status.finished,
        "the epoch must still be running when m1 resumes: slow the members down"
    );
    members[1].signal("CONT");
    for member in &mut members {
        member.wait_ok(Duration::from_secs(120));
    }
    assert!(
        members[1].lines().iter().any(|l| l == "rejoin m1"),
        "m1 joined again: {:?}",
        members[1].lines().iter().rev().take(5).collect::<Vec<_>>()
    );
    check_every_unit_acked_once(&members, &data.manifest);
    let status = cluster::status(&address, "frozen-member").expect("status");
    assert!(status.finished, "the job finished: {status:?}");
    drop(etcd);
}
