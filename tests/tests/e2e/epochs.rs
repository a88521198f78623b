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
use tributary_common::plan::epoch_spans;
use tributary_common::plan::lease::units;
use tributary_tests::cluster::{
    coordinators, delivered, leader_status, named_members, torchrun_group, JobArgs,
};
use tributary_tests::dataset::{sample_ids, shard_counts, S3Dataset};
use tributary_tests::etcd::EtcdCluster;
use tributary_tests::process::Proc;

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
    data: &'a S3Dataset,
) -> JobArgs<'a> {
    let epochs = epochs.to_string();
    let flags = [
        "--epochs",
        &epochs,
        "--batch-size",
        "8",
        "--unit-samples",
        "16",
        "--shuffle-buffer",
        "16",
    ];
    JobArgs::new(coordinators.join(","), job, data, &flags)
}

/// 3-member etcd, an S3 server with 288 samples in shards of 48, and two
/// coordinator replicas: their processes and addresses.
fn bed() -> (EtcdCluster, S3Dataset, Vec<Proc>, Vec<String>) {
    let etcd = EtcdCluster::start(3);
    let data = S3Dataset::start(288, 48);
    let (replicas, addresses) = coordinators(2, &etcd.endpoints(), data.endpoint());
    (etcd, data, replicas, addresses)
}

#[test]
fn a_dynamic_job_of_several_epochs_on_three_member_etcd_acks_every_unit_once() {
    let (_etcd, data, _replicas, addresses) = bed();
    let manifest = &data.manifest;
    let job = job_args(EPOCHS, &addresses, "dyn-epochs", &data);
    let mut members = named_members(&job, 4);
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
    let counts = shard_counts(manifest);
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
    let (_etcd, data, replicas, addresses) = bed();
    let manifest = &data.manifest;
    let job = job_args(SYNC_EPOCHS, &addresses, "sync-epochs", &data);
    let world = 4u32;
    let mut ranks = torchrun_group(&job, world, 0);
    for rank in &mut ranks {
        rank.wait_ok(Duration::from_secs(180));
    }
    // "batch GENERATION SAMPLES IDS...": one generation per epoch here.
    let mut delivered = delivered(&ranks);
    // Every rank exited cleanly after the last epoch, one generation each.
    let status = leader_status(&addresses, "sync-epochs").expect("status");
    assert_eq!(status.generations.len() as u64, SYNC_EPOCHS, "{status:?}");
    assert_eq!(status.epoch, SYNC_EPOCHS - 1, "{status:?}");
    let counts = shard_counts(manifest);
    for generation in &status.generations {
        let epoch = epoch_spans(&counts, SEED, generation.epoch);
        let ids = delivered.remove(&generation.generation).unwrap_or_default();
        let all: BTreeSet<u64> = sample_ids(manifest, &epoch).into_iter().collect();
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
