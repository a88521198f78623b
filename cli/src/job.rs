//! `tributary job list` and `tributary job delete NAME`: the jobs the
//! coordinator's leader knows, one line each, and removing one (its keys in
//! the store, its members' leases; its members' next calls fail).
//! `tributary job token NAME`: the credential that reaches one job only,
//! derived from the operator token without calling the coordinator.

use tributary_common::ids::JobId;
use tributary_common::proto::v1;
use tributary_coordinator::auth::{narrow, JobKeys, Scope};
use tributary_worker::coordinated::{AuthToken, Client};

use crate::remote::{self, Output, RemoteArgs};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Every job the leader knows, one line each.
    List {
        #[command(flatten)]
        remote: RemoteArgs,
        /// text, or json (one object).
        #[arg(long, value_enum, default_value_t = Output::Text)]
        output: Output,
    },
    /// Delete a job: its state, its keys in the store, its members' leases.
    Delete {
        /// The job to delete.
        name: String,
        #[command(flatten)]
        remote: RemoteArgs,
    },
    /// Print the credential that reaches job NAME only (its ranks' calls:
    /// create, join, report, commit, status of that job; never another
    /// job, ListJobs or DeleteJob). Derived from the operator token
    /// (TRIBUTARY_AUTH_TOKEN_FILE or TRIBUTARY_AUTH_TOKEN, as the
    /// coordinator's --auth-token-file holds it), offline; hand it to the
    /// job's ranks as their TRIBUTARY_AUTH_TOKEN(_FILE), e.g. in a
    /// Kubernetes Secret of the job's own.
    Token {
        /// The job the credential reaches.
        name: String,
        /// Narrow it to torchrun ranks FIRST-LAST (of any run and restart):
        /// a Join as another rank is refused, so a trainer holding its own
        /// cannot take another's place. Needs the operator token or the
        /// job's credential (an init container that alone mounts the job's
        /// Secret mints its pod's).
        #[arg(long, value_name = "FIRST-LAST", conflicts_with = "member")]
        ranks: Option<String>,
        /// Narrow it to the dynamic member NAME.
        #[arg(long, value_name = "NAME")]
        member: Option<String>,
    },
}

pub async fn run(command: Command) -> anyhow::Result<()> {
    let env = remote::environment();
    match command {
        Command::List { remote, output } => {
            let client = remote.client(&env)?;
            let list = client
                .send(&v1::ListJobsRequest {}, |mut c, r| async move {
                    c.list_jobs(r).await
                })
                .await
                .map_err(|e| remote.explain(e, None))?;
            let now = remote::unix_ms();
            let out = match output {
                Output::Text => table(&list, now).join("\n"),
                Output::Json => json(&list).to_string(),
            };
            println!("{out}");
        }
        Command::Delete { name, remote } => {
            let client = remote.client(&env)?;
            println!("{}", delete(&client, &remote, &name).await?);
        }
        Command::Token {
            name,
            ranks,
            member,
        } => {
            let scope = match (ranks, member) {
                (Some(ranks), _) => Some(scope(&format!("ranks={ranks}"), "--ranks FIRST-LAST")?),
                (_, Some(name)) => Some(scope(&format!("member={name}"), "--member NAME")?),
                (None, None) => None,
            };
            println!("{}", token(&env, &name, scope.as_ref())?)
        }
    }
    Ok(())
}

/// A member credential's scope from `text`, or an error naming `flag`.
fn scope(text: &str, flag: &str) -> anyhow::Result<Scope> {
    Scope::parse(text).ok_or_else(|| {
        anyhow::anyhow!(
            "{flag}: {text:?} is not a scope (ranks as FIRST-LAST with FIRST <= LAST, e.g. \
             --ranks 8-15; a member name of [A-Za-z0-9_.-])"
        )
    })
}

