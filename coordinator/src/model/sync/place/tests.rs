//! Data-parallel groups: a generation plans over groups, every peer of a
//! group reads the group's part, and every rank of every group counts for
//! the job's commit and its end.

use tributary_common::identity::DataParallel;
use tributary_common::ids::Generation;
use tributary_common::invariants::{check_epoch_commits, EpochRemainder};
use tributary_common::plan::generation::emitted;
use tributary_common::plan::shuffle::ShuffleSpec;
use tributary_common::plan::span::{Span, SpanSet};

use super::super::resume::tests::{point, Job};
use crate::error::CoordError;
use crate::model::Identity;

/// Rank `rank` of a torchrun world of `world` ranks in restart `restart`,
/// in data-parallel group `dp` of `dp_size` (tensor-parallel peers are
/// neighbours: group `rank / (world / dp_size)`), or without groups.
fn rank(rank: u32, world: u32, restart: u64, dp_size: Option<u32>) -> Identity {
    Identity::Torchrun {
        rank,
        world,
        run_id: "run".into(),
        restart,
        dp: dp_size.map(|size| DataParallel {
            rank: rank / (world / size),
            size,
        }),
    }
}

/// The 32 samples of the test dataset (two shards of 16).
fn epoch() -> SpanSet {
    SpanSet::new([Span::new(0, 0, 16), Span::new(1, 0, 16)])
}

#[test]
fn data_parallel_peers_get_identical_parts_and_groups_disjoint_ones_covering_the_epoch() {
    let mut job = Job::new();
    // TP=2, DP=2: ranks 0 and 1 are group 0, ranks 2 and 3 group 1.
    let ranks: Vec<Identity> = (0..4).map(|r| rank(r, 4, 0, Some(2))).collect();
    for who in &ranks {
        let gen = job.join(who, None).expect("join");
        assert_eq!(gen.record.generation, Generation(0), "one generation");
        assert_eq!(gen.record.world, 2, "planned over the 2 groups");
        assert_eq!(gen.ranks(), 4, "of 4 ranks");
    }
    let parts: Vec<_> = ranks.iter().map(|who| job.assignment(who, 0)).collect();
    for (r, part) in parts.iter().enumerate() {
        assert_eq!((part.rank, part.world), (r as u32 / 2, 2), "rank {r}");
    }
    assert_eq!(parts[0].spans, parts[1].spans, "group 0's peers");
    assert_eq!(parts[2].spans, parts[3].spans, "group 1's peers");
    assert!(
        parts[0].spans.subtract(&parts[2].spans) == parts[0].spans,
        "the groups' parts are disjoint"
    );
    let read = parts[0].spans.samples().chain(parts[2].spans.samples());
    let nothing_dropped = EpochRemainder::Dropped {
        tail: SpanSet::default(),
        world: 2,
    };
    check_epoch_commits(&epoch(), read, &nothing_dropped).expect("every sample once");
}

#[test]
fn a_join_with_another_dp_size_is_refused_naming_both_values() {
    let mut job = Job::new();
    job.join(&rank(0, 4, 0, Some(2)), None).expect("join");
    for (who, gives) in [
        (rank(1, 4, 0, Some(4)), "gives dp_size 4"),
        (rank(1, 4, 0, Some(1)), "gives dp_size 1"),
        // No data_parallel: every rank is a group (dp_size 4).
        (rank(2, 4, 0, None), "gives dp_size 4"),
    ] {
        let error = job.join(&who, None).expect_err(gives);
        let text = error.to_string();
        assert!(matches!(error, CoordError::Precondition(_)), "{text}");
        assert!(
            text.contains(gives) && text.contains("plans over dp_size 2"),
            "{text}"
        );
    }
    // A peer that agrees joins the same generation.
    let gen = job.join(&rank(1, 4, 0, Some(2)), None).expect("a peer");
    assert_eq!(gen.record.generation, Generation(0));
}

#[test]
fn a_data_parallel_coordinate_outside_its_world_is_refused_naming_the_field() {
    let mut job = Job::new();
    let outside = Identity::Torchrun {
        rank: 0,
        world: 4,
        run_id: "run".into(),
        restart: 0,
        dp: Some(DataParallel { rank: 0, size: 3 }),
    };
    let error = job.join(&outside, None).expect_err("3 groups of 4 ranks");
    assert!(
        error
            .to_string()
            .contains("world_size 4 is not a multiple of dp_size 3"),
        "{error}"
    );
    assert_eq!(job.model.generations(), 0, "nothing planned");
}

