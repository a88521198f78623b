//! An Azure Blob Storage emulator on loopback: Azurite (installed by
//! `scripts/setup.sh` into the test virtualenv's `azurite/` npm prefix),
//! one account with its key, and the environment variables a client (the
//! `tributary` binary, a rank) reaches it with: the ones a user sets for
//! Azure, the account URL pointing at the emulator.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use base64::Engine;
use tributary_worker::StoreOptions;

use crate::cli::venv_bin;
use crate::{free_port, http_request, wait_until};

/// The storage account Azurite serves.
pub const ACCOUNT: &str = "tributary";

/// The account's key (base64, as Azure gives keys out).
pub const KEY: &str = "dHJpYnV0YXJ5LWF6dXJpdGUtdGVzdC1rZXktMDEyMzQ1Njc=";

/// The REST API version the requests made here speak.
const API_VERSION: &str = "2021-08-06";

/// Azurite's blob service on a loopback port, kept in memory; killed on
/// drop.
#[derive(Debug)]
pub struct Azurite {
    child: Child,
    port: u16,
    /// The account URL, `http://127.0.0.1:<port>/tributary`: Azurite takes
    /// the account from the path's first segment.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl Azurite {
    /// Starts Azurite and waits (30 s at most) until it answers.
    pub fn start() -> Self {
        let venv = venv_bin().parent().expect("the virtualenv").to_owned();
        let bin = venv.join("azurite/node_modules/.bin/azurite-blob");
        assert!(
            bin.exists(),
            "{} is missing: run scripts/setup.sh",
            bin.display()
        );
        // Azurite writes nothing in memory mode, but its working directory
        // is where it would: a scratch one.
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let child = Command::new(bin)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .args(["--inMemoryPersistence", "--extentMemoryLimit", "256"])
            .args(["--disableTelemetry", "--silent"])
            .env("AZURITE_ACCOUNTS", format!("{ACCOUNT}:{KEY}"))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start azurite-blob");
        let mut azurite = Self {
            child,
            port,
            endpoint: format!("http://127.0.0.1:{port}/{ACCOUNT}"),
            _dir: dir,
        };
        wait_until("Azurite to listen", Duration::from_secs(30), || {
            if let Ok(Some(status)) = azurite.child.try_wait() {
                panic!("azurite-blob exited before it listened: {status}");
            }
            http_request(port, "GET", "/", &[], &[]).is_some()
        });
        azurite
    }

    /// Creates a container, authorized with the account key (Azurite, as
    /// Azure, refuses anonymous requests).
    pub fn create_container(&self, container: &str) {
        let date = httpdate::fmt_http_date(SystemTime::now());
        // The Shared Key string to sign: the verb, eleven empty standard
        // headers, the x-ms- headers, then the resource (the account, then
        // the path, which starts with the account here) and the query.
        let string_to_sign = format!(
            "PUT\n{}x-ms-date:{date}\nx-ms-version:{API_VERSION}\n/{ACCOUNT}/{ACCOUNT}/{container}\nrestype:container",
            "\n".repeat(11)
        );
        let authorization = format!("SharedKey {ACCOUNT}:{}", sign(KEY, &string_to_sign));
        let path = format!("/{ACCOUNT}/{container}?restype=container");
        let headers = [
            ("x-ms-date", date.as_str()),
            ("x-ms-version", API_VERSION),
            ("Authorization", authorization.as_str()),
        ];
        let (status, response) =
            http_request(self.port, "PUT", &path, &headers, &[]).expect("create container");
        assert_eq!(status, 201, "create container {container}: {response}");
    }

    /// The environment a client reaches this account with.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        self.env_with_key(KEY)
    }

    /// [`Self::env`] with another account key (a wrong one).
    pub fn env_with_key<'a>(&'a self, key: &'a str) -> Vec<(&'static str, &'a str)> {
        vec![
            ("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT),
            ("AZURE_STORAGE_ACCOUNT_KEY", key),
            ("AZURE_STORAGE_ENDPOINT", &self.endpoint),
            ("AZURE_ALLOW_HTTP", "true"),
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

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Shared Key signature of `text`: HMAC-SHA256 under the decoded
/// account key, in base64.
fn sign(key: &str, text: &str) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine.decode(key).expect("a base64 account key");
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
        text.as_bytes(),
    );
    engine.encode(tag.as_ref())
}
