//! A Google Cloud Storage emulator on loopback: gcp-storage-emulator from
//! the test virtualenv, started through `tests/python/gcs_emulator.py`
//! (which adds the response headers object_store's client needs and the
//! emulator leaves out), and the environment a client reaches it with: a
//! service-account file, as a user's `GOOGLE_SERVICE_ACCOUNT` names one,
//! whose `gcs_base_url` points at the emulator and whose `disable_oauth`
//! skips the token exchange (the emulator checks no credentials).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tributary_worker::StoreOptions;

use crate::cli::{repo, venv_bin};
use crate::{free_port, http_request, wait_until};

/// gcp-storage-emulator on a loopback port, in memory; killed on drop.
#[derive(Debug)]
pub struct GcsServer {
    child: Child,
    port: u16,
    /// `http://127.0.0.1:<port>`
    pub endpoint: String,
    /// The service-account file that points clients here.
    pub service_account: String,
    _dir: tempfile::TempDir,
}

impl GcsServer {
    /// Starts the emulator and waits (30 s at most) until it answers its
    /// health check.
    pub fn start() -> Self {
        let port = free_port();
        let child = Command::new(venv_bin().join("python"))
            .arg(repo().join("tests/python/gcs_emulator.py"))
            .args(["127.0.0.1", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gcs_emulator.py");
        let endpoint = format!("http://127.0.0.1:{port}");
        let dir = tempfile::tempdir().expect("tempdir");
        let service_account = dir.path().join("service-account.json");
        let key = format!(
            r#"{{"gcs_base_url": "{endpoint}", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}}"#
        );
        std::fs::write(&service_account, key).expect("write the service account");
        let mut server = Self {
            child,
            port,
            endpoint,
            service_account: service_account.to_str().expect("utf-8 path").to_owned(),
            _dir: dir,
        };
        wait_until(
            "the GCS emulator to listen",
            Duration::from_secs(30),
            || {
                if let Ok(Some(status)) = server.child.try_wait() {
                    panic!("gcs_emulator.py exited before it listened: {status}");
                }
                matches!(http_request(port, "GET", "/", &[], &[]), Some((200, _)))
            },
        );
        server
    }

    /// Creates a bucket (JSON API).
    pub fn create_bucket(&self, bucket: &str) {
        let body = format!(r#"{{"name": "{bucket}"}}"#);
        let headers = [("Content-Type", "application/json")];
        let (status, response) = http_request(
            self.port,
            "POST",
            "/storage/v1/b",
            &headers,
            body.as_bytes(),
        )
        .expect("create bucket");
        assert_eq!(status, 200, "create bucket {bucket}: {response}");
    }

    /// The environment a client reaches this server with: the service
    /// account, and plain HTTP allowed.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("GOOGLE_SERVICE_ACCOUNT", &self.service_account),
            ("GOOGLE_ALLOW_HTTP", "true"),
        ]
    }

    /// Store options from [`Self::env`], as the binary builds them.
    pub fn options(&self) -> StoreOptions {
        StoreOptions::from_vars(
            self.env()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned())),
        )
    }
}

impl Drop for GcsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
