//! What the Kubernetes manifests rely on, against real processes: two
//! coordinator replicas on etcd serving TLS with a certificate for a name
//! (a Service's), the plaintext health port kubelet probes, clients that
//! follow the leader to its advertised IP while verifying that name, and a
//! failover when the leader is killed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tokio::runtime::Runtime;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tributary_common::proto::v1;
use tributary_tests::cli::tributary_bin;
use tributary_tests::etcd::EtcdServer;
use tributary_tests::process::Proc;
use tributary_tests::tls::TestCa;
use tributary_tests::{free_port, wait_until};
use tributary_worker::coordinated::{Client, ClientTls, Code};
use tributary_worker::WorkerError;

const LEADER: &str = "tributary.v1.Coordinator";
const READY: &str = "ready";

/// A CA and a server certificate for `localhost` only (no IP addresses),
/// written as PEM files `tls.crt` and `tls.key` under `dir`; returns the
/// CA's PEM.
fn certificates(dir: &Path) -> Vec<u8> {
    let ca = TestCa::new(dir);
    ca.issue("tls", "localhost", &["localhost"]);
    std::fs::read(&ca.ca).expect("read the ca certificate")
}

/// A TLS replica advertising `127.0.0.1:<port>`, health on its own port.
struct Replica {
    proc: Proc,
    port: u16,
    health: u16,
}

fn replica(etcd: &str, tls: &Path) -> Replica {
    let (port, health) = (free_port(), free_port());
    let mut command = Command::new(tributary_bin());
    command
        .arg("coordinator")
        .env("TRIBUTARY_LISTEN", format!("127.0.0.1:{port}"))
        .env("TRIBUTARY_HEALTH_LISTEN", format!("127.0.0.1:{health}"))
        .env("TRIBUTARY_ETCD", etcd)
        .env("TRIBUTARY_LEADER_TTL_S", "2")
        .env("TRIBUTARY_TLS_CERT", tls.join("tls.crt"))
        .env("TRIBUTARY_TLS_KEY", tls.join("tls.key"));
    Replica {
        proc: Proc::spawn(&format!("coordinator :{port}"), command),
        port,
        health,
    }
}

/// The status `service` reports on the plaintext health port, if it answers.
fn health(rt: &Runtime, port: u16, service: &str) -> Option<ServingStatus> {
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .ok()?
            .connect()
            .await
            .ok()?;
        let mut client = HealthClient::new(channel);
        let request = HealthCheckRequest {
            service: service.to_owned(),
        };
        Some(client.check(request).await.ok()?.into_inner().status())
    })
}

fn serving(rt: &Runtime, port: u16, service: &str) -> bool {
    health(rt, port, service) == Some(ServingStatus::Serving)
}

/// Asks for an unknown job: NOT_FOUND comes from a leader only (followers
/// redirect), so `Ok` means the call reached the leader; `Err` carries the
/// code of the failure.
fn reaches_leader(rt: &Runtime, client: &Client) -> Result<(), Result<Code, String>> {
    let request = v1::JobRequest {
        job: "no-such-job".to_owned(),
    };
    let outcome =
        rt.block_on(client.send(&request, |mut c, r| async move { c.get_status(r).await }));
    match outcome {
        Err(WorkerError::Coordinator {
            code: Code::NotFound,
            ..
        }) => Ok(()),
        Err(WorkerError::Coordinator { code, .. }) => Err(Ok(code)),
        other => Err(Err(format!("{other:?}"))),
    }
}

#[test]
fn tls_replicas_probe_redirect_and_fail_over_with_one_certificate() {
    let rt = Runtime::new().expect("runtime");
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certificates(dir.path());
    let mut replicas = vec![replica(&etcd.endpoint(), dir.path())];
    // The first replica leads before the second starts: the second follows.
    wait_until("the first replica to lead", Duration::from_secs(30), || {
        serving(&rt, replicas[0].health, LEADER)
    });
    replicas.push(replica(&etcd.endpoint(), dir.path()));
    let (leader, follower) = (&replicas[0], &replicas[1]);

    // Liveness is the process; readiness holds on a follower that knows
    // the leader; only the leader reports the coordinator service.
    wait_until("the follower to be ready", Duration::from_secs(30), || {
        serving(&rt, follower.health, READY)
    });
    assert!(serving(&rt, follower.health, ""), "follower not live");
    assert_eq!(
        health(&rt, follower.health, LEADER),
        Some(ServingStatus::NotServing)
    );
    assert!(serving(&rt, leader.health, READY), "leader not ready");

    // Given the follower by name, the client is redirected to the leader's
    // advertised 127.0.0.1 (which the certificate does not name) and
    // verifies it as `localhost`, the first address's host.
    let tls = ClientTls {
        ca_pem: Some(ca),
        ..ClientTls::default()
    };
    let address = format!("https://localhost:{}", follower.port);
    let client = Client::new(std::slice::from_ref(&address))
        .expect("client")
        .with_tls(&tls)
        .with_deadline(Duration::from_secs(30));
    reaches_leader(&rt, &client).expect("TLS call through the follower to the leader");

    // Refused: the system's roots do not know the test CA, and plaintext
    // gets no answer from a TLS port.
    let untrusted = Client::new(std::slice::from_ref(&address))
        .expect("client")
        .with_deadline(Duration::from_millis(500));
    let error = reaches_leader(&rt, &untrusted).expect_err("untrusted CA accepted");
    assert_eq!(error, Ok(Code::Unavailable), "{error:?}");
    let plaintext = Client::new(&[format!("127.0.0.1:{}", leader.port)])
        .expect("client")
        .with_deadline(Duration::from_millis(500));
    let _refused =
        reaches_leader(&rt, &plaintext).expect_err("plaintext call to a TLS port answered");

    // kill -9 the leader: the follower takes over, reports it, and the same
    // client reaches it.
    replicas[0].proc.kill();
    let survivor = &replicas[1];
    wait_until("the follower to lead", Duration::from_secs(30), || {
        serving(&rt, survivor.health, LEADER)
    });
    assert!(serving(&rt, survivor.health, READY), "new leader not ready");
    reaches_leader(&rt, &client).expect("TLS call after failover");
}

