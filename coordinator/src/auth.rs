//! Who may call, and for whom.
//!
//! - **Callers** authenticate with a bearer token (`authorization: Bearer
//!   <token>` metadata), checked by [`TokenCheck`] before any handler runs,
//!   and/or with a client certificate (mutual TLS, configured on the
//!   transport). The token is the operator's, which reaches everything, or
//!   a job credential, which reaches one job ([`Access`], [`JobKeys`]). Without a
//!   configured token every caller is let in.
//! - **Members** prove they are themselves with the secret their Join
//!   returned. The store keeps only its SHA-256, so reading etcd reveals no
//!   secret, and GetStatus shows none.
//! - **Datasets**: CreateJob may name only manifests under the configured
//!   prefixes, so a caller cannot make the coordinator read whatever its
//!   credentials reach.

mod access;
mod scoped;

use ring::rand::SecureRandom;
use tonic::{Request, Status};

pub use access::{narrow, Access, JobKeys};
pub use scoped::Scope;

use crate::digest::sha256_hex;
use crate::error::{CoordError, Result};
use tributary_common::ids::JobId;

/// The metadata key of the bearer token.
pub const AUTHORIZATION: &str = "authorization";

/// Checks every call's bearer token against the configured one.
#[derive(Clone)]
pub struct TokenCheck {
    /// SHA-256 of the token: compared by digest, so the comparison's timing
    /// says nothing about the token.
    digest: Option<String>,
    /// Job credentials, under the same token.
    jobs: Option<JobKeys>,
}

impl std::fmt::Debug for TokenCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCheck")
            .field("required", &self.digest.is_some())
            .finish()
    }
}

impl TokenCheck {
    /// `None`: every caller is let in.
    pub fn new(token: Option<&str>) -> Self {
        Self {
            digest: token.map(|t| sha256_hex(t.as_bytes())),
            jobs: token.map(JobKeys::new),
        }
    }

    /// The credential of `job`, when a token is configured.
    pub fn mint(&self, job: &JobId) -> Option<String> {
        self.jobs.as_ref().map(|keys| keys.mint(job))
    }

    /// The interceptor: UNAUTHENTICATED, before any handler runs, for a
    /// call without the token.
    #[allow(clippy::result_large_err)]
    pub fn check<T>(&self, mut request: Request<T>) -> std::result::Result<Request<T>, Status> {
        let access = self.access(&request)?;
        request.extensions_mut().insert(access);
        Ok(request)
    }

    /// What the request's token reaches, or UNAUTHENTICATED.
    #[allow(clippy::result_large_err)]
    fn access<T>(&self, request: &Request<T>) -> std::result::Result<Access, Status> {
        let (Some(want), Some(jobs)) = (&self.digest, &self.jobs) else {
            return Ok(Access::Open);
        };
        let Some(value) = request.metadata().get(AUTHORIZATION) else {
            return Err(CoordError::Unauthenticated(
                "the coordinator requires a bearer token (authorization metadata)".into(),
            )
            .into());
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match token {
            Some(token) if sha256_hex(token.as_bytes()) == *want => Ok(Access::Operator),
            Some(token) => jobs
                .access(token)
                .ok_or_else(|| CoordError::Unauthenticated("wrong bearer token".into()).into()),
            None => Err(CoordError::Unauthenticated("wrong bearer token".into()).into()),
        }
    }
}

/// The longest a member secret may be.
pub const MAX_SECRET_BYTES: usize = 128;

/// Whether a Join's secret can serve as a new member's: 32 to 128 hex
/// digits (128 random bits or more), as `secrets.token_hex(16)` makes.
pub fn chosen_secret(secret: &str) -> bool {
    (32..=MAX_SECRET_BYTES).contains(&secret.len()) && secret.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new member secret: 128 random bits, hex.
pub fn new_secret() -> Result<String> {
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| CoordError::Precondition("the system's random source failed".into()))?;
    Ok(crate::digest::hex(&bytes))
}

/// What the store keeps of a secret.
pub fn secret_digest(secret: &str) -> String {
    sha256_hex(secret.as_bytes())
}

/// Which manifests CreateJob may name.
#[derive(Debug, Clone, Default)]
pub struct DatasetPolicy {
    /// Normalised URL prefixes; `None`: any.
    prefixes: Option<Vec<String>>,
}

impl DatasetPolicy {
    /// Any manifest may be named.
    pub fn any() -> Self {
        Self::default()
    }

    /// Only manifests under one of `prefixes` (URLs such as
    /// `s3://bucket/datasets/`); errors name a prefix that is not a URL.
    pub fn under(prefixes: &[String]) -> Result<Self> {
        let prefixes = prefixes
            .iter()
            .map(|p| {
                let mut url = normalise(p).map_err(|why| {
                    CoordError::Invalid(format!("allowed dataset prefix {p:?}: {why}"))
                })?;
                if !url.ends_with('/') {
                    url.push('/');
                }
                Ok(url)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            prefixes: Some(prefixes),
        })
    }

