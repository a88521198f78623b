//! One rank of a coordinated job, started in one call: open the dataset,
//! reach the coordinator (given, or started in-process by the caller),
//! create the job or find it, join it, and read with the sync or the
//! dynamic loader. The Python `Loader`, the CLI's quickstart and the test
//! rank are thin layers over [`Rank::start`].
//!
//! ```no_run
//! # async fn run() -> Result<(), tributary_worker::WorkerError> {
//! use std::collections::HashMap;
//! use tributary_worker::coordinated::Identity;
//! use tributary_worker::rank::{Coordinator, Credentials, JobSpec, Rank, RankConfig};
//!
//! let env: HashMap<String, String> = std::env::vars().collect();
//! let identity = Identity::from_torchrun_env(&env)?.expect("run under torchrun");
//! let coordinator = Coordinator::Shared(vec!["coord-0:7070".into(), "coord-1:7070".into()]);
//! let spec = JobSpec { batch_size: 256, epochs: Some(90), seed: 42, ..JobSpec::new("s3://bucket/imagenet") };
//! let mut rank = Rank::start(RankConfig {
//!     credentials: Credentials::Env { env, auth_token: None }, // TRIBUTARY_AUTH_TOKEN, TRIBUTARY_TLS_*
//!     ..RankConfig::new(spec, coordinator, "resnet", identity)
//! }).await?; // opens the dataset, creates the job (or finds it), joins, starts the loader
//! loop {
//!     while let Some(batch) = rank.next().await { let batch = batch?; /* train; on checkpoint: */
//!         let state = rank.state_dict()?; /* save it with the model, then */ rank.commit(&state).await?;
//!     }
//!     if !rank.next_epoch().await? { break }
//! }
//! # Ok(()) }
//! ```

mod config;
mod metrics;
mod ordered;
mod rank_zero;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;

use tributary_common::proto::v1;
use tributary_io::MetricsServer;

pub use config::{Coordinator, Credentials, InProcess, RankConfig, StartInProcess};
pub use ordered::OrderedReader;
pub use rank_zero::{
    rank_zero_address, wait_for_rank_zero, HostOptions, StartHost, COORDINATOR_PORT_VAR,
};
pub use tributary_common::job::{Field, JobSpec, Mode, Source, SpecError};

use crate::coordinated::{
    self, Client, DataParallel, DynamicLoader, Identity, LoaderState, Session, SyncLoader,
};
use crate::pipeline::metrics::{Metrics, MetricsSnapshot};
use crate::{Batch, CacheConfig, Datasets, InvalidConfig, Result, WorkerError};

enum Reader {
    Sync(SyncLoader),
    Dynamic(DynamicLoader),
    /// `shuffle = false`: no coordinator.
    Ordered(OrderedReader),
}

/// Where a rank stands: for a dynamic member, generation 0, rank 0 of 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Description {
    pub epoch: u64,
    pub generation: u64,
    /// The torchrun rank and world (a dynamic member: 0 of 1).
    pub rank: u32,
    pub world: u32,
    /// The part of the data the rank reads and the number of parts: its
    /// data-parallel group and `dp_size`, or its rank and world without
    /// groups.
    pub data_parallel: DataParallel,
}

/// A rank's membership of its job and its loader. The async methods are
/// cancel-safe where a caller may interrupt them (Ctrl-C in Python): no
/// batch is lost.
pub struct Rank {
    // Dropped before the in-process coordinator that serves it.
    reader: Reader,
    /// The membership (none for an ordered reader).
    session: Option<Arc<Session>>,
    _in_process: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// This rank is rank 0 hosting its world's coordinator.
    hosts: bool,
    address: String,
    /// Counted into by every loader of the rank.
    metrics: Arc<Metrics>,
    /// Serves them while the rank lives (`metrics_listen`).
    metrics_server: Option<MetricsServer>,
    /// A torchrun rank's rank and world (its plan's part may be its
    /// data-parallel group's).
    torchrun: Option<(u32, u32)>,
}

impl std::fmt::Debug for Rank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rank")
            .field("session", &self.session)
            .field("address", &self.address)
            .field("metrics_address", &self.metrics_address())
            .finish_non_exhaustive()
    }
}

