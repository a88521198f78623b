//! An S3-compatible server on loopback: `moto_server` from the test
//! virtualenv, and the credentials and store options that reach it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tributary_worker::StoreOptions;

use crate::cli::venv_bin;
use crate::{free_port, wait_until};

/// Credentials and region moto accepts (it checks none of them).
pub const S3_ENV: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "tributary-test"),
    ("AWS_SECRET_ACCESS_KEY", "tributary-test"),
    ("AWS_REGION", "us-east-1"),
];

/// The store options the CLI builds for `--s3-endpoint http://...`:
/// [`S3_ENV`], the endpoint, plain HTTP, path-style requests.
pub fn s3_options(endpoint: &str) -> StoreOptions {
    let mut options = StoreOptions::from_vars(
        S3_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    options.set("aws_endpoint", endpoint.to_owned());
    options.set("aws_allow_http", "true");
    options.set("aws_virtual_hosted_style_request", "false");
    options
}

/// A `moto_server` (S3-compatible) on a loopback port; killed on drop.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    port: u16,
}

impl S3Server {
    /// Starts `moto_server` and waits (30 s at most) until it answers.
    pub fn start() -> Self {
        let port = free_port();
        let child = Command::new(venv_bin().join("moto_server"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let server = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
        };
        wait_until("moto_server to listen", Duration::from_secs(30), || {
            server.request("GET", "/").is_some()
        });
        server
    }

    /// Sends one bare HTTP request; returns the status line.
    fn request(&self, method: &str, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let request = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port);
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        response.lines().next().map(str::to_owned)
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        let status = self
            .request("PUT", &format!("/{bucket}"))
            .expect("create bucket");
        assert!(status.contains(" 200 "), "create bucket {bucket}: {status}");
    }

    /// Environment for `tributary` to reach this server.
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        let mut env = S3_ENV.to_vec();
        env.push(("AWS_ENDPOINT_URL", &self.endpoint));
        env
    }

    /// Store options that reach this server ([`s3_options`]).
    pub fn options(&self) -> StoreOptions {
        s3_options(&self.endpoint)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
