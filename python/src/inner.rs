//! The native side of a Python `Loader`, free of Python: a tokio runtime,
//! and the rank ([`tributary_worker::rank`]) built from the constructor's
//! arguments, with an in-process coordinator when none is given.

use std::collections::HashMap;
use std::path::PathBuf;

use tributary_common::proto::v1;
use tributary_coordinator::LocalCoordinator;
use tributary_io::cache::parse_bytes;
use tributary_worker::coordinated::{DynamicOptions, Identity, LoaderState, OnLeaseLost};
use tributary_worker::pipeline::metrics::MetricsSnapshot;
use tributary_worker::rank::{
    self, Coordinator, Credentials, Description, InProcess, MixSource, RankConfig,
};
use tributary_worker::{
    Batch, CacheConfig, Fields, LoaderConfig, OnError, Result, StoreOptions, Stripe, Tail,
    Transform, WorkerError,
};

/// Everything the Python constructor takes, kept to rebuild after `fork()`.
#[derive(Debug, Clone)]
pub struct Args {
    /// The dataset's URL; empty when `sources` mixes several.
    pub dataset: String,
    /// Datasets mixed (`dataset=[tributary.Source(...), ...]`).
    pub sources: Vec<MixSource>,
    /// Weighted sources: samples per epoch (0: all their samples).
    pub epoch_samples: u64,
    /// Yield each batch's sample datasets (positions in the mix).
    pub return_sources: bool,
    pub coordinator: Option<String>,
    pub job: String,
    pub batch_size: u32,
    /// What images become.
    pub transform: Transform,
    /// What a batch carries.
    pub fields: Fields,
    /// `false`: the unshuffled (evaluation) split, no coordinator.
    pub shuffle: bool,
    pub tail: Tail,
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
    /// `host:port` to serve `/metrics` on (see `metrics.rs`).
    pub metrics_listen: Option<String>,
    /// The local shard cache (`cache_dir=`, `cache_limit=`).
    pub cache: Option<CacheConfig>,
}

impl Args {
    /// Who joins: a dynamic member's name, or the torchrun rank (explicit
    /// parts over the environment's, else rank 0 of 1).
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
        Ok(Identity::Torchrun {
            rank: self.rank.or(env_rank).unwrap_or(0),
            world: self.world_size.or(env_world).unwrap_or(1),
            run_id: self
                .run_id
                .clone()
                .or(env_run)
                .unwrap_or_else(|| "local".into()),
            restart: self.restart_count.or(env_restart).unwrap_or(0),
        })
    }

    /// The rank's config; [`RankConfig::validate`] checks it.
    fn config(&self) -> Result<RankConfig> {
        let mut store = StoreOptions::from_vars(self.env.clone());
        for (key, value) in &self.storage_options {
            store.set(key, value.clone());
        }
        let coordinator = match &self.coordinator {
            Some(address) => Coordinator::Shared(vec![address.clone()]),
            None => Coordinator::InProcess(Box::new(|store: StoreOptions| {
                Box::pin(async move {
                    let local = LocalCoordinator::start(store).await.map_err(|e| {
                        WorkerError::Stopped(format!("cannot start a coordinator: {e}"))
                    })?;
                    Ok(InProcess {
                        address: local.address().to_owned(),
                        guard: Box::new(local),
                    })
                })
            })),
        };
        let mut loader = LoaderConfig {
            transform: self.transform.clone(),
            fields: self.fields.clone(),
            shuffle: self.shuffle,
            tail: self.tail,
            on_error: self.on_error,
            max_bad_fraction: self.max_bad_fraction,
            ..LoaderConfig::default()
        };
        if let Some(threads) = self.decode_threads {
            loader.decode_threads = threads;
        }
        Ok(RankConfig {
            store,
            credentials: Credentials::Env {
                env: self.env.clone(),
                auth_token: self.auth_token.clone(),
            },
            deadline: self.timeout,
            seed: self.seed,
            batch_size: self.batch_size,
            epochs: self.epochs,
            mode: self.mode,
            shuffle_buffer: self.shuffle_buffer,
            member_secret: self.member_secret.clone(),
            loader,
            dynamic: DynamicOptions {
                lookahead: self.lookahead,
                on_lease_lost: self.on_lease_lost,
                ..DynamicOptions::default()
            },
            epoch: self.epoch,
            stripe: self.stripe,
            metrics_listen: self.metrics_listen.clone(),
            sources: self.sources.clone(),
            epoch_samples: self.epoch_samples,
            cache: self.cache.clone(),
            ..RankConfig::new(&self.dataset, coordinator, &self.job, self.identity()?)
        })
    }
}

