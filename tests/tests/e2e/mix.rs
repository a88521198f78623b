//! Jobs that mix two datasets on one S3 server, through the real binary, a
//! real etcd and rank processes: every epoch takes exactly the samples the
//! mix asks of each dataset, each exactly once, in a sync job and in a
//! dynamic job one of whose members is killed (`kill -9`) mid-epoch; and
//! every batch says rightly which dataset each of its samples came from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tributary_common::invariants::{check_exactly_once, check_unit_acks};
use tributary_common::manifest::Manifest;
use tributary_common::plan::lease::units;
use tributary_common::plan::mix::{Layout, SourceShape, Take};
use tributary_common::plan::span::SpanSet;
use tributary_tests::cluster::{coordinator, delivered, named_member, torchrun_group, JobArgs};
use tributary_tests::dataset::{shard_counts, S3Dataset};
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::wait_until;

const SEED: u64 = 7;
const EPOCHS: u64 = 2;
const UNIT: u32 = 16;

/// The layout both sides plan with, rebuilt from the manifests.
fn layout(manifests: &[&Manifest], takes: &[Take], epoch_samples: u64) -> Layout {
    let shapes: Vec<SourceShape> = manifests
        .iter()
        .zip(takes)
        .map(|(m, &take)| SourceShape {
            shard_samples: shard_counts(m),
            take,
        })
        .collect();
    Layout::mixed(&shapes, epoch_samples).expect("valid mix")
}

fn ids_of(layout: &Layout, set: &SpanSet) -> Vec<u64> {
    set.samples()
        .map(|(shard, i)| layout.shard_start(shard) + u64::from(i))
        .collect()
}

/// Checks each `got`/`batch` line's ids against the `src` line after it:
/// the dataset a batch names for a sample is the one its id resolves to.
/// Returns how many samples were checked.
fn check_sources(layout: &Layout, proc: &Proc) -> usize {
    let lines = proc.lines();
    let mut checked = 0;
    for pair in lines.windows(2) {
        let Some(sources) = pair[1].strip_prefix("src ") else {
            continue;
        };
        let ids: Vec<u64> = pair[0]
            .split(' ')
            .skip(if pair[0].starts_with("got ") { 1 } else { 3 })
            .map(|id| id.parse().expect("id"))
            .collect();
        let sources: Vec<usize> = sources
            .split(' ')
            .map(|s| s.parse().expect("source"))
            .collect();
        assert_eq!(ids.len(), sources.len(), "{} / {}", pair[0], pair[1]);
        for (id, source) in ids.into_iter().zip(sources) {
            let (shard, _) = layout.locate(id).expect("an id of the mix");
            assert_eq!(layout.resolve(shard).0, source, "sample {id}");
            checked += 1;
        }
    }
    checked
}

fn mix_args<'a>(
    coordinators: String,
    job: &'a str,
    data: &'a S3Dataset,
    mix: &[(String, &str)],
    flags: &[&str],
) -> JobArgs<'a> {
    let mut job = JobArgs::new(coordinators, job, data, flags);
    job.dataset = "";
    for (url, take) in mix {
        job.extra
            .extend(["--mix".to_owned(), format!("{url}={take}")]);
    }
    job
}

#[test]
fn a_weighted_sync_mix_delivers_exactly_its_counts_once_per_epoch() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(192, 48);
    let (url2, manifest2) = data.another("small", 60, 20);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    // 160 samples an epoch, 3:1: 120 of the 192, and 40 of the 60.
    let mix = [(data.url.clone(), "weight:3"), (url2, "weight:1")];
    let epochs = EPOCHS.to_string();
    let flags = [
        "--epochs",
        &epochs,
        "--batch-size",
        "8",
        "--shuffle-buffer",
        "16",
        "--epoch-samples",
        "160",
    ];
    let job = mix_args(address, "mix-sync", &data, &mix, &flags);
    let mut ranks = torchrun_group(&job, 2, 0);
    for rank in &mut ranks {
        rank.wait_ok(Duration::from_secs(180));
    }
    let takes = [Take::Weight(3.0), Take::Weight(1.0)];
    let layout = layout(&[&data.manifest, &manifest2], &takes, 160);
    assert_eq!(
        (layout.source_samples(0), layout.source_samples(1)),
        (120, 40)
    );
    // "batch GENERATION SAMPLES IDS...": one generation per epoch.
    let delivered = delivered(&ranks);
    assert_eq!(delivered.len() as u64, EPOCHS, "one generation per epoch");
    for (epoch, ids) in delivered {
        let expected = ids_of(&layout, &layout.epoch_spans(SEED, epoch));
        let mut per_source = [0u64; 2];
        for &id in &ids {
            let (shard, _) = layout.locate(id).expect("an id of the mix");
            per_source[layout.resolve(shard).0] += 1;
        }
        // 160 samples over 2 ranks: nothing dropped.
        assert_eq!(per_source, [120, 40], "epoch {epoch}");
        check_exactly_once(expected, ids).unwrap_or_else(|e| panic!("epoch {epoch}: {e}"));
    }
    let checked: usize = ranks.iter().map(|r| check_sources(&layout, r)).sum();
    assert_eq!(checked as u64, EPOCHS * 160);
    drop(etcd);
}