/// Opens the rank's dataset, or each dataset of its mix (concurrently),
/// all reading through the rank's shard cache when it has one; a token
/// job's datasets cut into its rows.
/// Returns them with the digest of their manifests, as the job records its
/// own ([`tributary_io::dataset_sha256`]).
fn open_data(
    config: &RankConfig,
) -> impl std::future::Future<Output = Result<(Datasets, String)>> + Send {
    let (url, sources) = (
        config.spec.manifest_url.clone(),
        config.spec.sources.clone(),
    );
    let (epoch_samples, store) = (config.spec.epoch_samples, config.store.clone());
    let sequence = config.spec.sequence;
    let cache = config.cache.as_ref().map(CacheConfig::open).transpose();
    async move {
        let cache = cache?;
        let urls: Vec<String> = if sources.is_empty() {
            vec![url]
        } else {
            sources.iter().map(|s| s.manifest_url.clone()).collect()
        };
        let opened = futures::future::try_join_all(urls.iter().map(|url| {
            let store = store.clone();
            async move { Ok::<_, WorkerError>(tributary_io::open_any(url, &store).await?) }
        }))
        .await?;
        let digests: Vec<String> = opened.iter().map(|d| d.manifest_sha256()).collect();
        let digest = tributary_io::dataset_sha256(&digests, !sources.is_empty());
        let takes: Vec<_> = sources.iter().map(|s| s.take).collect();
        let datasets = Datasets::open(opened, &takes, epoch_samples, sequence, cache).await?;
        Ok((datasets, digest))
    }
}

/// The spec's dataset URLs (its URL, or each source's) in one form before
/// they cross to the coordinator: a trailing `/manifest.json` dropped
/// ([`tributary_io::dataset_url`], so that `ds` and `ds/manifest.json` name
/// one job), local paths made absolute against `cwd`
/// ([`tributary_io::location::absolute_url`]).
fn absolute_urls(spec: &mut JobSpec, cwd: &std::path::Path) {
    let absolute = |url: &mut String| {
        if !url.is_empty() {
            let directory = tributary_io::dataset_url(url).to_owned();
            *url = tributary_io::location::absolute_url(&directory, cwd);
        }
    };
    absolute(&mut spec.manifest_url);
    for source in &mut spec.sources {
        absolute(&mut source.manifest_url);
    }
}

impl Rank {
    /// Validates `config`, opens the dataset, reaches the coordinator,
    /// creates the job (or checks it against `config`), joins it and starts
    /// the loader of the job's mode. With `config.shuffle == false`
    /// it reads its part of the unshuffled split instead, without a
    /// coordinator (see [`OrderedReader`]).
    /// With `config.metrics_listen` it listens first, so that an address in
    /// use fails before the rank joins anything.
    pub async fn start(mut config: RankConfig) -> Result<Self> {
        config.validate()?;
        let listener = metrics::listen(config.metrics_listen.take()).await?;
        let labels = metrics::Labels::of(&config.job, &config.identity);
        let torchrun = match config.identity {
            Identity::Torchrun { rank, world, .. } => Some((rank, world)),
            Identity::Name(_) => None,
        };
        let mut rank = if config.shuffle {
            Self::start_coordinated(config).await?
        } else {
            Self::start_ordered(config).await?
        };
        rank.metrics_server = metrics::serve(listener, &rank.metrics, &labels)?;
        rank.torchrun = torchrun;
        Ok(rank)
    }