/// The credential of job `name` (narrowed to `scope`, if given) under the
/// token in `env`: the operator token, or (for a scope) the job's own
/// credential.
fn token(
    env: &std::collections::HashMap<String, String>,
    name: &str,
    scope: Option<&Scope>,
) -> anyhow::Result<String> {
    anyhow::ensure!(
        tributary_coordinator::keys::valid_name(name),
        "job name {name:?} must be 1-128 characters of [A-Za-z0-9_.-], not starting with '.'"
    );
    let given = AuthToken::from_env(env)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no token: set TRIBUTARY_AUTH_TOKEN_FILE to the file the coordinator's \
             --auth-token-file names (or TRIBUTARY_AUTH_TOKEN to the token); to narrow a job's \
             credential with --ranks or --member, to that credential"
        )
    })?;
    let (job, secret) = (JobId::from(name), given.secret());
    if secret.starts_with("tj1:") {
        let scope = scope.ok_or_else(|| {
            anyhow::anyhow!(
                "the token given is a job credential: it narrows to --ranks or --member, but \
                 minting a job's credential needs the operator token"
            )
        })?;
        anyhow::ensure!(
            secret.starts_with(&format!("tj1:{name}:")),
            "the job credential given is another job's, not job {name:?}'s"
        );
        return narrow(secret, scope)
            .ok_or_else(|| anyhow::anyhow!("the job credential given does not read as one"));
    }
    let keys = JobKeys::new(secret);
    Ok(scope.map_or_else(|| keys.mint(&job), |s| keys.mint_member(&job, s)))
}

/// Deletes `name`; says what it deleted, as the leader last saw it.
async fn delete(client: &Client, remote: &RemoteArgs, name: &str) -> anyhow::Result<String> {
    let list = client
        .send(&v1::ListJobsRequest {}, |mut c, r| async move {
            c.list_jobs(r).await
        })
        .await
        .map_err(|e| remote.explain(e, None))?;
    let request = v1::JobRequest {
        job: name.to_owned(),
    };
    client
        .send(&request, |mut c, r| async move { c.delete_job(r).await })
        .await
        .map_err(|e| remote.explain(e, Some(name)))?;
    let what = list
        .jobs
        .iter()
        .find(|j| j.job == name)
        .map(|j| format!(" ({})", describe(j, remote::unix_ms())))
        .unwrap_or_default();
    Ok(format!(
        "deleted job {name}{what} on the coordinator at {}",
        if list.leader.is_empty() {
            &remote.coordinator
        } else {
            &list.leader
        }
    ))
}

fn mode(job: &v1::JobSummary) -> &'static str {
    match job.mode() {
        v1::Mode::Sync => "sync",
        v1::Mode::Dynamic => "dynamic",
        v1::Mode::Unspecified => "unknown",
    }
}

/// The job's state: running, loading, finished (when), failed (why).
fn state(job: &v1::JobSummary, now_ms: u64) -> String {
    if job.loading {
        "loading".to_owned()
    } else if !job.failed.is_empty() {
        format!("failed: {}", job.failed)
    } else if job.finished && job.finished_at_ms > 0 {
        let ago = crate::status::ago(now_ms.saturating_sub(job.finished_at_ms));
        format!("finished {ago} ago")
    } else if job.finished {
        "finished".to_owned()
    } else {
        "running".to_owned()
    }
}

/// The epoch, counted from 0 ([`remote::epoch_phrase`]).
fn epoch(job: &v1::JobSummary, word: bool) -> String {
    remote::epoch_phrase(job.epoch, job.epochs, word)
}

/// A job in a few words, for `delete`.
fn describe(job: &v1::JobSummary, now_ms: u64) -> String {
    format!(
        "{}, {}, {} member{}, {}",
        mode(job),
        epoch(job, true),
        job.members,
        if job.members == 1 { "" } else { "s" },
        state(job, now_ms)
    )
}

