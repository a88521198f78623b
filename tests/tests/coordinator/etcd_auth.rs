//! The etcd store against an etcd with user/password auth, and over TLS
//! with client certificates: what the coordinator's --etcd-user,
//! --etcd-password-file, --etcd-ca, --etcd-cert and --etcd-key build.

use std::time::Duration;

use etcd_client::Permission;
use tributary_coordinator::store::{
    Election, EtcdElection, EtcdOptions, EtcdStore, EtcdTls, MetaStore, Op, StoreError,
};
use tributary_tests::etcd::{EtcdServer, EtcdTlsFiles};
use tributary_tests::tls::TestCa;

/// Creates root and a user `coordinator` (password `s3cret`) that may
/// read and write `/tributary/` only, then enables auth.
async fn enable_auth(endpoint: &str) {
    let mut admin = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("connect as admin");
    admin
        .user_add("root", "rootpw", None)
        .await
        .expect("add root");
    admin
        .user_grant_role("root", "root")
        .await
        .expect("root role");
    admin.role_add("tributary").await.expect("add role");
    admin
        .role_grant_permission(
            "tributary",
            Permission::read_write("/tributary/").with_prefix(),
        )
        .await
        .expect("grant /tributary/");
    admin
        .user_add("coordinator", "s3cret", None)
        .await
        .expect("add user");
    admin
        .user_grant_role("coordinator", "tributary")
        .await
        .expect("grant role");
    admin.auth_enable().await.expect("enable auth");
}

fn with_user(name: &str, password: &str) -> EtcdOptions {
    EtcdOptions {
        user: Some((name.to_owned(), password.to_owned())),
        ..EtcdOptions::default()
    }
}

fn put(key: &str) -> Op {
    Op::Put {
        key: key.to_owned(),
        value: b"v".to_vec(),
        lease: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_auth_admits_the_coordinator_user_and_nobody_else() {
    let server = EtcdServer::start();
    enable_auth(&server.endpoint()).await;
    let endpoints = [server.endpoint()];

    let store = EtcdStore::connect_with(&endpoints, &with_user("coordinator", "s3cret"))
        .await
        .expect("the user connects");
    let outcome = store
        .txn(vec![], vec![put("/tributary/auth/a")])
        .await
        .expect("a guarded transaction under /tributary/");
    assert!(outcome.succeeded);
    let election = EtcdElection::new(
        store.clone(),
        "/tributary/.leader".into(),
        Duration::from_secs(2),
    );
    let leadership = election.campaign("a:1").await.expect("campaign");
    assert_eq!(election.leader().await.expect("leader"), Some("a:1".into()));
    drop(leadership);

    // Outside its role's prefix: refused, and not as a transient failure.
    let refused = store.put("/elsewhere", b"v".to_vec(), None).await;
    assert!(
        matches!(&refused, Err(StoreError::Other(m)) if m.contains("permission denied")),
        "{refused:?}"
    );

    let wrong = EtcdStore::connect_with(&endpoints, &with_user("coordinator", "wrong")).await;
    let Err(StoreError::Other(message)) = &wrong else {
        panic!("a wrong password is refused for good, not {wrong:?}");
    };
    assert!(message.contains("authentication failed"), "{message}");

    // No user: every key request is refused.
    match EtcdStore::connect(&endpoints).await {
        Err(StoreError::Other(_)) => {}
        Ok(anonymous) => {
            let read = anonymous.get("/tributary/auth/a").await;
            assert!(matches!(read, Err(StoreError::Other(_))), "{read:?}");
        }
        Err(error) => panic!("no user: want a refusal, got {error:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_over_tls_with_client_certificates() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let ca = TestCa::new(dir.path());
    let server_files = ca.issue("etcd", "etcd", &["localhost", "127.0.0.1"]);
    let client_files = ca.issue("coordinator", "coordinator", &[]);
    let server = EtcdServer::start_tls(&EtcdTlsFiles {
        ca: ca.ca.clone(),
        cert: server_files.cert,
        key: server_files.key,
        client_cert_auth: true,
    });
    let endpoints = [server.endpoint()];
    assert!(endpoints[0].starts_with("https://"), "{endpoints:?}");
    let read = |path: &std::path::Path| std::fs::read(path).expect("read pem");
    let tls = EtcdTls {
        ca: Some(read(&ca.ca)),
        identity: Some((read(&client_files.cert), read(&client_files.key))),
    };
    let options = EtcdOptions {
        tls: Some(tls.clone()),
        ..EtcdOptions::default()
    };

    let store = EtcdStore::connect_with(&endpoints, &options)
        .await
        .expect("connect with a client certificate");
    let outcome = store
        .txn(vec![], vec![put("/tributary/tls/a")])
        .await
        .expect("txn over TLS");
    assert!(outcome.succeeded);
    let kv = store.get("/tributary/tls/a").await.expect("get over TLS");
    assert_eq!(kv.map(|kv| kv.value), Some(b"v".to_vec()));

    // Without a client certificate, etcd refuses the handshake.
    let anonymous = EtcdOptions {
        tls: Some(EtcdTls {
            identity: None,
            ..tls.clone()
        }),
        connect_timeout: Duration::from_secs(2),
        ..EtcdOptions::default()
    };
    let refused = EtcdStore::connect_with(&endpoints, &anonymous).await;
    assert!(refused.is_err(), "connected without a client certificate");

    // Plaintext endpoints with TLS configured: a clear error, no attempt.
    let plain = [endpoints[0].replace("https://", "http://")];
    let mixed = EtcdStore::connect_with(&plain, &options).await;
    assert!(
        matches!(&mixed, Err(StoreError::Other(m)) if m.contains("use https://")),
        "{mixed:?}"
    );
}
