//! Whole jobs of several epochs, with no faults at all: 3-member etcd, two
//! coordinator replicas, four ranks. Every epoch's samples are delivered
//! (sync) or acknowledged (dynamic) exactly once, and the job finishes.
//!
//! A two-epoch dynamic job once wedged here: the report carrying an epoch's
//! last ack also deleted the epoch's keys in the same etcd transaction,
//! which etcd refuses ("duplicate key given in txn request"), and every
//! refusal deposed the leader.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tributary_common::invariants::{check_exactly_once, check_unit_acks};
use tributary_common::lease::units;
use tributary_common::manifest::Manifest;
use tributary_common::plan::epoch_spans;
use tributary_common::span::SpanSet;
use tributary_tests::etcd::EtcdCluster;

use crate::cluster::{coordinator, leader_status, named_member, torchrun_rank, JobArgs, Proc};
use crate::elastic::dataset;
use crate::harness::{S3Server, Scratch};

const SEED: u64 = 7;
const EPOCHS: u64 = 3;
/// Sync ranks here keep no lockstep (no all-reduce, as DDP has): two epochs,
/// so that no rank can fall a whole epoch behind the one the others plan,
/// which the coordinator refuses as it would a stale DDP rank.
const SYNC_EPOCHS: u64 = 2;

fn job_args<'a>(
    epochs: u64,
    coordinators: &[String],
    job: &'a str,
    url: &'a str,
    s3: &'a S3Server,
) -> JobArgs<'a> {
    JobArgs {
        coordinators: coordinators.join(","),
        job,
        dataset: url,
        s3_endpoint: &s3.endpoint,
        extra: [
            "--epochs",
            &epochs.to_string(),
            "--batch-size",
            "8",
            "--unit-samples",
            "16",
            "--shuffle-buffer",
            "16",
        ]
        .map(String::from)
        .to_vec(),
    }
}

fn ids_of(manifest: &Manifest, set: &SpanSet) -> Vec<u64> {
    set.samples()
        .map(|(shard, i)| manifest.sample_id(shard as usize, i))
        .collect()
}

#[test]
fn a_dynamic_job_of_several_epochs_on_three_member_etcd_acks_every_unit_once() {
    let etcd = EtcdCluster::start(3);
    let s3 = S3Server::start();
    let scratch = Scratch::new();
    let (url, manifest) = dataset(&s3, &scratch, 288, 48);
    let endpoints = etcd.endpoints();
    let replicas: Vec<(Proc, String)> = (0..2)
        .map(|_| coordinator(&endpoints, &s3.endpoint))
        .collect();
    let addresses: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
    let job = job_args(EPOCHS, &addresses, "dyn-epochs", &url, &s3);
    let mut members: Vec<Proc> = (0..4)
        .map(|i| named_member(&job, &format!("m{i}")))
        .collect();
    for member in &mut members {
        member.wait_ok(Duration::from_secs(180));
    }
    let mut acked: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for member in &members {
        for line in member.lines() {
            if let Some(rest) = line.strip_prefix("ack ") {
                let (epoch, unit) = rest.split_once(' ').expect("ack EPOCH UNIT");
                acked
                    .entry(epoch.parse().expect("epoch"))
                    .or_default()
                    .push(unit.parse().expect("unit"));
            }
        }
    }
    let counts: Vec<u32> = manifest.shards.iter().map(|s| s.samples).collect();
    assert_eq!(
        acked.keys().copied().collect::<Vec<_>>(),
        (0..EPOCHS).collect::<Vec<_>>(),
        "every epoch was worked"
    );
    for (epoch, units_acked) in acked {
        let plan = units(&counts, SEED, epoch, 16);
        check_unit_acks(&epoch_spans(&counts, SEED, epoch), &plan, units_acked)
            .unwrap_or_else(|e| panic!("epoch {epoch}: {e}"));
    }
    let status = leader_status(&addresses, "dyn-epochs").expect("status");
    assert!(status.finished, "the job finished: {status:?}");
    assert_eq!(status.epoch, EPOCHS);
}

#[test]
fn a_sync_job_of_several_epochs_on_three_member_etcd_delivers_every_sample_once_per_epoch() {
    let etcd = EtcdCluster::start(3);
    let s3 = S3Server::start();
    let scratch = Scratch::new();
    let (url, manifest) = dataset(&s3, &scratch, 288, 48);
    let endpoints = etcd.endpoints();
    let replicas: Vec<(Proc, String)> = (0..2)
        .map(|_| coordinator(&endpoints, &s3.endpoint))
        .collect();
    let addresses: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
    let job = job_args(SYNC_EPOCHS, &addresses, "sync-epochs", &url, &s3);
    let world = 4u32;
    let mut ranks: Vec<Proc> = (0..world)
        .map(|r| torchrun_rank(&job, r, world, 0))
        .collect();
    for rank in &mut ranks {
        rank.wait_ok(Duration::from_secs(180));
    }
    // "batch GENERATION SAMPLES IDS...": one generation per epoch here.
    let mut delivered: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for rank in &ranks {
        for line in rank.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts[0] == "batch" {
                delivered
                    .entry(parts[1].parse().expect("generation"))
                    .or_default()
                    .extend(parts[3..].iter().map(|id| id.parse::<u64>().expect("id")));
            }
        }
    }
    // Every rank exited cleanly after the last epoch, one generation each.
    let status = leader_status(&addresses, "sync-epochs").expect("status");
    assert_eq!(status.generations.len() as u64, SYNC_EPOCHS, "{status:?}");
    assert_eq!(status.epoch, SYNC_EPOCHS - 1, "{status:?}");
    let counts: Vec<u32> = manifest.shards.iter().map(|s| s.samples).collect();
    for generation in &status.generations {
        let epoch = epoch_spans(&counts, SEED, generation.epoch);
        let ids = delivered.remove(&generation.generation).unwrap_or_default();
        let all: BTreeSet<u64> = ids_of(&manifest, &epoch).into_iter().collect();
        // Equal parts: a world of 4 drops at most 3 samples at the end.
        let dropped = manifest.samples % u64::from(world);
        assert_eq!(ids.len() as u64, manifest.samples - dropped);
        assert!(
            ids.iter().all(|id| all.contains(id)),
            "ids outside epoch {}",
            generation.epoch
        );
        let expected: Vec<u64> = {
            let got: BTreeSet<u64> = ids.iter().copied().collect();
            all.into_iter().filter(|id| got.contains(id)).collect()
        };
        check_exactly_once(expected, ids)
            .unwrap_or_else(|e| panic!("epoch {}: {e}", generation.epoch));
    }
    drop(replicas);
}