/// The list as a table with a header row.
fn table(list: &v1::ListJobsResponse, now_ms: u64) -> Vec<String> {
    let mut jobs: Vec<&v1::JobSummary> = list.jobs.iter().collect();
    jobs.sort_by(|a, b| a.job.cmp(&b.job));
    let width = crate::status::render::widest(jobs.iter().map(|j| j.job.as_str()), 3);
    let row = |name: &str, mode: &str, epoch: &str, members: &str, leased: &str, state: &str| {
        format!("{name:<width$}  {mode:<7}  {epoch:>7}  {members:>7}  {leased:>6}  {state}")
    };
    let mut lines = vec![row("JOB", "MODE", "EPOCH", "MEMBERS", "LEASED", "STATE")];
    for job in jobs {
        lines.push(row(
            &job.job,
            mode(job),
            &epoch(job, false),
            &job.members.to_string(),
            &job.leased_units.to_string(),
            &state(job, now_ms),
        ));
    }
    if list.jobs.is_empty() {
        lines.push("no jobs".to_owned());
    }
    lines
}

/// The list as one JSON object; epochs counted from 0, as the coordinator
/// does.
fn json(list: &v1::ListJobsResponse) -> serde_json::Value {
    let jobs: Vec<serde_json::Value> = list
        .jobs
        .iter()
        .map(|j| {
            serde_json::json!({
                "job": j.job,
                "mode": mode(j),
                "epoch": j.epoch,
                "epochs": (j.epochs > 0).then_some(j.epochs), // null: unbounded
                "members": j.members,
                "leased_units": j.leased_units,
                "finished": j.finished,
                "finished_at_ms": (j.finished_at_ms > 0).then_some(j.finished_at_ms),
                "failed": (!j.failed.is_empty()).then_some(&j.failed),
                "loading": j.loading,
            })
        })
        .collect();
    serde_json::json!({ "leader": list.leader, "jobs": jobs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_job_shows_its_epoch_of_unbounded() {
        use crate::remote::epoch_phrase;
        assert_eq!(epoch_phrase(2, 0, true), "epoch 2 of unbounded");
        assert_eq!(epoch_phrase(2, 0, false), "2 of unbounded");
        assert_eq!(epoch_phrase(0, 2, true), "epoch 0 of 2");
        // A finished job says all its epochs were read.
        assert_eq!(epoch_phrase(2, 2, true), "2 epochs read");
    }

    fn list() -> v1::ListJobsResponse {
        v1::ListJobsResponse {
            jobs: vec![
                v1::JobSummary {
                    job: "zeta".into(),
                    mode: v1::Mode::Sync as i32,
                    epoch: 2,
                    epochs: 2,
                    members: 0,
                    finished: true,
                    finished_at_ms: 1_000,
                    ..v1::JobSummary::default()
                },
                v1::JobSummary {
                    job: "a".into(),
                    mode: v1::Mode::Dynamic as i32,
                    epoch: 0,
                    epochs: 3,
                    members: 1,
                    leased_units: 4,
                    ..v1::JobSummary::default()
                },
            ],
            leader: "10.0.0.1:7070".into(),
        }
    }

    #[test]
    fn the_table_lists_jobs_by_name() {
        assert_eq!(
            table(&list(), 31_000),
            [
                "JOB   MODE       EPOCH  MEMBERS  LEASED  STATE",
                "a     dynamic   0 of 3        1       4  running",
                "zeta  sync      2 read        0       0  finished 30.0s ago",
            ]
        );
        assert_eq!(
            describe(&list().jobs[1], 0),
            "dynamic, epoch 0 of 3, 1 member, running"
        );
    }

    #[test]
    fn json_lists_every_job_with_the_leader() {
        let value = json(&list());
        assert_eq!(value["leader"], "10.0.0.1:7070");
        assert_eq!(value["jobs"][0]["job"], "zeta");
        assert_eq!(value["jobs"][0]["finished_at_ms"], 1_000);
        assert_eq!(value["jobs"][1]["failed"], serde_json::Value::Null);
    }
}