#[test]
fn check_prints_settings_from_the_environment_and_names_bad_ones() {
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut command = Command::new(tributary_bin());
        command
            .env_clear()
            .args(["coordinator", "--check"])
            .args(args);
        command.envs(env.iter().copied());
        command.output().expect("run tributary")
    };
    let ok = run(
        &[
            ("TRIBUTARY_ETCD", "http://etcd-0:2379,http://etcd-1:2379"),
            ("TRIBUTARY_HEALTH_LISTEN", "0.0.0.0:7071"),
            ("TRIBUTARY_TLS_CERT", "/etc/tributary/tls/tls.crt"),
            ("TRIBUTARY_TLS_KEY", "/etc/tributary/tls/tls.key"),
        ],
        &["--advertise", "10.0.0.7:7070"],
    );
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{ok:?}");
    for line in [
        "etcd          http://etcd-0:2379,http://etcd-1:2379",
        "advertise     10.0.0.7:7070",
        "health        0.0.0.0:7071",
        "tls cert      /etc/tributary/tls/tls.crt",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // An empty TRIBUTARY_ETCD is no etcd, as in the dev overlay.
    let memory = run(&[("TRIBUTARY_ETCD", "")], &[]);
    assert!(String::from_utf8_lossy(&memory.stdout).contains("etcd          none"));

    for (env, args, want) in [
        (
            vec![("TRIBUTARY_TLS_CERT", "/tls.crt")],
            vec![],
            "--tls-key",
        ),
        (vec![], vec!["--advertise", "$(POD_IP):7070"], "unexpanded"),
        (vec![("TRIBUTARY_LEADER_TTL_S", "soon")], vec![], "soon"),
        (vec![], vec!["--etcd-endpoints", "x"], "--etcd-endpoints"),
    ] {
        let bad = run(&env, &args);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success(), "{env:?} {args:?} passed");
        assert!(stderr.contains(want), "{env:?} {args:?}: {stderr}");
    }
}

/// Connections that open and then say nothing useful: `PARTIAL_TLS` idlers
/// on the TLS port send the first bytes of a ClientHello record, bare ones
/// nothing, and `H2` idlers on the plaintext health port the HTTP/2 preface
/// and an empty SETTINGS frame.
const IDLERS: usize = 200;
const PARTIAL_TLS: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01];
const H2: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

#[test]
fn tls_handshakes_and_http2_prefaces_that_never_call_are_cut_and_legit_calls_go_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = Runtime::new().expect("runtime");
    let etcd = EtcdServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certificates(dir.path());
    let replica = replica(&etcd.endpoint(), dir.path());
    wait_until("the replica to lead", Duration::from_secs(30), || {
        serving(&rt, replica.health, LEADER)
    });
    let opened = std::time::Instant::now();
    let idlers: Vec<tokio::net::TcpStream> = rt.block_on(async {
        let mut idlers = Vec::new();
        for i in 0..3 * IDLERS {
            let (port, hello): (u16, &[u8]) = match i % 3 {
                0 => (replica.port, PARTIAL_TLS),
                1 => (replica.port, b""),
                _ => (replica.health, H2),
            };
            let mut idler = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connect");
            idler.write_all(hello).await.expect("write");
            idlers.push(idler);
        }
        idlers
    });
    // While they hang on, TLS calls and health probes are answered.
    let client = Client::new(&[format!("https://localhost:{}", replica.port)])
        .expect("client")
        .with_tls(&ClientTls {
            ca_pem: Some(ca),
            ..ClientTls::default()
        })
        .with_deadline(Duration::from_secs(5));
    for _ in 0..5 {
        let started = std::time::Instant::now();
        reaches_leader(&rt, &client).expect("a TLS call beside the idlers");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            serving(&rt, replica.health, READY),
            "health beside the idlers"
        );
    }
    // Every idler is closed by the replica once its 10 s to make a valid
    // call have passed (a read sees the end, or a reset), none long after.
    let cut = rt.block_on(async {
        let reads = idlers.into_iter().map(|mut idler| async move {
            let mut buf = [0u8; 1024];
            loop {
                match tokio::time::timeout(Duration::from_secs(30), idler.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return true,
                    Ok(Ok(_)) => continue, // the server's own handshake bytes
                    Err(_) => return false,
                }
            }
        });
        futures::future::join_all(reads).await
    });
    let took = opened.elapsed();
    assert!(
        cut.iter().all(|c| *c),
        "{} idlers left open",
        cut.iter().filter(|c| !**c).count()
    );
    assert!(
        took >= Duration::from_secs(9),
        "cut before their 10 s: {took:?}"
    );
    eprintln!(
        "{} idlers (TLS, bare, HTTP/2) all cut {took:.1?} after opening",
        3 * IDLERS
    );
    // The replica serves on.
    reaches_leader(&rt, &client).expect("a TLS call after the idlers");
}