    pub fn is_open(&self) -> bool {
        self.prefixes.is_none()
    }

    /// Ok when `manifest_url` lies under an allowed prefix, after
    /// normalisation (`..` segments resolved), at a `/` boundary.
    pub fn check(&self, manifest_url: &str) -> Result<()> {
        self.check_field("manifest_url", manifest_url)
    }

    /// [`DatasetPolicy::check`] of the URL in config field `field` (e.g.
    /// `sources[2].manifest_url`), which errors name.
    pub fn check_field(&self, field: &str, manifest_url: &str) -> Result<()> {
        let Some(prefixes) = &self.prefixes else {
            return Ok(());
        };
        let url = normalise(manifest_url)
            .map_err(|why| CoordError::Invalid(format!("config.{field}: {why}")))?;
        // A prefix is a folder: the dataset at it, or anything under it.
        let under = |p: &String| url.starts_with(p.as_str()) || url == p[..p.len() - 1];
        if prefixes.iter().any(under) {
            return Ok(());
        }
        Err(CoordError::PermissionDenied(format!(
            "config.{field} {manifest_url:?} is not under an allowed dataset prefix ({})",
            prefixes.join(", ")
        )))
    }
}

/// The URL as the store will read it: parsed, dot segments resolved; any
/// encoded dot segment left is refused rather than guessed at.
fn normalise(raw: &str) -> std::result::Result<String, String> {
    let raw = raw.trim();
    // A bare path is a local dataset, as the worker reads it.
    let url = if raw.starts_with('/') {
        url::Url::from_file_path(raw).map_err(|()| format!("{raw:?} is not an absolute path"))?
    } else if !raw.contains("://") {
        return Err("a relative path cannot be checked against the allowed prefixes".into());
    } else {
        url::Url::parse(raw).map_err(|e| format!("not a URL ({e})"))?
    };
    let text = url.as_str().to_owned();
    let lower = text.to_ascii_lowercase();
    if lower.contains("%2e") || text.split('/').any(|s| s == ".." || s == ".") {
        return Err("dot segments are not allowed".into());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_outside_the_allowed_prefixes_is_refused_however_it_is_spelled() {
        let policy = DatasetPolicy::under(&["s3://bucket/data".into(), "file:///srv/sets/".into()])
            .expect("policy");
        for ok in [
            "s3://bucket/data/imagenet/manifest.json",
            "file:///srv/sets/a/manifest.json",
            "/srv/sets/b",
            "s3://bucket/data",
            "file:///srv/sets",
        ] {
            policy.check(ok).expect(ok);
        }
        for bad in [
            "s3://bucket/data-evil/manifest.json",
            "s3://bucket/other/manifest.json",
            "s3://other/data/manifest.json",
            "file:///srv/sets/../../etc/manifest.json",
            "file:///srv/sets/%2e%2e/x/manifest.json",
            "/srv/other/manifest.json",
            "/srv/sets/../other/manifest.json",
            "relative/manifest.json",
            "gs://bucket/data/manifest.json",
            "not a url",
        ] {
            assert!(policy.check(bad).is_err(), "{bad} must be refused");
        }
        DatasetPolicy::any()
            .check("s3://anything/at/all")
            .expect("open policy");
        // A mix's source is named by its field.
        let error = policy
            .check_field("sources[1].manifest_url", "s3://elsewhere/ds")
            .expect_err("outside")
            .to_string();
        assert!(
            error.contains("config.sources[1].manifest_url \"s3://elsewhere/ds\" is not under"),
            "{error}"
        );
    }

    #[test]
    fn a_call_without_the_right_token_is_unauthenticated() {
        let check = TokenCheck::new(Some("s3cret"));
        let with = |value: Option<&str>| {
            let mut request = Request::new(());
            if let Some(v) = value {
                request
                    .metadata_mut()
                    .insert(AUTHORIZATION, v.parse().expect("ascii"));
            }
            check.check(request).map(|_| ()).map_err(|s| s.code())
        };
        assert_eq!(with(Some("Bearer s3cret")), Ok(()));
        assert_eq!(with(None), Err(tonic::Code::Unauthenticated));
        assert_eq!(
            with(Some("Bearer wrong")),
            Err(tonic::Code::Unauthenticated)
        );
        assert_eq!(with(Some("s3cret")), Err(tonic::Code::Unauthenticated));
        assert!(TokenCheck::new(None).check(Request::new(())).is_ok());
    }

    #[test]
    fn secrets_are_random_and_stored_only_as_digests() {
        let (a, b) = (new_secret().expect("a"), new_secret().expect("b"));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert_ne!(secret_digest(&a), a);
        assert_eq!(secret_digest(&a), secret_digest(&a));
    }
}
