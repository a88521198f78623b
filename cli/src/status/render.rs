//! What `tributary status` shows, as plain functions of a [`Frame`]: text
//! lines for people, fitted to a width, and a JSON object for programs. No
//! I/O and no clock: the frame carries the time it was taken.

use serde_json::{json, Value};
use tributary_common::proto::v1;

/// One refresh: every job shown, as the leader answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The address the command was given.
    pub coordinator: String,
    /// The leader that answered (empty when no job said).
    pub leader: String,
    /// When the frame was taken, in milliseconds since the Unix epoch.
    pub now_ms: u64,
    pub jobs: Vec<Job>,
}

/// One job of a frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub name: String,
    pub mode: v1::Mode,
    pub epochs: u64,
    /// The leader is still loading it from its store: `status` is empty.
    pub loading: bool,
    pub status: v1::JobStatus,
}

fn mode_name(mode: v1::Mode) -> &'static str {
    match mode {
        v1::Mode::Sync => "sync",
        v1::Mode::Dynamic => "dynamic",
        v1::Mode::Unspecified => "unknown",
    }
}

/// A duration in milliseconds, short: `0.4s`, `3m07s`, `2h05m`.
/// The width of a column holding `names`, at least `least`.
pub fn widest<'a>(names: impl Iterator<Item = &'a str>, least: usize) -> usize {
    names
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(least)
}

pub fn ago(ms: u64) -> String {
    let seconds = ms / 1000;
    if seconds < 60 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if seconds < 3600 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{}h{:02}m", seconds / 3600, seconds / 60 % 60)
    }
}

/// The job's state in a few words: running, finished (and when), failed
/// (and why), loading.
fn state(job: &Job, now_ms: u64) -> String {
    let status = &job.status;
    if job.loading {
        "loading".to_owned()
    } else if !status.failed.is_empty() {
        format!("failed: {}", status.failed)
    } else if status.finished && status.finished_at_ms > 0 {
        let ms = now_ms.saturating_sub(status.finished_at_ms);
        format!("finished {} ago", ago(ms))
    } else if status.finished {
        "finished".to_owned()
    } else {
        "running".to_owned()
    }
}

/// The epoch, counted from 0 as in `--json` ([`crate::remote::epoch_phrase`]).
fn epoch(job: &Job) -> String {
    crate::remote::epoch_phrase(job.status.epoch, job.epochs, true)
}

/// The job's heading line.
fn heading(job: &Job, now_ms: u64) -> String {
    let status = &job.status;
    let mut parts = vec![format!("job {}", job.name), mode_name(job.mode).to_owned()];
    if !job.loading && status.failed.is_empty() {
        parts.push(epoch(job));
        match job.mode {
            v1::Mode::Sync => {
                parts.push(match status.generation {
                    Some(g) => format!("generation {g}"),
                    None => "no generation yet".to_owned(),
                });
                if let Some(g) = status.commit_generation {
                    parts.push(format!(
                        "committed {} samples of generation {g}",
                        status.commit_samples
                    ));
                }
            }
            v1::Mode::Dynamic | v1::Mode::Unspecified => parts.push(format!(
                "units {}/{} acked, {} leased",
                status.acked_units, status.total_units, status.leased_units
            )),
        }
        let members = status.member_status.len();
        parts.push(format!(
            "{members} member{}",
            if members == 1 { "" } else { "s" }
        ));
    }
    parts.push(state(job, now_ms));
    parts.join("  ")
}

/// The member table of a job, indented under its heading.
fn members(job: &Job) -> Vec<String> {
    let status = &job.status;
    if status.member_status.is_empty() {
        return Vec::new();
    }
    let dynamic = job.mode == v1::Mode::Dynamic;
    let name_width = widest(status.member_status.iter().map(|m| m.member.as_str()), 6);
    let row = |name: &str, rank: &str, samples: &str, rate: &str, leased: &str, seen: &str| {
        let leased = if dynamic {
            format!("  {leased:>6}")
        } else {
            String::new()
        };
        format!("  {name:<name_width$}  {rank:>7}  {samples:>10}  {rate:>10}{leased}  {seen}")
    };
    let mut lines = vec![row(
        "MEMBER",
        "RANK",
        "SAMPLES",
        "SAMPLES/S",
        "LEASED",
        "LAST SEEN",
    )];
    for m in &status.member_status {
        let rank = m
            .rank
            .map_or("-".to_owned(), |r| format!("{r}/{}", m.world));
        let seen = m
            .last_seen_ms
            .map_or("not since this leader".to_owned(), |ms| {
                format!("{} ago", ago(ms))
            });
        lines.push(row(
            &m.member,
            &rank,
            &m.samples.to_string(),
            &format!("{:.1}", m.samples_per_second),
            &m.leased_units.to_string(),
            &seen,
        ));
    }
    lines
}

