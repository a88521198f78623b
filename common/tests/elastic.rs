//! Whole epochs of elasticity, simulated against the pure planner and
//! checked with the invariants written once in `invariants`.
//!
//! - Synchronous: generations of random world sizes; ranks run the real
//!   shuffle buffer over their parts; commits at random points; a kill or
//!   join abandons the generation after its last commit and the next one
//!   resumes from the latest commit (possibly an older generation's). The
//!   committed samples of the epoch must be its sample set, each once, minus
//!   the documented remainder.
//! - Dynamic: random lease / ack / kill / join / rebuild-from-store
//!   sequences over a `LeasePool`; every unit is acknowledged once and the
//!   acknowledged samples are the epoch.

use proptest::prelude::*;
use tributary_common::invariants::{check_epoch_commits, check_unit_acks, EpochRemainder};
use tributary_common::plan::generation::{generation_cut, CommitPoint, GenerationRecord};
use tributary_common::plan::lease::{units, LeasePool, UnitState};
use tributary_common::plan::mix::{Layout, SourceShape, Take};
use tributary_common::plan::shuffle::{ShuffleBuffer, ShuffleSpec};
use tributary_common::plan::span::SpanSet;
use tributary_common::plan::{dropped, epoch_spans, split_equal, Remainder};
use tributary_common::{Epoch, Generation, MemberId, PoolError};

type Sample = (u32, u32);

/// What rank `rank` of `generation` delivers: its part through its buffer.
fn rank_stream(part: &SpanSet, spec: ShuffleSpec, path: [u64; 4]) -> Vec<Sample> {
    let [seed, epoch, generation, rank] = path;
    let mut buffer = ShuffleBuffer::with_spec(spec, seed, epoch, generation, rank);
    let mut out: Vec<Sample> = part.samples().filter_map(|s| buffer.push(s)).collect();
    out.extend(buffer.drain());
    out
}

/// A generation before the final one: its world, and the commits made
/// before it was abandoned, as fractions of the part length.
#[derive(Debug, Clone)]
struct Abandoned {
    world: usize,
    commits: Vec<f64>,
}

fn arb_spec() -> impl Strategy<Value = ShuffleSpec> {
    (0usize..48, 1usize..32)
        .prop_map(|(capacity, initial)| ShuffleSpec::new(capacity).with_initial(initial))
}

