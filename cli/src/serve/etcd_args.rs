//! The coordinator's etcd connection flags: deadlines, TLS and user.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tributary_coordinator::store::{Deadlines, EtcdOptions, EtcdTls};

/// The range of `--etcd-timeout-ms`.
const TIMEOUT_MS: std::ops::RangeInclusive<u64> = 50..=60_000;
/// A call gives up after this many times `--etcd-timeout-ms`.
const BUDGET_FACTOR: u32 = 10;
/// The largest PEM file or password file read.
const MAX_FILE: u64 = 1 << 20;

#[derive(Debug, clap::Args)]
pub struct EtcdArgs {
    /// How long an etcd request may go unanswered, in milliseconds
    /// (50-60000): then it is sent again where that is safe (the first copy
    /// keeps waiting), or fails. A call gives up after 10 times this.
    #[arg(long, env = "TRIBUTARY_ETCD_TIMEOUT_MS", default_value_t = 500)]
    etcd_timeout_ms: u64,
    /// PEM CA certificate that signed etcd's server certificates: connect
    /// to etcd over TLS (endpoints https://host:port or host:port).
    #[arg(long, env = "TRIBUTARY_ETCD_CA")]
    etcd_ca: Option<PathBuf>,
    /// PEM client certificate for etcd's --client-cert-auth (needs
    /// --etcd-key; TLS with the system's roots unless --etcd-ca).
    #[arg(long, env = "TRIBUTARY_ETCD_CERT", requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    /// PEM private key of --etcd-cert.
    #[arg(long, env = "TRIBUTARY_ETCD_KEY", requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
    /// etcd user (etcd's auth enabled; needs --etcd-password-file).
    #[arg(long, env = "TRIBUTARY_ETCD_USER", requires = "etcd_password_file")]
    etcd_user: Option<String>,
    /// File holding the etcd user's password (one line; a trailing newline
    /// is dropped).
    #[arg(long, env = "TRIBUTARY_ETCD_PASSWORD_FILE", requires = "etcd_user")]
    etcd_password_file: Option<PathBuf>,
}

impl EtcdArgs {
    /// The settings, as `--check` prints them (never the password).
    pub fn describe(&self) -> String {
        let path = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(|| "none".to_owned(), |p| p.display().to_string())
        };
        let tls = if self.tls_wanted() {
            format!(
                "ca {}, client cert {}, key {}",
                path(&self.etcd_ca),
                path(&self.etcd_cert),
                path(&self.etcd_key)
            )
        } else {
            "none: plaintext".to_owned()
        };
        let user = match &self.etcd_user {
            Some(user) => format!("{user} (password from {})", path(&self.etcd_password_file)),
            None => "none".to_owned(),
        };
        [
            format!(
                "etcd timeout  {} ms a request, {} ms with retries",
                self.etcd_timeout_ms,
                self.etcd_timeout_ms * u64::from(BUDGET_FACTOR)
            ),
            format!("etcd tls      {tls}"),
            format!("etcd user     {user}"),
        ]
        .join("\n")
    }

    /// Checks the values that parsing does not.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            TIMEOUT_MS.contains(&self.etcd_timeout_ms),
            "--etcd-timeout-ms {} is outside {}-{}",
            self.etcd_timeout_ms,
            TIMEOUT_MS.start(),
            TIMEOUT_MS.end()
        );
        if let Some(user) = &self.etcd_user {
            anyhow::ensure!(
                !user.is_empty() && user.len() <= 256 && !user.chars().any(char::is_control),
                "--etcd-user {user:?} must be 1-256 characters without control characters"
            );
        }
        Ok(())
    }

    /// The first TLS or user flag given, for "needs --etcd" errors.
    pub fn first_connection_flag(&self) -> Option<&'static str> {
        [
            (self.etcd_ca.is_some(), "--etcd-ca"),
            (self.etcd_cert.is_some(), "--etcd-cert"),
            (self.etcd_user.is_some(), "--etcd-user"),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }

    fn tls_wanted(&self) -> bool {
        self.etcd_ca.is_some() || self.etcd_cert.is_some()
    }

    /// Reads the files and builds the connection options; errors name the
    /// flag and file.
    pub fn options(&self) -> anyhow::Result<EtcdOptions> {
        let attempt = Duration::from_millis(self.etcd_timeout_ms);
        let mut options = EtcdOptions {
            deadlines: Deadlines {
                attempt,
                budget: attempt * BUDGET_FACTOR,
            },
            ..EtcdOptions::default()
        };
        if self.tls_wanted() {
            let ca = self
                .etcd_ca
                .as_deref()
                .map(|p| read_bounded(p, "--etcd-ca"))
                .transpose()?;
            let identity = match (&self.etcd_cert, &self.etcd_key) {
                (Some(cert), Some(key)) => Some((
                    read_bounded(cert, "--etcd-cert")?,
                    read_bounded(key, "--etcd-key")?,
                )),
                _ => None,
            };
            options.tls = Some(EtcdTls { ca, identity });
        }
        if let (Some(user), Some(file)) = (&self.etcd_user, &self.etcd_password_file) {
            let raw = read_bounded(file, "--etcd-password-file")?;
            let text = String::from_utf8(raw).map_err(|_| {
                anyhow::anyhow!("--etcd-password-file {}: not UTF-8", file.display())
            })?;
            let password = text.strip_suffix('\n').unwrap_or(&text);
            let password = password.strip_suffix('\r').unwrap_or(password);
            anyhow::ensure!(
                !password.is_empty() && !password.contains('\n'),
                "--etcd-password-file {}: want one non-empty line",
                file.display()
            );
            options.user = Some((user.clone(), password.to_owned()));
        }
        Ok(options)
    }
}

