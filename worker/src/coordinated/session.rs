//! One membership of one job: the member name and secret that Join
//! returned, renewed in the background, and carried by every call the
//! member makes.
//!
//! A torchrun rank's membership is its identity, not its lease: when the
//! lease expired anyway (a coordinator failover that outlasted the member
//! TTL, or a long stall), the session joins again as the same rank, which
//! puts it back in the same generation; calls made through
//! [`Session::send`] do that transparently. A dynamic member whose lease
//! expired has had its units handed to others: the session marks itself
//! lost, and its loader either joins again as a new member
//! ([`Session::rejoin`]) or stops, as its options say.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::task::JoinHandle;
use tonic::Code;
use tracing::Instrument;
use tributary_common::job::JobSpec;
use tributary_common::proto::v1;

use super::client::Stub;
use super::{Client, Identity};
use crate::error::{Result, WorkerError};

/// A request made on a member's behalf: it carries the member's name and
/// the secret its Join returned.
pub trait MemberScoped: Clone {
    fn sign(&mut self, member: &str, secret: &str);
}

macro_rules! member_scoped {
    ($($request:ty),*) => {$(
        impl MemberScoped for $request {
            fn sign(&mut self, member: &str, secret: &str) {
                member.clone_into(&mut self.member);
                secret.clone_into(&mut self.secret);
            }
        }
    )*};
}

member_scoped!(
    v1::MemberRequest,
    v1::AssignmentRequest,
    v1::AcquireRequest,
    v1::ReportRequest,
    v1::CommitRequest
);

/// What the last Join returned, and how many joins came before it.
#[derive(Clone)]
struct Membership {
    joined: v1::JoinResponse,
    version: u64,
}

/// The part of a session its keep-alive task shares.
/// What every Join of a membership says of the joiner: its job, its
/// identity, and the digest of the dataset it opened (empty: not given).
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    pub job: &'a str,
    pub identity: &'a Identity,
    pub manifest_sha256: &'a str,
}

struct Shared {
    client: Arc<Client>,
    job: String,
    identity: Identity,
    /// See [`Who::manifest_sha256`].
    manifest_sha256: String,
    membership: RwLock<Membership>,
    /// Held while joining again, so concurrent callers join once.
    rejoining: tokio::sync::Mutex<()>,
    lost: AtomicBool,
}

/// One membership of a job, kept alive in the background until dropped.
pub struct Session {
    pub client: Arc<Client>,
    pub job: String,
    /// The span the member's background work runs in: job, member, rank
    /// and generation (JSON logs carry them on every line).
    pub span: tracing::Span,
    shared: Arc<Shared>,
    keepalive: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the secret.
        f.debug_struct("Session")
            .field("job", &self.job)
            .field("member", &self.member())
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}

/// How long a Join refused because the member's previous lease is live
/// (a Join whose answer was lost) is retried: until that lease expires.
const JOIN_RETRY: Duration = Duration::from_secs(60);

