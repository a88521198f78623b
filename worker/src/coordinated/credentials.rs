//! What a client proves to the coordinators: the bearer token every call
//! carries, and how TLS is spoken (the CA and name to verify, and the
//! certificate the client presents for mutual TLS). Read from the process
//! environment once, at the edge (the Python `Loader`, `tributary-rank`),
//! and passed in as a map.

use std::collections::HashMap;
use std::io::Read;

use tonic::metadata::{Ascii, MetadataValue};

use crate::error::{Result, WorkerError};

/// Environment variable naming a PEM file of CA certificates to trust.
pub const TLS_CA_VAR: &str = "TRIBUTARY_TLS_CA";
/// Environment variable naming the server name to verify certificates for.
pub const TLS_DOMAIN_VAR: &str = "TRIBUTARY_TLS_DOMAIN";
/// Environment variable naming the PEM certificate the client presents.
pub const TLS_CLIENT_CERT_VAR: &str = "TRIBUTARY_TLS_CLIENT_CERT";
/// Environment variable naming the PEM private key of that certificate.
pub const TLS_CLIENT_KEY_VAR: &str = "TRIBUTARY_TLS_CLIENT_KEY";
/// Environment variable naming a file holding the bearer token (a mounted
/// Kubernetes Secret, say).
pub const AUTH_TOKEN_FILE_VAR: &str = "TRIBUTARY_AUTH_TOKEN_FILE";
/// Environment variable holding the bearer token itself.
pub const AUTH_TOKEN_VAR: &str = "TRIBUTARY_AUTH_TOKEN";

/// The longest token accepted, and the most read from a token file.
pub const MAX_TOKEN_BYTES: usize = 4096;
/// The most read from a PEM file (a certificate chain, a key).
const MAX_PEM_BYTES: u64 = 1 << 20;

/// How the client checks coordinators' certificates on `https://` addresses,
/// and the certificate it presents when the coordinators ask for one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM CA certificates to trust; the system's roots when `None`.
    pub ca_pem: Option<Vec<u8>>,
    /// The name every replica's certificate must carry; by default the host
    /// of the first address the client was given.
    pub domain: Option<String>,
    /// PEM certificate chain and private key the client presents (mutual
    /// TLS); none when `None`.
    pub identity: Option<ClientIdentity>,
}

/// A client certificate and its key, both PEM.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientIdentity {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem", &format_args!("{} bytes", self.cert_pem.len()))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Reads the file named by `var` (at most `limit` bytes); errors name both.
fn read_named(var: &str, path: &str, limit: u64) -> Result<Vec<u8>> {
    let cannot =
        |e: std::io::Error| WorkerError::Config(format!("{var}={path}: cannot read it: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut data = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(cannot)?;
    if data.len() as u64 > limit {
        return Err(WorkerError::Config(format!(
            "{var}={path}: larger than {limit} bytes"
        )));
    }
    Ok(data)
}

/// The value of `var` in `env`, when set to something other than blanks.
fn var<'a>(env: &'a HashMap<String, String>, var: &str) -> Option<&'a str> {
    env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty())
}

fn pem_file(env: &HashMap<String, String>, name: &str, marker: &str) -> Result<Option<Vec<u8>>> {
    let Some(path) = var(env, name) else {
        return Ok(None);
    };
    let pem = read_named(name, path, MAX_PEM_BYTES)?;
    let begin = format!("-----BEGIN {marker}");
    if !pem.windows(begin.len()).any(|w| w == begin.as_bytes()) {
        let what = if marker == "CERTIFICATE" {
            "PEM certificate"
        } else {
            "PEM private key"
        };
        return Err(WorkerError::Config(format!(
            "{name}={path}: holds no {what}"
        )));
    }
    Ok(Some(pem))
}

