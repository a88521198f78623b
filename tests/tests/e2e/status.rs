//! The operator commands against a real coordinator on etcd: `tributary
//! status --watch` redrawing in a real terminal (tmux), ended by Ctrl-C,
//! and `tributary job list|delete`.

use std::process::{Command, Output};
use std::time::Duration;

use tonic::transport::Channel;
use tributary_common::proto::v1::{self, coordinator_client::CoordinatorClient};
use tributary_tests::cli::{tributary, tributary_bin, tributary_ok, Scratch};
use tributary_tests::cluster::coordinator_with;
use tributary_tests::coordinator::{create_request, job_config, leader_client, named_join};
use tributary_tests::dataset::tiny_dataset;
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::{free_port, wait_until};

/// No S3 here: the dataset is a local directory.
const NO_S3: &str = "http://127.0.0.1:9";
/// How long a frame may take to show what a test waits for.
const FRAME_DEADLINE: Duration = Duration::from_secs(20);
/// The terminal's size.
const COLUMNS: usize = 120;
const ROWS: usize = 40;

/// etcd, a coordinator on it that leads, a dataset for its jobs; the
/// coordinator's address and a client.
struct Bed {
    etcd: EtcdServer,
    _coordinator: Proc,
    _scratch: Scratch,
    address: String,
    url: String,
    runtime: tokio::runtime::Runtime,
    client: CoordinatorClient<Channel>,
}

impl Bed {
    fn start() -> Self {
        let etcd = EtcdServer::start();
        let (coordinator, address) = coordinator_with(&[etcd.endpoint()], NO_S3, &[]);
        let scratch = Scratch::new();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (url, client) = runtime.block_on(async {
            let url = tiny_dataset(scratch.root(), 64, 16).await;
            (url, leader_client(&address).await)
        });
        Self {
            etcd,
            _coordinator: coordinator,
            _scratch: scratch,
            address,
            url,
            runtime,
            client,
        }
    }

    /// Creates the dynamic job `job`.
    fn create(&mut self, job: &str) {
        let config = job_config(&self.url, v1::Mode::Dynamic);
        self.runtime
            .block_on(self.client.create_job(create_request(job, config)))
            .expect("create");
    }

    /// Joins `job` as `name`, leases two units and acks one: the member
    /// has samples and a unit in flight.
    fn join_and_ack(&mut self, job: &str, name: &str) {
        let client = &mut self.client;
        self.runtime.block_on(async {
            let joined = client
                .join(named_join(job, name, ""))
                .await
                .expect("join")
                .into_inner();
            let units = client
                .acquire(v1::AcquireRequest {
                    job: job.into(),
                    member: joined.member.clone(),
                    max_units: 2,
                    wait_ms: 0,
                    secret: joined.secret.clone(),
                })
                .await
                .expect("acquire")
                .into_inner()
                .units;
            assert_eq!(units.len(), 2, "two units leased");
            client
                .report(v1::ReportRequest {
                    job: job.into(),
                    member: joined.member.clone(),
                    acked: vec![v1::UnitRef {
                        epoch: units[0].epoch,
                        id: units[0].id,
                    }],
                    secret: joined.secret.clone(),
                    ..v1::ReportRequest::default()
                })
                .await
                .expect("report");
        });
    }
}

/// A tmux server of this test's own (its own socket), killed on drop.
struct Tmux {
    socket: String,
    session: &'static str,
}

