//! The group's commit over its ranks, and resumes from checkpoints; the
//! harness (a sync model and its job) the other sync tests use too.

use tributary_common::ids::{Epoch, Generation, JobId};
use tributary_common::job::JobSpec;
use tributary_common::plan::generation::CommitPoint;
use tributary_common::proto::v1;

use super::super::{Assignment, SyncModel};
use super::Resume;
use crate::error::CoordError;
use crate::model::{Dataset, GenMeta, Identity};
use crate::store::Op;

pub(in crate::model::sync) fn spec() -> JobSpec {
    crate::config::job_spec(Some(v1::JobConfig {
        manifest_url: "memory:///ds".into(),
        batch_size: 4,
        epochs: 2,
        shuffle_buffer: 8,
        mode: v1::Mode::Sync as i32,
        ..v1::JobConfig::default()
    }))
    .expect("config")
}

pub(in crate::model::sync) fn dataset() -> Dataset {
    Dataset::single(vec![16, 16])
}

fn rank(rank: u32, world: u32, restart: u64) -> Identity {
    Identity::Torchrun {
        rank,
        world,
        run_id: "run".into(),
        restart,
        dp: None,
    }
}

pub(in crate::model::sync) fn point(generation: u64, samples: u64) -> CommitPoint {
    CommitPoint {
        generation: Generation(generation),
        samples,
    }
}

/// A sync model beside the job it plans.
pub(in crate::model::sync) struct Job {
    pub model: SyncModel,
    pub name: JobId,
    pub spec: JobSpec,
    pub dataset: Dataset,
}

impl Job {
    pub(in crate::model::sync) fn new() -> Self {
        Self {
            model: SyncModel::default(),
            name: JobId::from("job"),
            spec: spec(),
            dataset: dataset(),
        }
    }

    pub(in crate::model::sync) fn join(
        &mut self,
        who: &Identity,
        resume: Option<&Resume>,
    ) -> Result<GenMeta, CoordError> {
        let (gen, _) = self
            .model
            .join(&self.name, &self.spec, &self.dataset, who, resume)?;
        Ok(gen)
    }

    pub(in crate::model::sync) fn commit(&mut self, who: &Identity, at: CommitPoint) -> Vec<Op> {
        self.model
            .commit(
                &self.name,
                &self.spec,
                &self.dataset,
                who,
                at.generation,
                at.samples,
            )
            .expect("commit")
    }

    pub(in crate::model::sync) fn assignment(&mut self, who: &Identity, epoch: u64) -> Assignment {
        self.model
            .assignment(&self.name, &self.spec, &self.dataset, who, Epoch(epoch))
            .expect("assignment")
            .0
    }

    pub(in crate::model::sync) fn report(&mut self, who: &Identity, gen: Generation, samples: u64) {
        self.model
            .report(&self.name, &self.spec, &self.dataset, who, gen, samples)
            .expect("report");
    }

    /// Each of `ranks` reports its whole part of the current generation,
    /// as `for batch in loader` does at the end of an epoch.
    pub(in crate::model::sync) fn read_through(&mut self, ranks: &[Identity]) {
        for who in ranks {
            let part = self.assignment_now(who);
            self.report(who, Generation(part.generation), part.spans.len());
        }
    }

    /// `who`'s part of the current generation's epoch.
    fn assignment_now(&mut self, who: &Identity) -> Assignment {
        let epoch = self.model.current().map_or(0, |g| g.record.epoch.0);
        self.assignment(who, epoch)
    }

    pub(in crate::model::sync) fn committed(&self) -> Option<CommitPoint> {
        self.model.commit
    }

    pub(in crate::model::sync) fn resume(&self, at: CommitPoint) -> Resume {
        Resume {
            point: at,
            history: self.model.history(at.generation.0).expect("history"),
        }
    }
}