impl ClientTls {
    /// Reads [`TLS_CA_VAR`], [`TLS_DOMAIN_VAR`], [`TLS_CLIENT_CERT_VAR`] and
    /// [`TLS_CLIENT_KEY_VAR`] (files, read now) from `env`, passed in from
    /// the edge. Errors name the variable and file.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Self> {
        let ca_pem = pem_file(env, TLS_CA_VAR, "CERTIFICATE")?;
        let domain = var(env, TLS_DOMAIN_VAR).map(str::to_owned);
        let cert = pem_file(env, TLS_CLIENT_CERT_VAR, "CERTIFICATE")?;
        // "-----BEGIN PRIVATE KEY", "-----BEGIN RSA PRIVATE KEY", "EC ...".
        let key = pem_file(env, TLS_CLIENT_KEY_VAR, "")?;
        if let Some(key) = &key {
            if !key.windows(11).any(|w| w == b"PRIVATE KEY") {
                return Err(WorkerError::Config(format!(
                    "{TLS_CLIENT_KEY_VAR}={}: holds no PEM private key",
                    var(env, TLS_CLIENT_KEY_VAR).unwrap_or_default()
                )));
            }
        }
        let identity = match (cert, key) {
            (Some(cert_pem), Some(key_pem)) => Some(ClientIdentity { cert_pem, key_pem }),
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                return Err(WorkerError::Config(format!(
                "{TLS_CLIENT_CERT_VAR} and {TLS_CLIENT_KEY_VAR} go together: set both or neither"
            )))
            }
        };
        Ok(Self {
            ca_pem,
            domain,
            identity,
        })
    }
}

/// A bearer token, sent as `authorization: Bearer <token>` on every call.
/// Its `Debug` form does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken(String);

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

impl AuthToken {
    /// A token: surrounding whitespace is trimmed; what is left must be 1 to
    /// [`MAX_TOKEN_BYTES`] visible ASCII characters. `what` names where it
    /// came from in errors.
    pub fn new(token: &str, what: &str) -> Result<Self> {
        let token = token.trim();
        if token.is_empty() {
            return Err(WorkerError::Config(format!(
                "{what}: the auth token is empty"
            )));
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(WorkerError::Config(format!(
                "{what}: the auth token is longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(WorkerError::Config(format!(
                "{what}: the auth token must be visible ASCII characters (no spaces or control characters)"
            )));
        }
        Ok(Self(token.to_owned()))
    }

    /// The token in `env`: read from the file [`AUTH_TOKEN_FILE_VAR`] names
    /// (read now), or [`AUTH_TOKEN_VAR`]'s value; `None` when neither is set.
    /// Setting both is an error, as is an empty or unreadable file.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Option<Self>> {
        match (var(env, AUTH_TOKEN_FILE_VAR), var(env, AUTH_TOKEN_VAR)) {
            (Some(_), Some(_)) => Err(WorkerError::Config(format!(
                "{AUTH_TOKEN_FILE_VAR} and {AUTH_TOKEN_VAR} are both set: set one"
            ))),
            (Some(path), None) => {
                let data = read_named(AUTH_TOKEN_FILE_VAR, path, MAX_TOKEN_BYTES as u64)?;
                let text = String::from_utf8(data).map_err(|_| {
                    WorkerError::Config(format!("{AUTH_TOKEN_FILE_VAR}={path}: not UTF-8 text"))
                })?;
                Self::new(&text, &format!("{AUTH_TOKEN_FILE_VAR}={path}")).map(Some)
            }
            (None, Some(token)) => Self::new(token, AUTH_TOKEN_VAR).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The token itself (for a coordinator this process hosts, which asks
    /// for the same token its ranks send).
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// The `authorization` metadata value.
    pub(crate) fn header(&self) -> MetadataValue<Ascii> {
        MetadataValue::try_from(format!("Bearer {}", self.0))
            .expect("visible ASCII, checked by AuthToken::new")
    }
}

/// Everything a client is configured with from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientCredentials {
    pub tls: ClientTls,
    pub auth_token: Option<AuthToken>,
}

impl ClientCredentials {
    /// [`ClientTls::from_env`] and [`AuthToken::from_env`].
    pub fn from_env(env: &HashMap<String, String>) -> Result<Self> {
        Ok(Self {
            tls: ClientTls::from_env(env)?,
            auth_token: AuthToken::from_env(env)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("ca.txt");
        std::fs::write(&junk, "not a certificate").expect("write");
        for (path, why) in [
            (dir.path().join("missing.pem"), "cannot read it"),
            (junk, "holds no PEM certificate"),
        ] {
            let env = HashMap::from([(TLS_CA_VAR.to_owned(), path.display().to_string())]);
            let error = ClientTls::from_env(&env).expect_err("bad CA");
            let text = error.to_string();
            assert!(
                text.contains(&path.display().to_string()) && text.contains(why),
                "{text}"
            );
        }
        let env = HashMap::from([(TLS_DOMAIN_VAR.to_owned(), " coord.ns.svc ".to_owned())]);
        let tls = ClientTls::from_env(&env).expect("tls");
        assert_eq!(tls.domain.as_deref(), Some("coord.ns.svc"));
        assert!(tls.ca_pem.is_none() && tls.identity.is_none());
    }

    #[test]
    fn a_token_file_is_read_and_trimmed_like_a_mounted_secret() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cr3t-token\n").expect("write");
        let path = file.display().to_string();
        let token = AuthToken::from_env(&env(&[(AUTH_TOKEN_FILE_VAR, &path)]))
            .expect("token")
            .expect("set");
        assert_eq!(
            token.header().to_str().expect("ascii"),
            "Bearer s3cr3t-token"
        );
        let token = AuthToken::from_env(&env(&[(AUTH_TOKEN_VAR, " abc ")]))
            .expect("token")
            .expect("set");
        assert_eq!(token.header().to_str().expect("ascii"), "Bearer abc");
        assert!(AuthToken::from_env(&env(&[])).expect("none").is_none());
        assert!(AuthToken::from_env(&env(&[(AUTH_TOKEN_VAR, "  ")]))
            .expect("blank is unset")
            .is_none());
        assert_eq!(format!("{token:?}"), "AuthToken(<redacted>)");
    }

    #[test]
    fn a_bad_token_file_or_token_names_the_variable_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").expect("write");
        let huge = dir.path().join("huge");
        std::fs::write(&huge, "x".repeat(MAX_TOKEN_BYTES + 1)).expect("write");
        let spaced = dir.path().join("spaced");
        std::fs::write(&spaced, "two words").expect("write");
        let missing = dir.path().join("missing");
        for (path, why) in [
            (&empty, "is empty"),
            (&huge, "larger than"),
            (&spaced, "visible ASCII"),
            (&missing, "cannot read it"),
        ] {
            let path = path.display().to_string();
            let error = AuthToken::from_env(&env(&[(AUTH_TOKEN_FILE_VAR, &path)]))
                .expect_err("bad token file");
            let text = error.to_string();
            assert!(
                text.contains(AUTH_TOKEN_FILE_VAR) && text.contains(&path) && text.contains(why),
                "{text}"
            );
        }
        let both = AuthToken::from_env(&env(&[(AUTH_TOKEN_FILE_VAR, "/x"), (AUTH_TOKEN_VAR, "y")]))
            .expect_err("both");
        assert!(both.to_string().contains("both set"), "{both}");
        let control = AuthToken::from_env(&env(&[(AUTH_TOKEN_VAR, "a\u{7}b")])).expect_err("bell");
        assert!(control.to_string().contains(AUTH_TOKEN_VAR), "{control}");
    }