impl Tmux {
    /// tmux, if it is installed.
    fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// A detached session of `COLUMNS`x`ROWS` running `argv`.
    fn start(argv: &[&str]) -> Self {
        let tmux = Self {
            socket: format!("tributary-status-{}", std::process::id()),
            session: "watch",
        };
        let size = (COLUMNS.to_string(), ROWS.to_string());
        let mut args = vec![
            "new-session",
            "-d",
            "-s",
            tmux.session,
            "-x",
            &size.0,
            "-y",
            &size.1,
        ];
        args.extend(argv);
        // The terminal's own size, not one the environment fixes.
        let output = tmux
            .command(&args)
            .env_remove("COLUMNS")
            .env_remove("LINES")
            .output();
        let output = output.expect("run tmux");
        assert!(
            output.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        tmux
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]).args(args);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run tmux")
    }

    /// The pane's text as shown (tmux renders the escapes away).
    fn capture(&self) -> String {
        let output = self.run(&["capture-pane", "-p", "-t", self.session]);
        assert!(output.status.success(), "tmux capture-pane failed");
        String::from_utf8(output.stdout).expect("utf-8 pane")
    }

    /// Whether the pane's cursor is shown.
    fn cursor_shown(&self) -> bool {
        let output = self.run(&[
            "display-message",
            "-p",
            "-t",
            self.session,
            "#{cursor_flag}",
        ]);
        String::from_utf8_lossy(&output.stdout).trim() == "1"
    }

    /// Polls the pane until `ready` holds; returns that capture.
    fn wait_for(&self, what: &str, mut ready: impl FnMut(&str) -> bool) -> String {
        let mut pane = String::new();
        wait_until(what, FRAME_DEADLINE, || {
            pane = self.capture();
            ready(&pane)
        });
        pane
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Checks a captured frame: no line wider than the terminal, no escape
/// shown as text, one frame (drawn in place, not appended).
fn assert_frame(pane: &str) {
    for line in pane.lines() {
        assert!(
            line.chars().count() <= COLUMNS,
            "a line wider than the terminal: {line:?}"
        );
    }
    for garbage in ["\x1b", "[H", "[K", "[J", "[?25"] {
        assert!(!pane.contains(garbage), "escape {garbage:?} shown:\n{pane}");
    }
    assert_eq!(
        pane.matches("coordinator ").count(),
        1,
        "one frame:\n{pane}"
    );
}

/// `args` and `--coordinator ADDRESS`.
fn on<'a>(address: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut args = args.to_vec();
    args.extend(["--coordinator", address]);
    args
}

/// The line of `pane` that names `member`.
fn member_line(pane: &str, member: &str) -> Option<String> {
    pane.lines()
        .find(|line| line.trim_start().starts_with(member))
        .map(str::to_owned)
}

#[test]
fn status_watch_redraws_in_a_terminal_and_ends_on_ctrl_c() {
    if !Tmux::available() {
        eprintln!("skipped: tmux is not installed (scripts/setup.sh installs it)");
        return;
    }
    let mut bed = Bed::start();
    bed.create("watched");
    bed.join_and_ack("watched", "m0");

    let bin = tributary_bin();
    let bin = bin.to_str().expect("utf-8 binary path");
    // bash runs the command, then says how it ended; the no-op trap keeps
    // bash itself alive through the Ctrl-C (the child gets the default).
    let script = "trap : INT; \"$0\" status --coordinator \"$1\" --watch --interval 0.2; \
                  echo \"status exited $?\"; exec sleep 600";
    let tmux = Tmux::start(&["bash", "-c", script, bin, &bed.address]);

    let leader = format!("leader {}", bed.address);
    let first = tmux.wait_for("a frame with the job, its member and the leader", |pane| {
        pane.contains("job watched  dynamic  epoch 0 of 2  units 1/8 acked, 1 leased  1 member")
            && member_line(pane, "m0").is_some_and(|row| row.contains(" ago"))
            && pane.contains(&leader)
    });
    assert_frame(&first);
    let row = member_line(&first, "m0").expect("member row");
    assert_eq!(
        row.split_whitespace().take(5).collect::<Vec<_>>(),
        ["m0", "-", "8", "0.0", "1"],
        "member, rank, samples, samples/s, leased: {row:?}"
    );
    assert!(!tmux.cursor_shown(), "the cursor is hidden while watching");

    // Redrawn: the member's row changes (its last call recedes), and a job
    // created now appears, its heading (a long name) cut to the width.
    let header = first.lines().next().expect("header").to_owned();
    tmux.wait_for("the member's row to be redrawn", |pane| {
        member_line(pane, "m0").is_some_and(|line| line != row)
    });
    let long = format!("second-{}", "z".repeat(121));
    bed.create(&long);
    let later = tmux.wait_for("the second job", |pane| {
        pane.contains("job second-zzz") && pane.contains("2 jobs")
    });
    assert_frame(&later);
    assert_ne!(later.lines().next(), Some(header.as_str()));
    let heading = later
        .lines()
        .find(|line| line.starts_with("job second-"))
        .expect("the second job's heading");
    assert_eq!(
        heading,
        format!("job {}", &long[..COLUMNS - 4]),
        "cut to the width"
    );

    tmux.run(&["send-keys", "-t", tmux.session, "C-c"]);
    let ended = tmux.wait_for("status to exit after Ctrl-C", |pane| {
        pane.contains("status exited")
    });
    assert!(ended.contains("status exited 0"), "{ended}");
    assert!(tmux.cursor_shown(), "the cursor is shown again");
}