#[test]
fn a_commit_while_another_rank_is_dead_and_behind_does_not_move_the_job_commit() {
    let mut job = Job::new();
    let (r0, r1) = (rank(0, 2, 0), rank(1, 2, 0));
    job.join(&r0, None).expect("join");
    job.join(&r1, None).expect("join");
    job.commit(&r0, point(0, 4));
    assert_eq!(job.committed(), None, "rank 1 has not committed");
    job.commit(&r1, point(0, 4));
    assert_eq!(job.committed(), Some(point(0, 4)));
    // Rank 1 dies; rank 0 goes on to the end of its part, committing all
    // along, but cannot open the next epoch without rank 1's part read.
    job.commit(&r0, point(0, 8));
    job.commit(&r0, point(0, 16));
    job.report(&r0, Generation(0), 16);
    let refused = job
        .model
        .assignment(&job.name, &job.spec, &job.dataset, &r0, Epoch(1));
    assert!(
        matches!(&refused, Err(CoordError::EpochUnread(m)) if m.contains("rank 1 reported none")),
        "{refused:?}"
    );
    assert_eq!(job.committed(), Some(point(0, 4)), "held back by rank 1");
    // The restarted group resumes where rank 1 was.
    let gen = job.join(&rank(0, 2, 1), None).expect("restart");
    assert_eq!(gen.record.from, Some(point(0, 4)));
    assert_eq!(gen.record.epoch, Epoch(0));
    // The new incarnation's ranks start over: the base holds until both commit.
    job.join(&rank(1, 2, 1), None).expect("restart");
    job.commit(&rank(0, 2, 1), point(1, 4));
    assert_eq!(job.committed(), Some(point(0, 4)));
    job.commit(&rank(1, 2, 1), point(1, 2));
    assert_eq!(job.committed(), Some(point(1, 2)));
}

#[test]
fn a_restart_without_a_higher_restart_count_resumes_from_the_state_it_loads() {
    let mut job = Job::new();
    let (r0, r1) = (rank(0, 2, 0), rank(1, 2, 0));
    job.join(&r0, None).expect("join");
    job.join(&r1, None).expect("join");
    job.commit(&r0, point(0, 4));
    job.commit(&r1, point(0, 4));
    // A plain re-run: the same identities join generation 0 again, then
    // load the checkpoint.
    assert_eq!(job.join(&r0, None).expect("rejoin").record.generation.0, 0);
    let resume = job.resume(point(0, 4));
    let gen = job.join(&r0, Some(&resume)).expect("resume");
    assert_eq!(gen.record.generation.0, 1);
    assert_eq!(gen.record.from, Some(point(0, 4)));
    assert_eq!(gen.resumed, Some(point(0, 4)));
    // Rank 1 of the same re-run converges on it; so does a rank joining
    // again (a lost lease), with or without the state.
    let again = job.join(&r1, Some(&resume)).expect("resume");
    assert_eq!(again.record.generation.0, 1);
    assert_eq!(
        job.join(&r0, Some(&resume))
            .expect("again")
            .record
            .generation
            .0,
        1
    );
    assert_eq!(
        job.join(&r1, None).expect("lost lease").record.generation.0,
        1
    );
    // The old incarnation's generation is stale for commits.
    let stale = job
        .model
        .commit(&job.name, &job.spec, &job.dataset, &r0, Generation(0), 8);
    assert!(matches!(stale, Err(CoordError::Stale(_))), "{stale:?}");
}

#[test]
fn a_torchrun_restart_then_load_state_dict_opens_one_generation() {
    let mut job = Job::new();
    let r0 = rank(0, 1, 0);
    job.join(&r0, None).expect("join");
    job.commit(&r0, point(0, 12));
    let restarted = rank(0, 1, 1);
    let gen = job.join(&restarted, None).expect("restart");
    assert_eq!(gen.resumed, Some(point(0, 12)));
    let resume = job.resume(point(0, 12));
    let same = job
        .join(&restarted, Some(&resume))
        .expect("load_state_dict");
    assert_eq!(same, gen, "no second generation");
}

#[test]
fn a_state_handed_to_load_state_dict_is_never_accepted_and_ignored() {
    let mut job = Job::new();
    let (r0, r1) = (rank(0, 2, 0), rank(1, 2, 0));
    job.join(&r0, None).expect("join");
    job.join(&r1, None).expect("join");
    job.commit(&r0, point(0, 4));
    job.commit(&r1, point(0, 4));
    job.commit(&r0, point(0, 8));
    // Past the group's commit: rank 1 has not committed that far.
    let past = job.resume(point(0, 8));
    let error = job.join(&r0, Some(&past)).expect_err("past");
    let text = error.to_string();
    assert!(matches!(error, CoordError::Precondition(_)), "{text}");
    assert!(
        text.contains("rank(s) 1 ") && text.contains("commit(state)"),
        "{text}"
    );
    // Older than it: a replay.
    let old = Resume {
        point: point(0, 2),
        history: Vec::new(),
    };
    let error = job.join(&r0, Some(&old)).expect_err("old");
    assert!(matches!(error, CoordError::Stale(_)), "{error}");
    assert!(error.to_string().contains("twice"), "{error}");
    // Nothing changed.
    assert_eq!(job.model.generations(), 1);
    assert_eq!(job.committed(), Some(point(0, 4)));
}