#[test]
fn a_dynamic_mix_acks_every_unit_once_per_epoch_through_a_kill() {
    let etcd = EtcdServer::start();
    let data = S3Dataset::start(192, 48);
    let (url2, manifest2) = data.another("small", 64, 16);
    let (_coordinator, address) = coordinator(&[etcd.endpoint()], data.endpoint());
    // 150 of the first dataset, and one and a half passes over the second
    // (96 of 64 samples: every sample once, half of them twice).
    let mix = [(data.url.clone(), "samples:150"), (url2, "repeat:1.5")];
    let (epochs, unit) = (EPOCHS.to_string(), UNIT.to_string());
    let flags = [
        "--epochs",
        &epochs,
        "--batch-size",
        "8",
        "--unit-samples",
        &unit,
        "--shuffle-buffer",
        "16",
        "--step-ms",
        "30",
        "--member-ttl-s",
        "2",
    ];
    let job = mix_args(address, "mix-dyn", &data, &mix, &flags);
    let mut members: Vec<Proc> = (0..3)
        .map(|i| named_member(&job, &format!("m{i}")))
        .collect();
    wait_until("acks before the kill", Duration::from_secs(60), || {
        members[1].count("ack ") >= 2
    });
    members[1].kill();
    members.push(named_member(&job, "m3"));
    for i in [0usize, 2, 3] {
        members[i].wait_ok(Duration::from_secs(180));
    }
    let takes = [Take::Samples(150), Take::Repeat(1.5)];
    let layout = layout(&[&data.manifest, &manifest2], &takes, 0);
    assert_eq!(
        (layout.source_samples(0), layout.source_samples(1)),
        (150, 96)
    );
    // (epoch, unit) acked, and the last lease of each by member.
    let mut acked: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut last_lease: BTreeMap<(u64, u32), (usize, u128)> = BTreeMap::new();
    for (i, m) in members.iter().enumerate() {
        for line in m.lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let key = || -> (u64, u32) {
                (
                    parts[1].parse().expect("epoch"),
                    parts[2].parse().expect("unit"),
                )
            };
            match parts[0] {
                "ack" => acked.entry(key().0).or_default().push(key().1),
                "lease" => {
                    let at: u128 = parts[3].parse().expect("ms");
                    let entry = last_lease.entry(key()).or_insert((i, at));
                    if at >= entry.1 {
                        *entry = (i, at);
                    }
                }
                _ => {}
            }
        }
    }
    let delivered_by_victim: BTreeSet<u64> = members[1]
        .lines()
        .iter()
        .filter_map(|l| l.strip_prefix("got "))
        .flat_map(|ids| ids.split(' ').filter_map(|id| id.parse().ok()))
        .collect();
    for epoch in 0..EPOCHS {
        let spans = layout.epoch_spans(SEED, epoch);
        let plan = units(&layout, SEED, epoch, UNIT);
        let got = acked.entry(epoch).or_default();
        // An ack accepted as the victim died may have gone unlogged: its
        // unit was last leased to the victim, who delivered all of it.
        let logged: BTreeSet<u32> = got.iter().copied().collect();
        for unit in (0..plan.len() as u32).filter(|u| !logged.contains(u)) {
            let samples = ids_of(&layout, &SpanSet::new([plan[unit as usize]]));
            match last_lease.get(&(epoch, unit)) {
                Some(&(1, _)) if samples.iter().all(|id| delivered_by_victim.contains(id)) => {
                    got.push(unit);
                }
                last => {
                    panic!("epoch {epoch}: unit {unit} never acknowledged (last lease {last:?})")
                }
            }
        }
        check_unit_acks(&spans, &plan, got.clone())
            .unwrap_or_else(|e| panic!("epoch {epoch}: {e}"));
        let mut per_source = [0u64; 2];
        for span in spans.spans() {
            per_source[layout.resolve(span.shard).0] += span.len();
        }
        assert_eq!(per_source, [150, 96], "epoch {epoch}");
    }
    let checked: usize = members.iter().map(|m| check_sources(&layout, m)).sum();
    assert!(checked as u64 >= EPOCHS * 246, "{checked} samples checked");
    drop(etcd);
}
