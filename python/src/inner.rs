//! The native side of a Python `Loader`, free of Python: a tokio runtime,
//! the coordinator (an address, or one in-process on the in-memory store),
//! the membership and the rank's loader.

use std::collections::HashMap;
use std::sync::Arc;

use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_worker::coordinated::{
    self, AuthToken, Client, ClientCredentials, DynamicLoader, DynamicOptions, Identity,
    LoaderState, OnLeaseLost, Session, SyncLoader,
};
use tributary_worker::pipeline::decode::augment::AugmentConfig;
use tributary_worker::{
    Batch, Dataset, LoaderConfig, OnError, Result, StoreOptions, Stripe, WorkerError,
};

/// Everything the Python constructor takes, kept to rebuild after `fork()`.
#[derive(Debug, Clone)]
pub struct Args {
    pub dataset: String,
    pub coordinator: Option<String>,
    pub job: String,
    pub batch_size: u32,
    pub image_size: u32,
    pub seed: u64,
    pub mode: v1::Mode,
    pub epochs: u64,
    pub shuffle_buffer: u32,
    pub decode_threads: Option<usize>,
    /// Explicit torchrun identity parts; `None` reads the environment.
    pub rank: Option<u32>,
    pub world_size: Option<u32>,
    pub run_id: Option<String>,
    pub restart_count: Option<u64>,
    /// Dynamic mode: the member name.
    pub name: Option<String>,
    pub storage_options: HashMap<String, String>,
    /// How long coordinator calls retry before they fail.
    pub timeout: std::time::Duration,
    /// Yield each batch's sample ids as a third array.
    pub return_ids: bool,
    /// A DataLoader worker process's share: every `count`-th batch.
    pub stripe: Stripe,
    /// Sync mode: the epoch to read first (default: the generation's).
    pub epoch: Option<u64>,
    /// Bad samples: raise (the default) or skip, up to a fraction.
    pub on_error: OnError,
    pub max_bad_fraction: f64,
    /// The process environment, read once at the edge.
    pub env: HashMap<String, String>,
    /// The bearer token given as `auth_token=` (else the environment's).
    pub auth_token: Option<String>,
    /// Dynamic: samples leased ahead of the trainer (`None`: the default).
    pub lookahead: Option<u64>,
    /// Dynamic: what a member whose lease expired does.
    pub on_lease_lost: OnLeaseLost,
    /// The secret of the membership this process shares (a DataLoader
    /// worker passes its parent's, so its Join may replace it).
    pub member_secret: Option<String>,
}

impl Args {
    fn identity(&self) -> Result<Identity> {
        if self.mode == v1::Mode::Dynamic {
            let name = match &self.name {
                // Each worker process is a member of its own.
                Some(name) if self.stripe.count > 1 => format!("{name}-w{}", self.stripe.index),
                Some(name) => name.clone(),
                None => {
                    let host = self.env.get("HOSTNAME").map_or("host", String::as_str);
                    format!("{host}-{}", std::process::id())
                }
            };
            return Ok(Identity::Name(name));
        }
        let from_env = Identity::from_torchrun_env(&self.env)?;
        let (env_rank, env_world, env_run, env_restart) = match from_env {
            Some(Identity::Torchrun {
                rank,
                world,
                run_id,
                restart,
            }) => (Some(rank), Some(world), Some(run_id), Some(restart)),
            _ => (None, None, None, None),
        };
        let rank = self.rank.or(env_rank).unwrap_or(0);
        let world = self.world_size.or(env_world).unwrap_or(1);
        if world == 0 || rank >= world {
            return Err(WorkerError::Config(format!(
                "rank {rank} is outside a world of {world} ranks (world_size must exceed rank)"
            )));
        }
        if self.coordinator.is_none() && world > 1 {
            return Err(WorkerError::Config(format!(
                "a world of {world} ranks needs a shared coordinator: pass coordinator=\"host:port\" \
                 (coordinator=None runs one rank alone)"
            )));
        }
        Ok(Identity::Torchrun {
            rank,
            world,
            run_id: self
                .run_id
                .clone()
                .or(env_run)
                .unwrap_or_else(|| "local".into()),
            restart: self.restart_count.or(env_restart).unwrap_or(0),
        })
    }