struct Generated {
    /// Every rank's full stream, per generation.
    streams: Vec<Vec<Vec<Sample>>>,
    cuts: Vec<SpanSet>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sync_generations_commit_every_sample_once(
        shard_samples in proptest::collection::vec(0u32..30, 1..12),
        seed in any::<u64>(),
        epoch in 0u64..3,
        spec in arb_spec(),
        pad in any::<bool>(),
        abandoned in proptest::collection::vec(
            (1usize..=8, proptest::collection::vec(0.0f64..=1.0, 0..3))
                .prop_map(|(world, commits)| Abandoned { world, commits }),
            0..6,
        ),
        final_world in 1usize..=8,
        mixed_with in proptest::option::of((proptest::collection::vec(0u32..20, 1..5), 1u64..40)),
    ) {
        // One dataset, or a mix of it (some of its samples) and another
        // (one and a half passes): generations plan over either alike.
        let layout = match &mixed_with {
            None => Layout::single(shard_samples.clone()),
            Some((other, take)) => {
                let mixed = Layout::mixed(&[
                    SourceShape { shard_samples: shard_samples.clone(), take: Take::Samples(*take) },
                    SourceShape { shard_samples: other.clone(), take: Take::Repeat(1.5) },
                ], 0);
                prop_assume!(mixed.is_ok());
                mixed.map_err(|e| TestCaseError::fail(e.to_string()))?
            }
        };
        let remainder = if pad { Remainder::Pad } else { Remainder::Drop };
        let plan = |history: &[GenerationRecord], g: usize| {
            generation_cut(&layout, seed, remainder, spec, history, Generation(g as u64))
                .map_err(|e| TestCaseError::fail(e.to_string()))
        };
        let worlds: Vec<usize> = abandoned.iter().map(|a| a.world).chain([final_world]).collect();
        let mut history: Vec<GenerationRecord> = Vec::new();
        let mut latest: Option<CommitPoint> = None;
        let mut run = Generated { streams: Vec::new(), cuts: Vec::new() };
        for (g, &world) in worlds.iter().enumerate() {
            history.push(GenerationRecord {
                generation: Generation(g as u64),
                epoch: Epoch(epoch),
                world: world as u32,
                from: latest,
            });
            let cut = plan(&history, g)?;
            let parts = split_equal(&cut, world, remainder);
            let per_part = parts[0].len();
            run.streams.push(
                parts
                    .iter()
                    .enumerate()
                    .map(|(rank, part)| rank_stream(part, spec, [seed, epoch, g as u64, rank as u64]))
                    .collect(),
            );
            run.cuts.push(cut);
            if let Some(step) = abandoned.get(g) {
                // The trainer checkpoints at these points, then the world changes.
                let last = step.commits.iter().map(|f| (f * per_part as f64) as u64).max();
                if let Some(samples) = last {
                    latest = Some(CommitPoint { generation: Generation(g as u64), samples });
                }
            }
        }

        // Same inputs, same plan: the full history (and one read back from
        // its stored form) gives every generation the cut it had.
        let json = serde_json::to_string(&history).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let stored: Vec<GenerationRecord> =
            serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (g, cut) in run.cuts.iter().enumerate() {
            prop_assert_eq!(&plan(&stored, g)?, cut);
        }

        // What was committed: the final generation ran to completion; each
        // generation on its resume chain up to the commit resumed from.
        let last = worlds.len() - 1;
        let mut committed: Vec<Sample> = run.streams[last].iter().flatten().copied().collect();
        let padding = |g: usize| {
            (run.cuts[g].len().div_ceil(worlds[g] as u64) * worlds[g] as u64)
                .saturating_sub(run.cuts[g].len())
        };
        let mut max_extra = padding(last);
        let mut record = history[last];
        while let Some(from) = record.from {
            let g = from.generation.get() as usize;
            for stream in &run.streams[g] {
                committed.extend(&stream[..(from.samples as usize).min(stream.len())]);
            }
            max_extra += padding(g);
            record = history[g];
        }
        let epoch_set = layout.epoch_spans(seed, epoch);
        let expected = match remainder {
            Remainder::Drop => EpochRemainder::Dropped {
                tail: dropped(&run.cuts[last], final_world, remainder),
                world: final_world as u64,
            },
            Remainder::Pad => EpochRemainder::Padded { max_extra },
        };
        check_epoch_commits(&epoch_set, committed, &expected)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

#[derive(Debug, Clone)]
enum Op {
    Lease {
        member: usize,
        max: usize,
    },
    Ack {
        member: usize,
        pick: usize,
    },
    /// The member dies: its lease expires and its units go back.
    Kill {
        member: usize,
    },
    /// A member that was killed acknowledges a unit it still believes it holds.
    ZombieAck {
        pick: usize,
    },
    Join,
    /// The coordinator fails over: a new pool is rebuilt from the stored facts.
    Rebuild,
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..8, 1usize..5).prop_map(|(member, max)| Op::Lease { member, max }),
        6 => (0usize..8, 0usize..16).prop_map(|(member, pick)| Op::Ack { member, pick }),
        1 => (0usize..8).prop_map(|member| Op::Kill { member }),
        1 => (0usize..16).prop_map(|pick| Op::ZombieAck { pick }),
        1 => Just(Op::Join),
        1 => Just(Op::Rebuild),
    ]
}

/// A member as it sees itself: the units it was leased and has not acked.
#[derive(Debug)]
struct Member {
    id: MemberId,
    holds: Vec<u32>,
}