#[test]
fn jobs_are_listed_and_a_deleted_one_is_gone() {
    let mut bed = Bed::start();
    bed.create("keep");
    bed.create("gone");
    bed.join_and_ack("gone", "m0");
    let address = bed.address.clone();
    let with = |args: &[&'static str]| on(&address, args);

    let list = tributary_ok(&with(&["job", "list"]), &[]);
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["JOB", "MODE", "EPOCH", "MEMBERS", "LEASED", "STATE"]
    );
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["gone", "dynamic", "0", "of", "2", "1", "1", "running"]
    );
    assert!(lines[2].starts_with("keep "), "{list}");

    let json = tributary_ok(&with(&["status", "--output", "json"]), &[]);
    let value: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(value["leader"], bed.address.as_str());
    assert_eq!(value["jobs"][0]["job"], "gone");
    assert_eq!(value["jobs"][0]["members"][0]["member"], "m0");
    assert_eq!(value["jobs"][0]["members"][0]["samples"], 8);

    let deleted = tributary_ok(&with(&["job", "delete", "gone"]), &[]);
    assert_eq!(
        deleted.trim(),
        format!(
            "deleted job gone (dynamic, epoch 0 of 2, 1 member, running) on the coordinator at {}",
            bed.address
        )
    );

    let missing = format!("no job \"gone\" on the coordinator at {}", bed.address);
    for args in [
        with(&["status", "--job", "gone"]),
        with(&["job", "delete", "gone"]),
    ] {
        let output = tributary(&args, &[]);
        assert!(!output.status.success(), "tributary {args:?} succeeded");
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The leader that deleted it remembers: "job "gone" was deleted".
        assert!(
            stderr
                .trim()
                .starts_with(&format!("error: {missing}: job \"gone\" was deleted")),
            "{args:?}: {stderr}"
        );
    }
    let list = tributary_ok(&with(&["job", "list", "--output", "json"]), &[]);
    let value: serde_json::Value = serde_json::from_str(&list).expect("json");
    let names: Vec<&str> = value["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["job"].as_str())
        .collect();
    assert_eq!(names, ["keep"]);
    let text = tributary_ok(&with(&["status"]), &[]);
    assert!(
        text.contains("job keep") && !text.contains("job gone"),
        "{text}"
    );

    // Asked through a follower, the answer comes from the leader.
    let (_follower, follower) = coordinator_with(&[bed.etcd.endpoint()], NO_S3, &[]);
    let text = tributary_ok(&on(&follower, &["status", "--job", "keep"]), &[]);
    assert!(
        text.starts_with(&format!(
            "coordinator {follower}  leader {}  1 job",
            bed.address
        )) && text.contains("job keep  dynamic"),
        "{text}"
    );

    // Nobody listening: one line naming the address, soon.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let output = tributary(
        &["status", "--coordinator", &nowhere, "--timeout", "1"],
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(&format!("error: cannot reach the coordinator at {nowhere}"))
            && stderr.lines().count() == 1,
        "{stderr}"
    );
}