    #[test]
    fn a_client_certificate_needs_its_key_and_both_must_be_pem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("tls.crt");
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .expect("write");
        let key = dir.path().join("tls.key");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
        )
        .expect("write");
        let (cert, key) = (cert.display().to_string(), key.display().to_string());
        let tls = ClientTls::from_env(&env(&[
            (TLS_CLIENT_CERT_VAR, &cert),
            (TLS_CLIENT_KEY_VAR, &key),
        ]))
        .expect("identity");
        let identity = tls.identity.expect("identity");
        assert!(identity.key_pem.starts_with(b"-----BEGIN PRIVATE KEY"));
        assert!(
            !format!("{identity:?}").contains("MIIE"),
            "the key is not shown"
        );
        let alone = ClientTls::from_env(&env(&[(TLS_CLIENT_CERT_VAR, &cert)])).expect_err("alone");
        assert!(alone.to_string().contains("set both or neither"), "{alone}");
        // A certificate given as the key, and a key given as the certificate.
        let swapped = ClientTls::from_env(&env(&[
            (TLS_CLIENT_CERT_VAR, &key),
            (TLS_CLIENT_KEY_VAR, &cert),
        ]))
        .expect_err("swapped");
        let text = swapped.to_string();
        assert!(
            text.contains(TLS_CLIENT_CERT_VAR) && text.contains("holds no PEM certificate"),
            "{text}"
        );
        let wrong_key = ClientTls::from_env(&env(&[
            (TLS_CLIENT_CERT_VAR, &cert),
            (TLS_CLIENT_KEY_VAR, &cert),
        ]))
        .expect_err("a certificate is no key");
        let text = wrong_key.to_string();
        assert!(
            text.contains(TLS_CLIENT_KEY_VAR) && text.contains("holds no PEM private key"),
            "{text}"
        );
    }
}