#[test]
fn a_single_process_job_resumes_mid_epoch_on_a_fresh_coordinator() {
    // The first process: commits mid-epoch, then is killed.
    let mut first = Job::new();
    let solo = rank(0, 1, 0);
    first.join(&solo, None).expect("join");
    first.commit(&solo, point(0, 12));
    let resume = first.resume(point(0, 12));
    let expected = {
        first.join(&rank(0, 1, 1), None).expect("restart");
        first.assignment(&rank(0, 1, 1), 0)
    };
    // The re-run: a fresh in-memory job, seeded from the checkpoint alone.
    let mut second = Job::new();
    let joined = second.join(&solo, None).expect("join");
    assert_eq!(joined.record.generation.0, 0);
    let gen = second.join(&solo, Some(&resume)).expect("seeded");
    assert_eq!(gen.record.from, Some(point(0, 12)));
    let got = second.assignment(&solo, 0);
    assert_eq!(
        got.spans, expected.spans,
        "the rest of the epoch, as a restart reads it"
    );
    assert_eq!(got.history.len(), 2);
    assert_eq!(second.committed(), Some(point(0, 12)));
}

#[test]
fn a_hostile_resume_history_is_refused_naming_what_is_wrong() {
    let mut first = Job::new();
    let solo = rank(0, 1, 0);
    first.join(&solo, None).expect("join");
    first.commit(&solo, point(0, 12));
    let good = first.resume(point(0, 12));
    let cases: Vec<(Resume, &str)> = vec![
        (
            Resume {
                point: point(0, 99),
                ..good.clone()
            },
            "exceed",
        ),
        (
            Resume {
                point: point(3, 1),
                ..good.clone()
            },
            "ends at generation 0",
        ),
        (
            Resume {
                history: vec![super::GenerationRecord {
                    world: 0,
                    ..good.history[0]
                }],
                ..good.clone()
            },
            "world of 0",
        ),
        (
            Resume {
                history: vec![super::GenerationRecord {
                    from: Some(point(0, 1)),
                    ..good.history[0]
                }],
                ..good.clone()
            },
            "not the epoch's first",
        ),
    ];
    for (resume, why) in cases {
        let mut fresh = Job::new();
        fresh.join(&solo, None).expect("join");
        let error = fresh.join(&solo, Some(&resume)).expect_err(why);
        assert!(error.to_string().contains(why), "{why}: {error}");
        assert_eq!(fresh.committed(), None);
        assert_eq!(fresh.model.generations(), 1);
    }
}

#[test]
fn each_rank_commit_loads_back() {
    let mut job = Job::new();
    let (r0, r1) = (rank(0, 2, 0), rank(1, 2, 0));
    let (gen, _) = job
        .model
        .join(&job.name, &job.spec, &job.dataset, &r0, None)
        .expect("join");
    job.join(&r1, None).expect("join");
    let ops = job.commit(&r0, point(0, 4));
    let Some(Op::Put { value, .. }) = ops.first() else {
        panic!("{ops:?}");
    };
    let ranks = serde_json::from_slice(value).expect("ranks");
    let mut loaded = SyncModel::load(vec![gen], None, ranks, Default::default()).expect("load");
    assert_eq!(loaded.ranks.len(), 1);
    loaded
        .commit(&job.name, &job.spec, &job.dataset, &r1, Generation(0), 4)
        .expect("commit");
    assert_eq!(loaded.commit, Some(point(0, 4)));
}

#[test]
fn a_late_ranks_state_from_its_own_uncommitted_group_does_not_seed_a_generation_beside_it() {
    // A fresh job: rank 0 reads (and reports) before rank 1 has joined;
    // rank 1 then finds the state rank 0 saved a moment ago and loads it.
    let mut job = Job::new();
    let (r0, r1) = (rank(0, 2, 0), rank(1, 2, 0));
    job.join(&r0, None).expect("join");
    let before = job.model.generations();
    job.model
        .report(&job.name, &job.spec, &job.dataset, &r0, Generation(0), 8)
        .expect("report");
    let state = Resume {
        point: point(0, 8),
        history: job.model.history(0).expect("history"),
    };
    let error = job
        .join(&r1, Some(&state))
        .expect_err("no commit to resume from");
    assert!(matches!(error, CoordError::Precondition(_)), "{error}");
    assert!(
        error.to_string().contains("past the job's commit"),
        "{error}"
    );
    assert_eq!(
        job.model.generations(),
        before,
        "no generation beside the group's"
    );
    // Without the state it joins its group's generation.
    assert_eq!(job.join(&r1, None).expect("join").record.generation.0, 0);
}