    async fn start_coordinated(mut config: RankConfig) -> Result<Self> {
        // The job's URLs reach the coordinator, which would resolve a
        // relative local path in its own working directory: resolve them
        // in the rank's.
        let cwd = std::env::current_dir()
            .map_err(|e| WorkerError::Config(format!("cannot read the working directory: {e}")))?;
        absolute_urls(&mut config.spec, &cwd);
        let (dataset, manifest_sha256) = open_data(&config).await?;
        let RankConfig {
            spec,
            store,
            coordinator,
            credentials,
            deadline,
            job: name,
            identity,
            member_secret,
            decode,
            dynamic,
            epoch,
            stripe,
            ..
        } = config;
        let hosts = matches!(&coordinator, Coordinator::RankZero { host: Some(_), .. });
        let (addresses, credentials, in_process) = match coordinator {
            // Resolved once the addresses are checked (below).
            Coordinator::Shared(addresses) => (addresses, Some(credentials), None),
            // An in-process coordinator asks for nothing.
            Coordinator::InProcess(start) => {
                let started = start(store).await?;
                (vec![started.address], None, Some(started.guard))
            }
            Coordinator::RankZero { address, host } => {
                let credentials = credentials.resolve()?;
                let guard = match host {
                    Some(start) => {
                        let options = HostOptions {
                            listen: address.clone(),
                            store,
                            auth_token: credentials
                                .auth_token
                                .as_ref()
                                .map(|t| t.secret().to_owned()),
                        };
                        let started = start(options).await?;
                        tracing::info!(address = started.address, "rank 0 hosts the coordinator");
                        Some(started.guard)
                    }
                    None => {
                        let who = match &identity {
                            Identity::Torchrun { rank, .. } => format!("rank {rank}"),
                            Identity::Name(name) => format!("member {name:?}"),
                        };
                        wait_for_rank_zero(&address, &who, deadline).await?;
                        None
                    }
                };
                (vec![address], Some(Credentials::Given(credentials)), guard)
            }
        };
        let client = Client::new(&addresses)?;
        let credentials = match credentials {
            Some(credentials) => credentials.resolve()?,
            None => coordinated::ClientCredentials::default(),
        };
        let client = Arc::new(
            client
                .with_credentials(&credentials)?
                .with_deadline(deadline),
        );
        coordinated::create_job(&client, &name, v1::JobConfig::from(&spec)).await?;
        let secret = member_secret.as_deref().unwrap_or("");
        let who = coordinated::Who {
            job: &name,
            identity: &identity,
            manifest_sha256: &manifest_sha256,
        };
        let session = Arc::new(Session::join_with(client, &who, secret).await?);
        let reader = match spec.mode {
            Mode::Dynamic => Reader::Dynamic(
                DynamicLoader::start(Arc::clone(&session), dataset, decode, dynamic).await?,
            ),
            Mode::Sync => {
                let epoch = epoch.unwrap_or(session.epoch());
                let loader =
                    SyncLoader::start_at(Arc::clone(&session), dataset, decode, stripe, epoch)
                        .await?;
                // A process of its own (not a DataLoader worker sharing its
                // rank's membership) must not replay what the group committed.
                Reader::Sync(match member_secret {
                    None => loader.guard_replay(&session.joined()),
                    Some(_) => loader,
                })
            }
        };
        let mut rank = Self::new(reader, Some(session), in_process, addresses.join(","));
        rank.hosts = hosts;
        Ok(rank)
    }

    async fn start_ordered(config: RankConfig) -> Result<Self> {
        // Peers of a data-parallel group read their group's part.
        let Some(DataParallel { rank, size: world }) = config.identity.part() else {
            return Err(WorkerError::Invalid(InvalidConfig::UnshuffledDynamic));
        };
        let (dataset, _) = open_data(&config).await?;
        let loader = crate::LoaderConfig {
            plan: crate::PlanConfig {
                seed: config.spec.seed,
                epoch: config.epoch.unwrap_or(0),
                rank: rank as usize,
                world: world as usize,
                batch_size: config.spec.batch_size as usize,
                shuffle: false,
                tail: config.tail,
                stripe: config.stripe,
                ..crate::PlanConfig::default()
            },
            decode: config.decode,
        };
        let reader = Reader::Ordered(OrderedReader::start(dataset, loader).await?);
        Ok(Self::new(reader, None, None, String::new()))
    }

    fn new(
        reader: Reader,
        session: Option<Arc<Session>>,
        in_process: Option<Box<dyn std::any::Any + Send + Sync>>,
        address: String,
    ) -> Self {
        let metrics = Arc::clone(match &reader {
            Reader::Sync(l) => l.metrics(),
            Reader::Dynamic(l) => l.metrics(),
            Reader::Ordered(l) => l.metrics(),
        });
        Self {
            reader,
            session,
            _in_process: in_process,
            hosts: false,
            address,
            metrics,
            metrics_server: None,
            torchrun: None,
        }
    }