fn rebuild(pool: &LeasePool) -> Result<LeasePool, PoolError> {
    let mut new = LeasePool::new(pool.len());
    // Acks before leases on purpose: restoring is order-insensitive.
    for unit in (0..pool.len() as u32).rev() {
        match pool.state(unit) {
            Some(UnitState::Acked(by)) => new.restore_acked(unit, by)?,
            Some(UnitState::Leased(holder)) => new.restore_leased(unit, holder)?,
            _ => {}
        }
    }
    Ok(new)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn dynamic_leases_ack_every_unit_once(
        shard_samples in proptest::collection::vec(0u32..30, 1..10),
        seed in any::<u64>(),
        unit_samples in 1u32..8,
        ops in proptest::collection::vec(arb_op(), 0..80),
    ) {
        let units = units(&shard_samples, seed, 0, unit_samples);
        let mut pool = LeasePool::new(units.len());
        let mut next_id = 0;
        let mut join = |members: &mut Vec<Member>| {
            members.push(Member { id: MemberId::new(format!("m{next_id}")), holds: Vec::new() });
            next_id += 1;
        };
        let mut alive: Vec<Member> = Vec::new();
        let mut dead: Vec<Member> = Vec::new();
        for _ in 0..3 {
            join(&mut alive);
        }
        let mut acks: Vec<u32> = Vec::new();
        let fail = |e: PoolError| TestCaseError::fail(e.to_string());
        for op in ops {
            match op {
                Op::Lease { member, max } if !alive.is_empty() => {
                    let m = member % alive.len();
                    let got = pool.lease(&alive[m].id, max);
                    prop_assert!(got.len() == max || pool.free_count() == 0);
                    alive[m].holds.extend(got);
                }
                Op::Ack { member, pick } if !alive.is_empty() => {
                    let count = alive.len();
                    let m = &mut alive[member % count];
                    if !m.holds.is_empty() {
                        let unit = m.holds.swap_remove(pick % m.holds.len());
                        pool.ack(&m.id, unit).map_err(fail)?;
                        acks.push(unit);
                    }
                }
                Op::Kill { member } if !alive.is_empty() => {
                    let mut m = alive.remove(member % alive.len());
                    let mut released = pool.release(&m.id);
                    released.sort_unstable();
                    m.holds.sort_unstable();
                    prop_assert_eq!(&released, &m.holds);
                    dead.push(m);
                }
                Op::ZombieAck { pick } => {
                    let zombies: Vec<_> = dead.iter_mut().filter(|m| !m.holds.is_empty()).collect();
                    if let Some(m) = zombies.into_iter().nth(pick % 4) {
                        let unit = m.holds.swap_remove(pick % m.holds.len());
                        let refused = pool.ack(&m.id, unit);
                        prop_assert!(
                            matches!(refused, Err(PoolError::NotLeasedTo { .. } | PoolError::AlreadyAcked { .. })),
                            "a dead member's ack of unit {} was accepted: {:?}", unit, refused
                        );
                    }
                }
                Op::Join => join(&mut alive),
                Op::Rebuild => {
                    let new = rebuild(&pool).map_err(fail)?;
                    prop_assert_eq!(
                        (new.acked_count(), new.free_count(), new.leased_count()),
                        (pool.acked_count(), pool.free_count(), pool.leased_count())
                    );
                    for m in &alive {
                        prop_assert_eq!(new.leased_by(&m.id), pool.leased_by(&m.id));
                    }
                    pool = new;
                }
                _ => {}
            }
            prop_assert_eq!(
                pool.acked_count() + pool.free_count() + pool.leased_count(),
                units.len()
            );
        }
        // The survivors (or a newcomer) finish the epoch.
        if alive.is_empty() {
            join(&mut alive);
        }
        for round in 0.. {
            prop_assert!(round <= 2 * units.len() + 2, "the epoch does not finish");
            for m in &mut alive {
                m.holds.extend(pool.lease(&m.id, 3));
                for unit in m.holds.drain(..) {
                    pool.ack(&m.id, unit).map_err(fail)?;
                    acks.push(unit);
                }
            }
            if pool.is_complete() {
                break;
            }
        }
        prop_assert_eq!(pool.free_count(), 0);
        let epoch_set = epoch_spans(&shard_samples, seed, 0);
        check_unit_acks(&epoch_set, &units, acks).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}
