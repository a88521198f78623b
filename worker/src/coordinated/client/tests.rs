//! The client's address handling, failover and interceptors.

use super::*;

#[test]
fn host_is_taken_from_urls_with_names_ips_and_ipv6() {
    assert_eq!(host("https://coord.ns.svc:7070"), "coord.ns.svc");
    assert_eq!(host("https://10.0.0.7:7070/"), "10.0.0.7");
    assert_eq!(host("https://[fd00::7]:7070"), "fd00::7");
    assert_eq!(host("coord"), "coord");
}

#[test]
fn https_addresses_make_leaders_https_and_verify_the_first_host() {
    let client =
        Client::new(&["https://coord.ns.svc:7070,10.0.0.8:7070".to_owned()]).expect("client");
    assert_eq!(client.scheme, "https");
    assert_eq!(
        client.endpoints,
        ["https://coord.ns.svc:7070", "https://10.0.0.8:7070"]
    );
    let plain = Client::new(&["coord:7070".to_owned()]).expect("client");
    assert_eq!(plain.endpoints, ["http://coord:7070"]);
    assert!(plain.tls.is_none());
    let mixed = Client::new(&["https://a:1,http://b:2".to_owned()]).expect_err("mixed");
    assert!(
        mixed.to_string().contains("mix http:// and https://"),
        "{mixed}"
    );
}

#[tokio::test]
async fn a_replica_that_accepts_and_never_answers_fails_the_call_by_its_deadline() {
    // A frozen process: the kernel accepts the connection, nothing answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let client = Client::new(&[address])
        .expect("client")
        .with_call_timeout(Duration::from_millis(300))
        .with_deadline(Duration::from_millis(900));
    let started = Instant::now();
    let request = tributary_common::proto::v1::JobRequest { job: "j".into() };
    let error = client
        .send(&request, |mut c, r| async move { c.get_status(r).await })
        .await
        .expect_err("nothing answers");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "the call gave up after {took:?}"
    );
    assert!(error.to_string().contains("DeadlineExceeded"), "{error}");
    drop(listener);
}

#[tokio::test]
async fn an_unreachable_coordinator_fails_fast_naming_its_address_and_asking_if_it_runs() {
    // A port nothing listens on: the kernel refuses the connection.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").to_string()
    };
    let client = Client::new(std::slice::from_ref(&address))
        .expect("client")
        .with_refused_grace(Duration::from_millis(300));
    let started = Instant::now();
    let request = tributary_common::proto::v1::JobRequest { job: "j".into() };
    let error = client
        .send(&request, |mut c, r| async move { c.get_status(r).await })
        .await
        .expect_err("nothing listens");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "gave up after {took:?}, not the 60s failover deadline"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "cannot reach the coordinator at {address}: connection refused"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("is `tributary coordinator` running at {address}?")),
        "{message}"
    );
}

#[tokio::test]
async fn a_replica_that_stopped_answering_is_not_followed_as_leader_for_a_while() {
    let client = Client::new(&["a:1,b:2,c:3".to_owned()]).expect("client");
    // a timed out; b says a leads (its election has not ended yet).
    client.mark_suspect("http://a:1");
    client.switch("http://a:1", None).await;
    assert_eq!(client.current.lock().await.address, "http://b:2");
    client.switch("http://b:2", Some("a:1".into())).await;
    assert_eq!(
        client.current.lock().await.address,
        "http://c:3",
        "the suspect is skipped: on to the next replica"
    );
    client.switch("http://c:3", Some("b:2".into())).await;
    assert_eq!(client.current.lock().await.address, "http://b:2");
}

#[test]
fn the_auth_interceptor_adds_the_bearer_token_to_every_call() {
    let token = AuthToken::new(" t0k3n\n", "test").expect("token");
    let mut auth = Auth(Some(token.header()));
    let request = auth.call(tonic::Request::new(())).expect("call");
    assert_eq!(
        request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer t0k3n")
    );
    let mut none = Auth::default();
    let request = none.call(tonic::Request::new(())).expect("call");
    assert!(request.metadata().get("authorization").is_none());
}

#[test]
fn a_client_certificate_with_http_addresses_is_an_error() {
    let credentials = ClientCredentials {
        tls: ClientTls {
            identity: Some(ClientIdentity::default()),
            ..ClientTls::default()
        },
        auth_token: None,
    };
    let error = Client::new(&["coord:7070".to_owned()])
        .expect("client")
        .with_credentials(&credentials)
        .expect_err("http with a client certificate");
    assert!(error.to_string().contains(TLS_CLIENT_CERT_VAR), "{error}");
}

#[test]
fn retries_are_spread_over_the_upper_half_of_the_backoff() {
    let backoff = Duration::from_millis(400);
    let delays: Vec<Duration> = (0..64).map(|_| jittered(backoff)).collect();
    assert!(
        delays.iter().all(|d| (backoff / 2..=backoff).contains(d)),
        "{delays:?}"
    );
    let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
    assert!(distinct.len() > 8, "not spread: {delays:?}");
}