/// Reads at most [`MAX_FILE`] bytes of `path`; more is an error.
fn read_bounded(path: &Path, flag: &str) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("{flag}: cannot open {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{flag}: cannot read {}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_FILE,
        "{flag}: {} is larger than {MAX_FILE} bytes",
        path.display()
    );
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        etcd: EtcdArgs,
    }

    fn parse(args: &[&str]) -> Result<EtcdArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("t").chain(args.iter().copied())).map(|c| c.etcd)
    }

    #[test]
    fn an_out_of_range_timeout_is_refused_by_name() {
        let args = parse(&["--etcd-timeout-ms", "10"]).expect("parses");
        let error = args.validate().expect_err("10 ms is too short");
        assert!(error.to_string().contains("--etcd-timeout-ms"), "{error}");
    }

    #[test]
    fn a_user_needs_a_password_file_and_a_cert_a_key() {
        assert!(parse(&["--etcd-user", "u"]).is_err());
        assert!(parse(&["--etcd-cert", "c.pem"]).is_err());
    }

    #[test]
    fn the_password_file_gives_one_line_without_its_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").expect("write");
        let path = file.to_str().expect("utf-8 path");
        let options = parse(&["--etcd-user", "u", "--etcd-password-file", path])
            .expect("parses")
            .options()
            .expect("options");
        assert_eq!(options.user, Some(("u".to_owned(), "s3cret".to_owned())));
        assert_eq!(options.deadlines.attempt, Duration::from_millis(500));

        std::fs::write(&file, "two\nlines\n").expect("write");
        let error = parse(&["--etcd-user", "u", "--etcd-password-file", path])
            .expect("parses")
            .options()
            .expect_err("two lines");
        assert!(
            error.to_string().contains("--etcd-password-file"),
            "{error}"
        );
    }

    #[test]
    fn tls_files_are_read_and_a_missing_one_is_named() {
        let error = parse(&["--etcd-ca", "/nonexistent/ca.pem"])
            .expect("parses")
            .options()
            .expect_err("no such file");
        assert!(error.to_string().contains("--etcd-ca"), "{error}");
    }
}