    /// How the client proves itself to a coordinator given by address:
    /// `auth_token=` over `TRIBUTARY_AUTH_TOKEN(_FILE)`, TLS from the
    /// environment. The in-process coordinator asks for nothing.
    fn credentials(&self) -> Result<ClientCredentials> {
        if self.coordinator.is_none() {
            return Ok(ClientCredentials::default());
        }
        let mut credentials = ClientCredentials::from_env(&self.env)?;
        if let Some(token) = &self.auth_token {
            credentials.auth_token = Some(AuthToken::new(token, "auth_token")?);
        }
        Ok(credentials)
    }

    fn validate(&self) -> Result<()> {
        if self.batch_size == 0 {
            return Err(WorkerError::Config("batch_size must be at least 1".into()));
        }
        if self.image_size == 0 {
            return Err(WorkerError::Config("image_size must be at least 1".into()));
        }
        if self.epochs == 0 {
            return Err(WorkerError::Config("epochs must be at least 1".into()));
        }
        if self.decode_threads == Some(0) {
            return Err(WorkerError::Config(
                "decode_threads must be at least 1".into(),
            ));
        }
        if self.stripe.count == 0 || self.stripe.index >= self.stripe.count {
            return Err(WorkerError::Config(format!(
                "worker=({}, {}): the worker id must be below the number of workers",
                self.stripe.index, self.stripe.count
            )));
        }
        if self.mode == v1::Mode::Dynamic && self.coordinator.is_none() && self.stripe.count > 1 {
            return Err(WorkerError::Config(format!(
                "{} worker processes of a dynamic job need a shared coordinator: pass \
                 coordinator=\"host:port\" (with coordinator=None each would read the whole epoch)",
                self.stripe.count
            )));
        }
        if self.mode != v1::Mode::Dynamic && self.lookahead.is_some() {
            return Err(WorkerError::Config(
                "lookahead= is for mode=\"dynamic\"; sync ranks read a fixed part".into(),
            ));
        }
        tributary_worker::pipeline::decode::bad_samples::validate_fraction(self.max_bad_fraction)
            .map_err(WorkerError::Config)?;
        if self.mode == v1::Mode::Dynamic && self.epoch.is_some() {
            return Err(WorkerError::Config(
                "epoch= is for mode=\"sync\"; dynamic members read the job's current epoch".into(),
            ));
        }
        Ok(())
    }
}

enum Reader {
    Sync(SyncLoader),
    Dynamic(DynamicLoader),
}

/// A started loader: the runtime, and the rank's state that runs on it.
pub struct Inner {
    // Shut down before the rank is dropped.
    pub runtime: Runtime,
    pub rank: Rank,
}

/// The runtime a loader runs on. Dropping it cancels every task and waits
/// at most [`Runtime::SHUTDOWN`] for blocking reads (a stalled local file
/// system), so an interrupted program still exits.
pub struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    const SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn new() -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tributary")
            .enable_all()
            .build()
            .map_err(|e| WorkerError::Stopped(format!("cannot start the runtime: {e}")))?;
        Ok(Self(Some(runtime)))
    }
}

impl std::ops::Deref for Runtime {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref().expect("taken only on drop")
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_timeout(Self::SHUTDOWN);
        }
    }
}

/// A rank's membership and loader. Its async methods are cancel-safe
/// where a Python caller may interrupt them (Ctrl-C): a batch is never lost.
pub struct Rank {
    // Dropped after the reader: the in-process coordinator serves it.
    reader: Reader,
    session: Arc<Session>,
    _coordinator: Option<LocalCoordinator>,
    /// The coordinator's address: the one given, or the in-process one's.
    pub address: String,
    /// The current epoch has ended (`__iter__` then starts the next).
    pub exhausted: bool,
}

impl Rank {
    /// Opens the dataset, creates or joins the job and starts the loader.
    pub async fn start(args: &Args) -> Result<Self> {
        args.validate()?;
        let identity = args.identity()?;
        let (reader, session, coordinator) = start(args, identity).await?;
        let address = match (&coordinator, &args.coordinator) {
            (Some(local), _) => local.address().to_owned(),
            (None, given) => given.clone().unwrap_or_default(),
        };
        Ok(Self {
            reader,
            session,
            _coordinator: coordinator,
            address,
            exhausted: false,
        })
    }