#[test]
fn the_job_commit_waits_for_every_peer_of_every_group() {
    let mut job = Job::new();
    let ranks: Vec<Identity> = (0..4).map(|r| rank(r, 4, 0, Some(2))).collect();
    for who in &ranks {
        job.join(who, None).expect("join");
    }
    for who in &ranks[..3] {
        job.commit(who, point(0, 6));
    }
    assert_eq!(
        job.committed(),
        None,
        "rank 3 (group 1's second peer) has not"
    );
    job.commit(&ranks[3], point(0, 4));
    assert_eq!(
        job.committed(),
        Some(point(0, 4)),
        "a group's progress is its slowest peer's"
    );
    let past = job.model.commit(
        &job.name,
        &job.spec,
        &job.dataset,
        &ranks[0],
        Generation(0),
        17,
    );
    assert!(
        matches!(past, Err(CoordError::Invalid(ref m)) if m.contains("16 samples per rank")),
        "a group's part is 16 samples: {past:?}"
    );
}

#[test]
fn the_last_epoch_ends_once_every_peer_of_every_group_read_its_part() {
    let mut job = Job::new();
    let ranks: Vec<Identity> = (0..4).map(|r| rank(r, 4, 0, Some(2))).collect();
    for who in &ranks {
        job.join(who, None).expect("join");
    }
    job.read_through(&ranks);
    let gens: Vec<u64> = ranks
        .iter()
        .map(|who| job.assignment(who, 1).generation)
        .collect();
    assert!(
        gens.iter().all(|g| *g == gens[0]),
        "one generation: {gens:?}"
    );
    let gen = Generation(gens[0]);
    for (i, who) in ranks.iter().enumerate() {
        assert!(
            !job.model.finished,
            "before rank {i} reported its whole part"
        );
        job.model
            .report(&job.name, &job.spec, &job.dataset, who, gen, 16)
            .expect("report");
    }
    assert!(
        job.model.finished,
        "every peer of both groups read its part"
    );
}

#[test]
fn a_restart_with_fewer_groups_resumes_every_sample_once() {
    let mut job = Job::new();
    // TP=2, DP=2; every rank commits 5 samples of its group's part.
    let ranks: Vec<Identity> = (0..4).map(|r| rank(r, 4, 0, Some(2))).collect();
    for who in &ranks {
        job.join(who, None).expect("join");
    }
    let parts: Vec<SpanSet> = [0, 2].map(|r| job.assignment(&ranks[r], 0).spans).into();
    for who in &ranks {
        job.commit(who, point(0, 5));
    }
    assert_eq!(job.committed(), Some(point(0, 5)));
    // A node is lost with group 1: torchrun restarts the 2 ranks left,
    // TP=2, DP=1.
    let left: Vec<Identity> = (0..2).map(|r| rank(r, 2, 1, Some(1))).collect();
    let gen = job.join(&left[0], None).expect("restart");
    assert_eq!(gen.record.from, Some(point(0, 5)));
    assert_eq!((gen.record.world, gen.ranks()), (1, 2));
    assert_eq!(job.join(&left[1], None).expect("peer"), gen);
    let rest = job.assignment(&left[0], 0);
    assert_eq!(rest.spans, job.assignment(&left[1], 0).spans, "peers");
    assert_eq!(rest.epoch, 0);
    // What the two groups emitted by the commit, and the rest: the epoch.
    let spec = ShuffleSpec::new(job.spec.shuffle_buffer as usize);
    let seed = job.spec.seed;
    let before: Vec<SpanSet> = (0..2)
        .map(|g| emitted(&parts[g], 5, seed, 0, 0, g as u64, spec))
        .collect();
    let read = before
        .iter()
        .flat_map(SpanSet::samples)
        .chain(rest.spans.samples());
    let nothing_dropped = EpochRemainder::Dropped {
        tail: SpanSet::default(),
        world: 1,
    };
    check_epoch_commits(&epoch(), read, &nothing_dropped).expect("every sample once");
    // The new generation's commit is its 2 ranks'.
    job.commit(&left[0], point(gen.record.generation.0, 3));
    assert_eq!(job.committed(), Some(point(0, 5)));
    job.commit(&left[1], point(gen.record.generation.0, 3));
    assert_eq!(job.committed(), Some(point(gen.record.generation.0, 3)));
}