    /// The next batch of the epoch; `None` at its end (then call
    /// [`Rank::next_epoch`]).
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        match &mut self.reader {
            Reader::Sync(l) => l.next().await,
            Reader::Dynamic(l) => l.next().await,
            Reader::Ordered(l) => l.next().await,
        }
    }

    /// Moves to the next epoch; false when the job is finished.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        match &mut self.reader {
            Reader::Sync(l) => l.next_epoch().await,
            Reader::Dynamic(l) => l.next_epoch().await,
            Reader::Ordered(l) => l.next_epoch().await,
        }
    }

    /// Starts `epoch` over from its first batch (sync): the epoch of the
    /// rank's generation, or the next one.
    pub async fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        match &mut self.reader {
            Reader::Sync(loader) => loader.set_epoch(epoch).await,
            Reader::Ordered(loader) => loader.set_epoch(epoch).await,
            Reader::Dynamic(_) => Err(WorkerError::Config(
                "set_epoch() is for mode=\"sync\"; dynamic members read the job's current epoch"
                    .into(),
            )),
        }
    }

    /// Whether every epoch of the job is done.
    pub fn finished(&self) -> bool {
        match &self.reader {
            Reader::Sync(l) => l.finished(),
            Reader::Dynamic(l) => l.finished(),
            Reader::Ordered(_) => false,
        }
    }

    /// The job's mode: sync or dynamic.
    pub fn mode(&self) -> v1::Mode {
        match &self.reader {
            Reader::Sync(_) | Reader::Ordered(_) => v1::Mode::Sync,
            Reader::Dynamic(_) => v1::Mode::Dynamic,
        }
    }

    /// Samples of this rank's part of the current generation (sync); a
    /// dynamic member has no fixed part: `None`.
    pub fn samples(&self) -> Option<u64> {
        match &self.reader {
            Reader::Sync(l) => Some(l.samples()),
            Reader::Ordered(l) => Some(l.samples()),
            Reader::Dynamic(_) => None,
        }
    }

    pub fn describe(&self) -> Description {
        let (epoch, generation, part) = match &self.reader {
            Reader::Sync(l) => (l.epoch(), l.generation(), (l.rank(), l.world())),
            Reader::Dynamic(l) => (l.epoch(), 0, (0, 1)),
            Reader::Ordered(l) => (l.epoch(), 0, (l.rank(), l.world())),
        };
        let (rank, world) = match &self.reader {
            Reader::Dynamic(_) => (0, 1),
            _ => self.torchrun.unwrap_or(part),
        };
        Description {
            epoch,
            generation,
            rank,
            world,
            data_parallel: DataParallel {
                rank: part.0,
                size: part.1,
            },
        }
    }

    /// The member's name (a rejoined dynamic member's new one); an
    /// ordered reader, which joins nothing, is `rank-N`.
    pub fn member(&self) -> String {
        match &self.session {
            Some(session) => session.member(),
            None => format!("rank-{}", self.describe().rank),
        }
    }

    /// The membership (its client reaches the coordinator); none for an
    /// ordered reader.
    pub fn session(&self) -> Option<&Arc<Session>> {
        self.session.as_ref()
    }

    /// The coordinator's addresses: those given, or the in-process one's.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// What the rank's loaders counted, over the rank's life.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.metrics.snapshot()
    }

    /// Where the rank serves `/metrics` (`RankConfig::metrics_listen`,
    /// its port chosen when 0 was asked); `None` when it does not.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_server.as_ref().map(MetricsServer::address)
    }

    fn sync(&self, what: &str) -> Result<&SyncLoader> {
        match &self.reader {
            Reader::Sync(l) => Ok(l),
            Reader::Dynamic(_) => Err(WorkerError::Config(format!(
                "{what} is for mode=\"sync\"; dynamic members acknowledge what they read instead"
            ))),
            Reader::Ordered(_) => Err(WorkerError::Config(format!(
                "{what} is for shuffled training reads; a shuffle=False loader reads its whole split on every pass and keeps no progress"
            ))),
        }
    }

    /// The state to save with a checkpoint (sync).
    pub fn state_dict(&self) -> Result<LoaderState> {
        Ok(self.sync("state_dict()")?.state_dict())
    }

    /// Tells the coordinator a checkpoint holding `state` is durable: a
    /// restart resumes after it (sync).
    pub async fn commit(&self, state: &LoaderState) -> Result<()> {
        self.sync("commit()")?.commit(state).await
    }

    /// Reports what the trainer consumed (`state`) and waits for the
    /// answer (sync): for a rank whose batches other processes read.
    pub async fn report(&self, state: &LoaderState) -> Result<()> {
        self.sync("report()")?.report_state(state).await
    }

    /// Resumes from a restored checkpoint's state (sync): the rank reads
    /// on from it, or gets an error saying why it cannot (see
    /// [`SyncLoader::load_state_dict`]). Call it before reading.
    pub async fn load_state_dict(&mut self, state: &LoaderState) -> Result<()> {
        match &mut self.reader {
            Reader::Sync(l) => l.load_state_dict(state).await,
            _ => self.sync("load_state_dict()").map(|_| ()),
        }
    }

    /// Refuses to read while this new process must resume from the job's
    /// commit first (sync; see [`SyncLoader::check_resumed`]).
    pub fn check_resumed(&self) -> Result<()> {
        match &self.reader {
            Reader::Sync(l) => l.check_resumed(),
            _ => Ok(()),
        }
    }

    /// Whether this rank is rank 0 hosting its world's coordinator
    /// ([`Coordinator::RankZero`]).
    pub fn hosts_coordinator(&self) -> bool {
        self.hosts
    }

    /// For rank 0 hosting its world's coordinator, before its process
    /// exits: waits, at most `within`, until the other ranks are done with
    /// it (the job finished, or no other member left: their leases expire
    /// once they exit), so that a rank 0 that ends first does not take the
    /// coordinator from ranks still reporting their last batches. Returns
    /// at once for any other rank.
    pub async fn linger(&self, within: std::time::Duration) -> Result<()> {
        let Some(session) = self.session.as_ref().filter(|_| self.hosts) else {
            return Ok(());
        };
        let until = tokio::time::Instant::now() + within;
        let me = session.member();
        let request = v1::JobRequest {
            job: session.job.clone(),
        };
        while tokio::time::Instant::now() < until {
            let status = session
                .client
                .send(&request, |mut c, r| async move { c.get_status(r).await })
                .await?;
            if status.finished || status.members.iter().all(|m| *m == me) {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        tracing::warn!(
            job = session.job.as_str(),
            "rank 0 exits while other ranks may still use the coordinator it hosts"
        );
        Ok(())
    }

    /// Leaves the job: a dynamic member's unacked units return to the pool.
    pub async fn leave(&self) -> Result<()> {
        match &self.session {
            Some(session) => session.leave().await,
            None => Ok(()),
        }
    }

    /// Before a process that is done with this rank exits: leaves the job
    /// now (waiting at most `within`) rather than hold the membership
    /// until its lease expires. Rank 0 hosting the coordinator then ends
    /// its [`Self::linger`] as soon as the other ranks are gone, and a
    /// re-run of this rank joins at once (a Join waits out a live lease of
    /// its identity). What the job delivered is untouched: a sync rank's
    /// part is its rank's, not its member's, and a dynamic member's unacked
    /// units return to the pool as they would when its lease expired.
    /// Rank 0 hosting the coordinator stays (it lingers instead). A failure
    /// is logged, not returned: the process is exiting, and the lease
    /// expires anyway.
    pub async fn leave_at_exit(&self, within: std::time::Duration) {
        if self.hosts {
            return;
        }
        let outcome = match tokio::time::timeout(within, self.leave()).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {within:?}"),
        };
        tracing::debug!(
            error = outcome.as_str(),
            "leaving the job at exit failed; the member's lease expires instead"
        );
    }
}