impl Args {
    /// What the loader reads, for `repr`: the URL, or the mix.
    pub fn describe_data(&self) -> String {
        if self.sources.is_empty() {
            format!("{:?}", self.dataset)
        } else {
            let parts: Vec<String> = self
                .sources
                .iter()
                .map(|s| format!("{:?} ({:?})", s.url, s.take))
                .collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// The shard cache from `cache_dir=` and `cache_limit=` (bytes), each
/// falling back to `TRIBUTARY_CACHE_DIR` / `TRIBUTARY_CACHE_LIMIT` (`10GiB`
/// and the like) in `env`; both or neither.
pub fn cache_arg(
    dir: Option<PathBuf>,
    limit: Option<u64>,
    env: &HashMap<String, String>,
) -> std::result::Result<Option<CacheConfig>, String> {
    let from_env = |name: &str| env.get(name).filter(|v| !v.is_empty());
    let dir = dir.or_else(|| from_env("TRIBUTARY_CACHE_DIR").map(PathBuf::from));
    let limit = match (limit, from_env("TRIBUTARY_CACHE_LIMIT")) {
        (Some(limit), _) => Some(limit),
        (None, Some(text)) => {
            Some(parse_bytes(text).map_err(|e| format!("TRIBUTARY_CACHE_LIMIT: {e}"))?)
        }
        (None, None) => None,
    };
    match (dir, limit) {
        (None, None) => Ok(None),
        (Some(_), Some(0)) => Err("cache_limit must be at least 1 byte".into()),
        (Some(dir), Some(limit)) => Ok(Some(CacheConfig { dir, limit })),
        (Some(dir), None) => Err(format!(
            "cache_dir={dir:?} needs cache_limit= (bytes) or TRIBUTARY_CACHE_LIMIT"
        )),
        (None, Some(_)) => Err("cache_limit= needs cache_dir= (or TRIBUTARY_CACHE_DIR)".into()),
    }
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

/// A rank, and whether its current epoch was read to its end (then
/// `__iter__` starts the next).
pub struct Rank {
    rank: rank::Rank,
    pub exhausted: bool,
}

impl Rank {
    /// Opens the dataset, creates or joins the job and starts the loader.
    pub async fn start(args: &Args) -> Result<Self> {
        let rank = rank::Rank::start(args.config()?).await?;
        Ok(Self {
            rank,
            exhausted: false,
        })
    }

    /// The coordinator's address: the one given, or the in-process one's.
    pub fn address(&self) -> &str {
        self.rank.address()
    }

    /// The rank's metrics, over its life.
    pub fn metrics(&self) -> MetricsSnapshot {
        self.rank.metrics()
    }

    /// Where it serves `/metrics`, when it does.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        self.rank.metrics_address()
    }

    /// The next batch of the epoch; `None` at its end.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        let item = self.rank.next().await;
        self.exhausted = item.is_none();
        item
    }

    /// Moves to the next epoch; false when the job is finished.
    pub async fn next_epoch(&mut self) -> Result<bool> {
        let more = self.rank.next_epoch().await?;
        self.exhausted = !more;
        Ok(more)
    }

    /// Starts `epoch` over from its first batch (sync).
    pub async fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        self.rank.set_epoch(epoch).await?;
        self.exhausted = self.rank.finished();
        Ok(())
    }

    pub fn finished(&self) -> bool {
        self.rank.finished()
    }

    /// Samples of this rank's part of the current generation (sync).
    pub fn samples(&self) -> Result<u64> {
        self.rank.samples().ok_or_else(|| {
            WorkerError::Config(
                "len() is for mode=\"sync\"; dynamic members acknowledge what they read instead"
                    .into(),
            )
        })
    }

    pub fn describe(&self) -> Description {
        self.rank.describe()
    }

    pub fn member(&self) -> String {
        self.rank.member()
    }

    pub fn state_dict(&self) -> Result<LoaderState> {
        self.rank.state_dict()
    }

    pub async fn commit(&self, state: &LoaderState) -> Result<()> {
        self.rank.commit(state).await
    }

    pub async fn load_state_dict(&self, state: &LoaderState) -> Result<()> {
        self.rank.load_state_dict(state).await
    }
}