    /// The next batch of the epoch; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        let item = match &mut self.reader {
            Reader::Sync(l) => l.next().await,
            Reader::Dynamic(l) => l.next().await,
        };
        self.exhausted = item.is_none();
        item
    }

    /// Moves to the next epoch; false when the job is finished.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        let more = match &mut self.reader {
            Reader::Sync(l) => l.next_epoch().await,
            Reader::Dynamic(l) => l.next_epoch().await,
        }?;
        self.exhausted = !more;
        Ok(more)
    }

    /// Starts `epoch` over from its first batch (sync).
    pub async fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        let Reader::Sync(loader) = &mut self.reader else {
            return Err(WorkerError::Config(
                "set_epoch() is for mode=\"sync\"; dynamic members read the job's current epoch"
                    .into(),
            ));
        };
        loader.set_epoch(epoch).await?;
        self.exhausted = loader.finished();
        Ok(())
    }

    pub fn finished(&self) -> bool {
        match &self.reader {
            Reader::Sync(l) => l.finished(),
            Reader::Dynamic(l) => l.finished(),
        }
    }

    fn sync(&self, what: &str) -> Result<&SyncLoader> {
        match &self.reader {
            Reader::Sync(l) => Ok(l),
            Reader::Dynamic(_) => Err(WorkerError::Config(format!(
                "{what} is for mode=\"sync\"; dynamic members acknowledge what they read instead"
            ))),
        }
    }

    /// Samples of this rank's part of the current generation (sync).
    pub fn samples(&self) -> Result<u64> {
        Ok(self.sync("len()")?.samples())
    }

    pub fn describe(&self) -> (u64, u64, u32, u32) {
        match &self.reader {
            Reader::Sync(l) => (l.epoch(), l.generation(), l.rank(), l.world()),
            Reader::Dynamic(l) => (l.epoch(), 0, 0, 1),
        }
    }

    pub fn member(&self) -> String {
        self.session.member()
    }

    pub fn state_dict(&self) -> Result<LoaderState> {
        Ok(self.sync("state_dict()")?.state_dict())
    }

    pub async fn commit(&self, state: &LoaderState) -> Result<()> {
        self.sync("commit()")?.commit(state).await
    }

    pub async fn load_state_dict(&self, state: &LoaderState) -> Result<()> {
        self.sync("load_state_dict()")?.load_state_dict(state).await
    }
}

async fn start(
    args: &Args,
    identity: Identity,
) -> Result<(Reader, Arc<Session>, Option<LocalCoordinator>)> {
    let mut options = StoreOptions::from_vars(args.env.clone());
    for (key, value) in &args.storage_options {
        options.set(key, value.clone());
    }
    let dataset = Dataset::open(&args.dataset, &options).await?;
    let (addresses, coordinator) = match &args.coordinator {
        Some(address) => (vec![address.clone()], None),
        None => {
            let local = LocalCoordinator::start(options.clone())
                .await
                .map_err(|e| WorkerError::Stopped(format!("cannot start a coordinator: {e}")))?;
            (vec![local.address().to_owned()], Some(local))
        }
    };
    let client = Arc::new(
        Client::new(&addresses)?
            .with_credentials(&args.credentials()?)?
            .with_deadline(args.timeout),
    );
    let config = v1::JobConfig {
        manifest_url: args.dataset.clone(),
        seed: args.seed,
        batch_size: args.batch_size,
        epochs: args.epochs,
        remainder: v1::RemainderPolicy::RemainderDrop as i32,
        mode: args.mode as i32,
        shuffle_buffer: args.shuffle_buffer,
        ..v1::JobConfig::default()
    };
    coordinated::create_job(&client, &args.job, config).await?;
    let secret = args.member_secret.as_deref().unwrap_or("");
    let session = Arc::new(Session::join_as(client, &args.job, &identity, secret).await?);
    let mut base = LoaderConfig {
        augment: AugmentConfig {
            size: args.image_size,
            ..AugmentConfig::default()
        },
        on_error: args.on_error,
        max_bad_fraction: args.max_bad_fraction,
        ..LoaderConfig::default()
    };
    if let Some(threads) = args.decode_threads {
        base.decode_threads = threads;
    }
    if args.mode == v1::Mode::Sync {
        base.stripe = args.stripe;
    }
    let reader = match args.mode {
        v1::Mode::Dynamic => {
            let options = DynamicOptions {
                lookahead: args.lookahead,
                on_lease_lost: args.on_lease_lost,
                ..DynamicOptions::default()
            };
            Reader::Dynamic(
                DynamicLoader::start(Arc::clone(&session), dataset, base, options).await?,
            )
        }
        _ => {
            let session = Arc::clone(&session);
            let epoch = args.epoch.unwrap_or(session.epoch());
            Reader::Sync(SyncLoader::start_at(session, dataset, base, epoch).await?)
        }
    };
    Ok((reader, session, coordinator))
}
