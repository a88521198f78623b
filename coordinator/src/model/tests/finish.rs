//! When a job is finished: a finite sync job once every rank of its last
//! epoch's generation read its whole part (the README's loop never asks for
//! the epoch after the last), an unbounded one never.

use super::*;

/// Joins ranks 0 and 1 of a world of 2; returns their callers.
pub(super) fn two_ranks(job: &mut Job, kv: &mut Kv) -> Vec<Caller> {
    (0..2)
        .map(|r| {
            let member = MemberId::from(format!("run.0.{r}"));
            let (joined, effects) = job.join(
                joiner(rank(r), member.clone(), ""),
                format!("{r}").repeat(32),
                now(),
            );
            kv.apply(&effects);
            Caller {
                member,
                secret: joined.expect("join").secret,
            }
        })
        .collect()
}

/// Each rank takes its part of `epoch` and reports it read to its end, as
/// `for batch in loader` does; returns whether the job was finished before
/// the last report.
fn read_epoch(job: &mut Job, kv: &mut Kv, ranks: &[Caller], epoch: u64) -> bool {
    let mut finished_early = false;
    for (i, caller) in ranks.iter().enumerate() {
        let (part, effects) = job.assignment(caller, Epoch(epoch)).expect("assignment");
        assert!(!part.finished, "epoch {epoch} is not past the end");
        kv.apply(&effects);
        let generation = Generation(part.generation);
        // Halfway first: not the end of anything.
        let (answer, effects) = job.report(caller, generation, part.spans.len() / 2, &[]);
        answer.expect("report");
        kv.apply(&effects);
        finished_early |= job.is_finished();
        let (answer, effects) = job.report(caller, generation, part.spans.len(), &[]);
        answer.expect("report");
        kv.apply(&effects);
        if i + 1 < ranks.len() {
            finished_early |= job.is_finished();
        }
    }
    finished_early
}

#[test]
fn jobs_driven_by_the_readme_loop_finish_once_every_rank_read_the_last_epoch() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    assert_eq!(job.stored.config.epochs, Some(2));
    let ranks = two_ranks(&mut job, &mut kv);
    assert!(!read_epoch(&mut job, &mut kv, &ranks, 0));
    assert!(!job.is_finished(), "epoch 0 of 2 read: not finished");
    assert!(
        !read_epoch(&mut job, &mut kv, &ranks, 1),
        "finished before rank 1 read its part"
    );
    // Nobody asked for epoch 2: the last reports finished the job.
    assert!(job.is_finished());
    assert!(job.status().mode.finished && job.summary().finished);
    // The leader records it, so the retention applies and a new leader
    // loads it finished.
    let op = job.mark_finished(77).expect("recorded");
    kv.apply(&Effects::ops(vec![op]));
    let loaded = kv.load(&job.name).expect("load");
    assert!(loaded.is_finished());
    assert_eq!(loaded.summary().finished_at_ms, 77);
}

#[test]
fn a_report_past_a_ranks_part_is_refused_and_finishes_nothing() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let ranks = two_ranks(&mut job, &mut kv);
    let (part, effects) = job.assignment(&ranks[0], Epoch(0)).expect("assignment");
    kv.apply(&effects);
    let (answer, _) = job.report(
        &ranks[0],
        Generation(part.generation),
        part.spans.len() + 1,
        &[],
    );
    let message = answer.expect_err("past the part").to_string();
    assert!(message.contains("exceeds"), "{message}");
}

#[test]
fn an_unbounded_job_is_never_finished() {
    let mut stored = stored(v1::Mode::Sync);
    stored.config.epochs = None;
    let (mut job, effects) = Job::create(JobId::from("u"), stored, dataset()).expect("create");
    let mut kv = Kv::default();
    kv.apply(&effects);
    let ranks = two_ranks(&mut job, &mut kv);
    for epoch in 0..4 {
        read_epoch(&mut job, &mut kv, &ranks, epoch);
        assert!(!job.is_finished(), "epoch {epoch}");
        assert_eq!(job.summary().epochs, None);
    }
    assert_eq!(job.mark_finished(1), None);

    let mut stored = super::stored(v1::Mode::Dynamic);
    stored.config.epochs = None;
    let (job, _) = Job::create(JobId::from("d"), stored, dataset()).expect("create");
    assert!(!job.is_finished());
}

#[test]
fn a_rank_opens_the_next_epoch_only_once_every_rank_read_this_one_even_after_a_failover() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let ranks = two_ranks(&mut job, &mut kv);
    let (part, effects) = job.assignment(&ranks[0], Epoch(0)).expect("assignment");
    kv.apply(&effects);
    let (generation, whole) = (Generation(part.generation), part.spans.len());
    // Asked again and again without reading (a client with the job's
    // credential), and past the last epoch: refused, nothing opened.
    for epoch in [1, 1, 2] {
        let refused = job.assignment(&ranks[0], Epoch(epoch)).map(|(a, _)| a);
        assert!(
            matches!(
                &refused,
                Err(CoordError::EpochUnread(_)) | Err(CoordError::Precondition(_))
            ),
            "epoch {epoch}: {refused:?}"
        );
    }
    let (answer, effects) = job.report(&ranks[0], generation, whole, &[]);
    answer.expect("report");
    kv.apply(&effects);
    let refused = job.assignment(&ranks[0], Epoch(1)).map(|(a, _)| a);
    let Err(CoordError::EpochUnread(message)) = &refused else {
        panic!("rank 1 has read nothing: {refused:?}");
    };
    assert!(message.contains("rank 1 reported none of its"), "{message}");
    assert_eq!(job.status().mode.generations.len(), 1);
    assert!(!job.is_finished());
    // Rank 1 reads its part; a new leader loads the reports and opens the
    // next epoch for whichever rank asks first.
    let (answer, effects) = job.report(&ranks[1], generation, whole, &[]);
    answer.expect("report");
    kv.apply(&effects);
    let mut loaded = kv.load(&job.name).expect("load");
    let (next, _) = loaded.assignment(&ranks[1], Epoch(1)).expect("next epoch");
    assert_eq!((next.epoch, next.finished), (1, false));
    assert!(next.generation > generation.get());
}

#[test]
fn a_later_smaller_report_puts_a_rank_back_behind() {
    let (mut job, mut kv) = created(v1::Mode::Sync);
    let ranks = two_ranks(&mut job, &mut kv);
    let (part, _) = job.assignment(&ranks[0], Epoch(0)).expect("assignment");
    let (generation, whole) = (Generation(part.generation), part.spans.len());
    for caller in &ranks {
        job.report(caller, generation, whole, &[])
            .0
            .expect("report");
    }
    // Rank 1's trainer took less than its workers read (a DataLoader's
    // main process reports what it handed out): it is behind again.
    job.report(&ranks[1], generation, whole - 1, &[])
        .0
        .expect("report");
    let refused = job.assignment(&ranks[0], Epoch(1)).map(|(a, _)| a);
    assert!(
        matches!(&refused, Err(CoordError::EpochUnread(m)) if m.contains("rank 1 reported")),
        "{refused:?}"
    );
    job.report(&ranks[1], generation, whole, &[])
        .0
        .expect("report");
    let (next, _) = job.assignment(&ranks[0], Epoch(1)).expect("next epoch");
    assert_eq!(next.epoch, 1);
}
