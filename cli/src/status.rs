//! `tributary status`: what the coordinator's leader knows of its jobs
//! (mode, epoch, generation or units, members with their progress), once
//! or refreshed every `--interval` with `--watch`, as text or JSON.
//!
//! - `render.rs`: a [`render::Frame`] as text lines or a JSON object (pure);
//! - `screen.rs`: where frames go (redrawn in place on a terminal).

use std::io::IsTerminal;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use tokio::signal::unix::{signal, SignalKind};
use tributary_common::proto::v1;
use tributary_worker::coordinated::{Client, Code};
use tributary_worker::WorkerError;

use crate::remote::{self, Output, RemoteArgs};

pub(crate) mod render;
mod screen;

pub use render::ago;
use render::{Frame, Job};
use screen::{Screen, SizeOverride};

/// Status calls in flight at once when every job is shown.
const CONCURRENT_CALLS: usize = 8;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Show only this job (default: every job the leader knows).
    #[arg(long)]
    job: Option<String>,
    /// Refresh every --interval until Ctrl-C (in place on a terminal).
    #[arg(long)]
    watch: bool,
    /// Seconds between refreshes with --watch (0.1 to 3600).
    #[arg(long, default_value = "1", value_parser = interval)]
    interval: Duration,
    /// text, or json (one object per line, one per refresh).
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
}

/// Seconds between 0.1 and 3600.
fn interval(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if (0.1..=3600.0).contains(&seconds) {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(format!("{seconds} is not between 0.1 and 3600 seconds"))
    }
}

/// The status of `job`; `Ok(None)` when it does not exist.
async fn job_status(client: &Client, job: &str) -> Result<Option<v1::JobStatus>, WorkerError> {
    let request = v1::JobRequest {
        job: job.to_owned(),
    };
    match client
        .send(&request, |mut c, r| async move { c.get_status(r).await })
        .await
    {
        Ok(status) => Ok(Some(status)),
        Err(WorkerError::Coordinator {
            code: Code::NotFound,
            ..
        }) => Ok(None),
        Err(error) => Err(error),
    }
}

fn job(name: String, summary: Option<&v1::JobSummary>, status: v1::JobStatus) -> Job {
    let (mode, epochs) = match (&status.config, summary) {
        (Some(config), _) => (config.mode(), config.epochs),
        (None, Some(summary)) => (summary.mode(), summary.epochs),
        (None, None) => (v1::Mode::Unspecified, 0),
    };
    Job {
        name,
        mode,
        epochs,
        loading: false,
        status,
    }
}

/// One frame: `only` that job (an error when it does not exist), else
/// every job the leader lists.
async fn fetch(client: &Client, remote: &RemoteArgs, only: Option<&str>) -> anyhow::Result<Frame> {
    let explain = |error, job: Option<&str>| remote.explain(error, job);
    let mut frame = Frame {
        coordinator: remote.coordinator.clone(),
        leader: String::new(),
        now_ms: 0,
        jobs: Vec::new(),
    };
    if let Some(name) = only {
        // A job asked for by name: "no job" (or "it was deleted") is the error.
        let request = v1::JobRequest {
            job: name.to_owned(),
        };
        let status = client
            .send(&request, |mut c, r| async move { c.get_status(r).await })
            .await
            .map_err(|e| explain(e, Some(name)))?;
        frame.leader = status.leader.clone();
        frame.jobs.push(job(name.to_owned(), None, status));
    } else {
        let list = client
            .send(&v1::ListJobsRequest {}, |mut c, r| async move {
                c.list_jobs(r).await
            })
            .await
            .map_err(|e| explain(e, None))?;
        frame.leader = list.leader;
        let jobs: Vec<Option<Job>> = futures::stream::iter(list.jobs)
            .map(|summary| async move {
                if summary.loading {
                    let mut loading = job(
                        summary.job.clone(),
                        Some(&summary),
                        v1::JobStatus::default(),
                    );
                    loading.loading = true;
                    return Ok(Some(loading));
                }
                // A job deleted since the list was taken is left out.
                let status = job_status(client, &summary.job).await?;
                Ok(status.map(|s| job(summary.job.clone(), Some(&summary), s)))
            })
            .buffered(CONCURRENT_CALLS)
            .try_collect()
            .await
            .map_err(|e| explain(e, None))?;
        frame.jobs = jobs.into_iter().flatten().collect();
        frame.jobs.sort_by(|a, b| a.name.cmp(&b.name));
    }
    frame.now_ms = remote::unix_ms();
    Ok(frame)
}

/// Writes `frame` (or the error that took its place).
fn show(
    screen: &mut Screen,
    output: Output,
    coordinator: &str,
    frame: &anyhow::Result<Frame>,
) -> std::io::Result<()> {
    match (frame, output) {
        (Ok(frame), Output::Text) => screen.text(render::lines(frame)),
        (Ok(frame), Output::Json) => screen.line(&render::json(frame).to_string()),
        (Err(error), Output::Text) => {
            let now = remote::unix_ms();
            screen.text(vec![
                format!("coordinator {coordinator}  {}", remote::clock(now)),
                format!("error: {error:#}"),
            ])
        }
        (Err(error), Output::Json) => screen.line(
            &serde_json::json!({
                "coordinator": coordinator,
                "time_ms": remote::unix_ms(),
                "error": format!("{error:#}"),
            })
            .to_string(),
        ),
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let env = remote::environment();
    let client = args.remote.client(&env)?;
    let terminal = std::io::stdout().is_terminal();
    let in_place = args.watch && args.output == Output::Text;
    let mut screen = Screen::new(terminal, in_place, SizeOverride::from_env(&env));
    let only = args.job.as_deref();
    // The first frame must come: a wrong address or job ends the command.
    let mut frame = Ok(fetch(&client, &args.remote, only).await?);
    let coordinator = &args.remote.coordinator;
    // Registered before the first frame hides the cursor: Ctrl-C (or a
    // `kill`) from then on ends the loop, and the screen shows it again.
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut ticks = tokio::time::interval(args.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        match show(&mut screen, args.output, coordinator, &frame) {
            Ok(()) => {}
            // A reader that went away (`| head`) ends the command quietly.
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(error) => return Err(error.into()),
        }
        if !args.watch {
            return Ok(());
        }
        // Later errors are shown and the next refresh tries again.
        frame = tokio::select! {
            _ = interrupt.recv() => return Ok(()),
            _ = terminate.recv() => return Ok(()),
            frame = async {
                ticks.tick().await;
                fetch(&client, &args.remote, only).await
            } => frame,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_is_bounded() {
        assert_eq!(interval("0.2"), Ok(Duration::from_millis(200)));
        assert_eq!(interval("3600"), Ok(Duration::from_secs(3600)));
        assert!(interval("0.01").is_err_and(|e| e.contains("between 0.1 and 3600")));
        assert!(interval("1e9").is_err());
        assert!(interval("NaN").is_err());
        assert!(interval("soon").is_err_and(|e| e.contains("not a number")));
    }
}