/// The frame as text lines: a header naming the coordinator, the leader,
/// the number of jobs and the time; then each job and its members.
pub fn lines(frame: &Frame) -> Vec<String> {
    let leader = if frame.leader.is_empty() {
        "unknown"
    } else {
        &frame.leader
    };
    let count = frame.jobs.len();
    let mut lines = vec![format!(
        "coordinator {}  leader {leader}  {count} job{}  {}",
        frame.coordinator,
        if count == 1 { "" } else { "s" },
        crate::remote::clock(frame.now_ms)
    )];
    if frame.jobs.is_empty() {
        lines.push("no jobs".to_owned());
    }
    for job in &frame.jobs {
        lines.push(String::new());
        lines.push(heading(job, frame.now_ms));
        lines.extend(members(job));
    }
    lines
}

/// `lines` cut to `width` characters each.
pub fn fit(lines: Vec<String>, width: usize) -> Vec<String> {
    lines
        .into_iter()
        .map(|line| match line.char_indices().nth(width) {
            Some((end, _)) => line[..end].to_owned(),
            None => line,
        })
        .collect()
}

/// The frame as one JSON object. Epochs are counted from 0, as the
/// coordinator does; times are milliseconds.
pub fn json(frame: &Frame) -> Value {
    let jobs: Vec<Value> = frame
        .jobs
        .iter()
        .map(|job| {
            let s = &job.status;
            let members: Vec<Value> = s
                .member_status
                .iter()
                .map(|m| {
                    json!({
                        "member": m.member,
                        "rank": m.rank,
                        "world": m.rank.map(|_| m.world),
                        "samples": m.samples,
                        "samples_per_second": m.samples_per_second,
                        "last_seen_ms": m.last_seen_ms,
                        "leased_units": m.leased_units,
                    })
                })
                .collect();
            json!({
                "job": job.name,
                "mode": mode_name(job.mode),
                "loading": job.loading,
                "epoch": s.epoch,
                "epochs": (job.epochs > 0).then_some(job.epochs), // null: unbounded
                "generation": s.generation,
                "commit_generation": s.commit_generation,
                "commit_samples": s.commit_samples,
                "acked_units": s.acked_units,
                "total_units": s.total_units,
                "leased_units": s.leased_units,
                "finished": s.finished,
                "finished_at_ms": (s.finished_at_ms > 0).then_some(s.finished_at_ms),
                "failed": (!s.failed.is_empty()).then_some(&s.failed),
                "members": members,
            })
        })
        .collect();
    json!({
        "coordinator": frame.coordinator,
        "leader": frame.leader,
        "time_ms": frame.now_ms,
        "jobs": jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str, samples: u64, rate: f64, seen: Option<u64>) -> v1::MemberStatus {
        v1::MemberStatus {
            member: name.into(),
            samples,
            samples_per_second: rate,
            last_seen_ms: seen,
            leased_units: 2,
            ..v1::MemberStatus::default()
        }
    }

    fn frame() -> Frame {
        let dynamic = Job {
            name: "train".into(),
            mode: v1::Mode::Dynamic,
            epochs: 2,
            loading: false,
            status: v1::JobStatus {
                epoch: 0,
                acked_units: 3,
                total_units: 16,
                leased_units: 4,
                leader: "10.0.0.1:7070".into(),
                member_status: vec![
                    member("worker-a", 96, 120.54, Some(400)),
                    member("b", 0, 0.0, None),
                ],
                ..v1::JobStatus::default()
            },
        };
        let sync = Job {
            name: "pretrain".into(),
            mode: v1::Mode::Sync,
            epochs: 3,
            loading: false,
            status: v1::JobStatus {
                epoch: 3,
                generation: Some(2),
                commit_generation: Some(1),
                commit_samples: 512,
                finished: true,
                finished_at_ms: 3_600_000 - 125_000,
                member_status: vec![v1::MemberStatus {
                    member: "run.0".into(),
                    rank: Some(0),
                    world: 4,
                    samples: 512,
                    samples_per_second: 200.0,
                    last_seen_ms: Some(61_000),
                    leased_units: 0,
                }],
                ..v1::JobStatus::default()
            },
        };
        let failed = Job {
            name: "broken".into(),
            mode: v1::Mode::Unspecified,
            epochs: 0,
            loading: false,
            status: v1::JobStatus {
                failed: "the manifest changed".into(),
                ..v1::JobStatus::default()
            },
        };
        Frame {
            coordinator: "coord:7070".into(),
            leader: "10.0.0.1:7070".into(),
            now_ms: 3_600_000,
            jobs: vec![dynamic, sync, failed],
        }
    }

    #[test]
    fn a_frame_shows_each_job_its_members_and_the_leader() {
        let expected = [
            "coordinator coord:7070  leader 10.0.0.1:7070  3 jobs  01:00:00 UTC",
            "",
            "job train  dynamic  epoch 0 of 2  units 3/16 acked, 4 leased  2 members  running",
            "  MEMBER       RANK     SAMPLES   SAMPLES/S  LEASED  LAST SEEN",
            "  worker-a        -          96       120.5       2  0.4s ago",
            "  b               -           0         0.0       2  not since this leader",
            "",
            "job pretrain  sync  3 epochs read  generation 2  committed 512 samples of generation 1  \
             1 member  finished 2m05s ago",
            "  MEMBER     RANK     SAMPLES   SAMPLES/S  LAST SEEN",
            "  run.0       0/4         512       200.0  1m01s ago",
            "",
            "job broken  unknown  failed: the manifest changed",
        ];
        assert_eq!(lines(&frame()), expected);
    }

    #[test]
    fn lines_are_cut_to_the_width_and_short_ones_are_kept() {
        let fitted = fit(lines(&frame()), 40);
        assert!(
            fitted.iter().all(|l| l.chars().count() <= 40),
            "{fitted:#?}"
        );
        assert_eq!(fitted[2], "job train  dynamic  epoch 0 of 2  units ");
        assert_eq!(fitted[1], "");
        // Characters, not bytes: a multi-byte name is cut between characters.
        assert_eq!(fit(vec!["jöb ünits".into()], 4), ["jöb "]);
    }

    #[test]
    fn no_jobs_say_so() {
        let empty = Frame {
            jobs: Vec::new(),
            leader: String::new(),
            ..frame()
        };
        assert_eq!(
            lines(&empty),
            [
                "coordinator coord:7070  leader unknown  0 jobs  01:00:00 UTC",
                "no jobs"
            ]
        );
    }

    #[test]
    fn json_keeps_the_coordinators_numbers() {
        let value = json(&frame());
        assert_eq!(value["leader"], "10.0.0.1:7070");
        let train = &value["jobs"][0];
        assert_eq!(
            (&train["mode"], &train["epoch"], &train["acked_units"]),
            (&json!("dynamic"), &json!(0), &json!(3))
        );
        assert_eq!(train["members"][0]["last_seen_ms"], 400);
        assert_eq!(train["members"][1]["last_seen_ms"], Value::Null);
        assert_eq!(value["jobs"][1]["members"][0]["world"], 4);
        assert_eq!(value["jobs"][2]["failed"], "the manifest changed");
    }

    #[test]
    fn status_counts_epochs_from_0_in_text_as_in_json() {
        let frame = frame();
        let text = lines(&frame);
        let value = json(&frame);
        // The first of two epochs: 0 in both.
        assert_eq!(value["jobs"][0]["epoch"], 0);
        assert!(text[2].contains("epoch 0 of 2"), "{}", text[2]);
        // Every epoch read: the JSON's epoch is the count, the text says so.
        assert_eq!(value["jobs"][1]["epoch"], 3);
        assert!(text[7].contains("3 epochs read"), "{}", text[7]);
        assert_eq!(
            crate::remote::epoch_phrase(5, 0, true),
            "epoch 5 of unbounded"
        );
        assert_eq!(crate::remote::epoch_phrase(1, 1, true), "1 epoch read");
        assert_eq!(crate::remote::epoch_phrase(1, 3, false), "1 of 3");
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(ago(400), "0.4s");
        assert_eq!(ago(187_000), "3m07s");
        assert_eq!(ago(7_500_000), "2h05m");
    }
}