/// Joins as `identity`; `previous` is the secret of the membership this
/// one replaces, if any (empty for a first Join). A Join refused because
/// the identity's previous lease is live (its answer was lost, and with it
/// the secret) is retried until that lease expires.
async fn join(
    client: &Client,
    who: &Who<'_>,
    previous: &str,
    resume: Option<v1::Resume>,
) -> Result<v1::JoinResponse> {
    let Who {
        job,
        identity,
        manifest_sha256,
    } = *who;
    let request = v1::JoinRequest {
        job: job.to_owned(),
        identity: Some(identity.to_proto()),
        secret: previous.to_owned(),
        resume,
        manifest_sha256: manifest_sha256.to_owned(),
    };
    let deadline = tokio::time::Instant::now() + JOIN_RETRY;
    loop {
        match client
            .send(&request, |mut c, r| async move { c.join(r).await })
            .await
        {
            Err(WorkerError::Coordinator { code, message })
                if code == Code::AlreadyExists && tokio::time::Instant::now() < deadline =>
            {
                tracing::info!(
                    job,
                    message,
                    "waiting for the previous membership to expire"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            result => return result,
        }
    }
}

/// Whether `error` says the coordinator does not know the member (or job).
fn not_found(error: &WorkerError) -> bool {
    matches!(
        error,
        WorkerError::Coordinator {
            code: Code::NotFound,
            ..
        }
    )
}

/// Whether the coordinator refused the call's member secret.
fn permission_denied(error: &WorkerError) -> bool {
    matches!(
        error,
        WorkerError::Coordinator {
            code: Code::PermissionDenied,
            ..
        }
    )
}

impl Shared {
    fn who(&self) -> Who<'_> {
        Who {
            job: &self.job,
            identity: &self.identity,
            manifest_sha256: &self.manifest_sha256,
        }
    }

    fn membership(&self) -> Membership {
        self.membership
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Joins again unless another caller did since `seen`.
    async fn join_again(&self, seen: u64) -> Result<v1::JoinResponse> {
        let _one = self.rejoining.lock().await;
        let current = self.membership();
        if current.version != seen {
            return Ok(current.joined);
        }
        let joined = join(&self.client, &self.who(), &current.joined.secret, None).await?;
        tracing::warn!(
            job = self.job,
            was = current.joined.member,
            member = joined.member,
            generation = joined.generation,
            epoch = joined.epoch,
            "the member's lease had expired; joined again"
        );
        *self.membership.write().unwrap_or_else(|e| e.into_inner()) = Membership {
            joined: joined.clone(),
            version: seen + 1,
        };
        self.lost.store(false, Ordering::Relaxed);
        Ok(joined)
    }

    async fn send<R, T, F, Fut>(&self, request: &R, call: F) -> Result<T>
    where
        R: MemberScoped,
        F: Fn(Stub, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        self.send_within(Duration::ZERO, request, call).await
    }

    async fn send_within<R, T, F, Fut>(&self, wait: Duration, request: &R, call: F) -> Result<T>
    where
        R: MemberScoped,
        F: Fn(Stub, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let call = &call;
        let attempt = |membership: Membership| {
            let mut request = request.clone();
            request.sign(&membership.joined.member, &membership.joined.secret);
            self.client
                .call_within(wait, move |stub| call(stub, request.clone()))
        };
        // A call signed before another caller joined again (a keep-alive
        // retried through a failover) carries the old secret and is refused:
        // sign it anew and retry, a bounded number of times.
        let mut signed_again = 0;
        loop {
            let membership = self.membership();
            let member = membership.joined.member.clone();
            let version = membership.version;
            match attempt(membership).await {
                Err(error) if not_found(&error) => {
                    if !matches!(self.identity, Identity::Torchrun { .. }) {
                        self.lost.store(true, Ordering::Relaxed);
                        return Err(WorkerError::Stopped(format!(
                            "the coordinator forgot member {member:?} (its lease expired); its units went to others"
                        )));
                    }
                    self.join_again(version).await?;
                    return attempt(self.membership()).await;
                }
                Err(error)
                    if permission_denied(&error)
                        && signed_again < 3
                        && self.membership().version != version =>
                {
                    signed_again += 1;
                }
                result => return result,
            }
        }
    }
}

impl Session {
    /// Joins `job` as `identity`.
    pub async fn join(client: Arc<Client>, job: &str, identity: &Identity) -> Result<Self> {
        Self::join_as(client, job, identity, "").await
    }

    /// Joins `job` as `identity`, proving with `secret` (another process's
    /// membership of the same identity: a rank's DataLoader workers) that
    /// it may replace a live member of that name; the secret is kept.
    pub async fn join_as(
        client: Arc<Client>,
        job: &str,
        identity: &Identity,
        secret: &str,
    ) -> Result<Self> {
        let who = Who {
            job,
            identity,
            manifest_sha256: "",
        };
        Self::join_with(client, &who, secret).await
    }

    /// Joins as [`Session::join_as`] does, saying what `who` says (the
    /// digest of the dataset the rank opened, which the coordinator checks
    /// against the job's) in this Join and every later one.
    pub async fn join_with(client: Arc<Client>, who: &Who<'_>, secret: &str) -> Result<Self> {
        let Who {
            job,
            identity,
            manifest_sha256,
        } = *who;
        let joined = join(&client, who, secret, None).await?;
        let rank = match identity {
            Identity::Torchrun { rank, .. } => Some(*rank),
            Identity::Name(_) => None,
        };
        let span = tracing::info_span!(
            "member",
            job,
            member = joined.member,
            rank,
            generation = joined.generation
        );
        tracing::info!(
            parent: &span,
            job,
            member = joined.member,
            generation = joined.generation,
            "joined"
        );
        let shared = Arc::new(Shared {
            client: Arc::clone(&client),
            job: job.to_owned(),
            identity: identity.clone(),
            manifest_sha256: manifest_sha256.to_owned(),
            membership: RwLock::new(Membership { joined, version: 0 }),
            rejoining: tokio::sync::Mutex::default(),
            lost: AtomicBool::new(false),
        });
        let keepalive = tokio::spawn(keep_alive(Arc::clone(&shared)).instrument(span.clone()));
        Ok(Self {
            client,
            job: job.to_owned(),
            span,
            shared,
            keepalive: Mutex::new(Some(keepalive)),
        })
    }

    /// What the last Join returned (the member's secret included).
    pub fn joined(&self) -> v1::JoinResponse {
        self.shared.membership().joined
    }

    /// The member's name (a rejoined dynamic member's new one).
    pub fn member(&self) -> String {
        self.shared.membership().joined.member
    }

    /// The epoch the job was at when the member last joined.
    pub fn epoch(&self) -> u64 {
        self.shared.membership().joined.epoch
    }

    /// The job's spec, as the coordinator answered the Join.
    pub fn spec(&self) -> Result<JobSpec> {
        let config = self.shared.membership().joined.config.unwrap_or_default();
        JobSpec::try_from(config).map_err(|error| WorkerError::Coordinator {
            code: Code::Internal,
            message: format!("the job's config: {error}"),
        })
    }

    /// Whether the membership is gone (a dynamic member's lease expired,
    /// or a torchrun rank could not rejoin) and not joined again since.
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::Relaxed)
    }

    /// Joins the job again as a new member: a dynamic member whose lease
    /// expired carries on this way (what it held went to others).
    pub async fn rejoin(&self) -> Result<v1::JoinResponse> {
        let version = self.shared.membership().version;
        self.shared.join_again(version).await
    }

    /// Joins again as the same member, resuming from `resume` (a restored
    /// checkpoint's state): the coordinator puts the rank in the generation
    /// that resumes from it, or refuses, saying why.
    pub async fn resume(&self, resume: v1::Resume) -> Result<v1::JoinResponse> {
        let shared = &self.shared;
        let _one = shared.rejoining.lock().await;
        let current = shared.membership();
        let joined = join(
            &shared.client,
            &shared.who(),
            &current.joined.secret,
            Some(resume),
        )
        .await?;
        *shared.membership.write().unwrap_or_else(|e| e.into_inner()) = Membership {
            joined: joined.clone(),
            version: current.version + 1,
        };
        shared.lost.store(false, Ordering::Relaxed);
        Ok(joined)
    }

    /// Sends `request` as this member (its name and secret filled in), as
    /// [`Client::send`] does: when the coordinator no longer knows the
    /// member, a torchrun rank rejoins and retries once; a dynamic member
    /// is marked lost ([`Session::is_lost`]) and gets an error.
    pub async fn send<R, T, F, Fut>(&self, request: &R, call: F) -> Result<T>
    where
        R: MemberScoped,
        F: Fn(Stub, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        self.shared.send(request, call).await
    }

    /// [`Session::send`] of a long poll the coordinator may hold for
    /// `wait` before it answers ([`super::Client::call_within`]: the wait
    /// does not count against the call's timeouts).
    pub async fn send_within<R, T, F, Fut>(&self, wait: Duration, request: &R, call: F) -> Result<T>
    where
        R: MemberScoped,
        F: Fn(Stub, R) -> Fut,
        Fut: Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        self.shared.send_within(wait, request, call).await
    }

    /// A request naming the job; [`Session::send`] signs it.
    pub fn member_request(&self) -> v1::MemberRequest {
        v1::MemberRequest {
            job: self.job.clone(),
            ..v1::MemberRequest::default()
        }
    }

    /// Leaves the job: a dynamic member's unacked units return to the pool.
    pub async fn leave(&self) -> Result<()> {
        self.stop_keep_alive();
        let request = self.member_request();
        self.send(&request, |mut c, r| async move { c.leave(r).await })
            .await?;
        Ok(())
    }

    fn stop_keep_alive(&self) {
        let mut keepalive = self.keepalive.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(task) = keepalive.take() {
            task.abort();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stop_keep_alive();
    }
}

/// Renews the membership every third of its TTL, through whichever
/// replica leads. A torchrun rank the coordinator forgot joins again; a
/// dynamic member is marked lost, and renewal resumes once it has joined
/// again.
async fn keep_alive(shared: Arc<Shared>) {
    let request = v1::MemberRequest {
        job: shared.job.clone(),
        ..v1::MemberRequest::default()
    };
    loop {
        let ttl = Duration::from_millis(u64::from(shared.membership().joined.ttl_ms.max(300)));
        tokio::time::sleep(ttl / 3).await;
        if shared.lost.load(Ordering::Relaxed) {
            continue;
        }
        let result = shared
            .send(&request, |mut c, r| async move { c.keep_alive(r).await })
            .await;
        if let Err(error) = result {
            tracing::error!(%error, member = shared.membership().joined.member, "membership lost");
            shared.lost.store(true, Ordering::Relaxed);
        }
    }
}
