//! The native side of a Python `Loader`, free of Python: a tokio runtime,
//! the rank ([`tributary_worker::rank`]) started from the [`RankConfig`]
//! the constructor builds, an in-process coordinator when none is given,
//! and who joins.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tributary_coordinator::LocalCoordinator;
use tributary_io::cache::parse_bytes;
use tributary_worker::coordinated::{DataParallel, Identity, LoaderState};
use tributary_worker::pipeline::metrics::MetricsSnapshot;
use tributary_worker::rank::{
    self, Coordinator, Description, InProcess, JobSpec, Mode, RankConfig,
};
use tributary_worker::{Batch, CacheConfig, Result, StoreOptions, Stripe, WorkerError};

/// A coordinator started in this process for this rank alone
/// (`coordinator=None`), on the in-memory store.
pub fn in_process() -> Coordinator {
    Coordinator::InProcess(Arc::new(|store: StoreOptions| {
        Box::pin(async move {
            let local = LocalCoordinator::start(store)
                .await
                .map_err(|e| WorkerError::Stopped(format!("cannot start a coordinator: {e}")))?;
            Ok(InProcess {
                address: local.address().to_owned(),
                guard: Box::new(local),
            })
        })
    }))
}

/// The coordinator of a loader given none (`coordinator=None`): under a
/// torchrun world of several ranks (`WORLD_SIZE` > 1 in `env`, or the sync
/// `identity`'s world), the one its rank 0 hosts at
/// [`rank::rank_zero_address`] (this process starts it when it is rank 0);
/// else one in this process for this rank alone.
pub fn no_coordinator_given(
    identity: &Identity,
    env: &HashMap<String, String>,
) -> Result<Coordinator> {
    let from_env = match Identity::from_torchrun_env(env)? {
        Some(Identity::Torchrun { rank, world, .. }) => Some((rank, world)),
        _ => None,
    };
    let (rank, world) = match identity {
        Identity::Torchrun { rank, world, .. } => (*rank, *world),
        Identity::Name(_) => from_env.unwrap_or((0, 1)),
    };
    // A world of several ranks without torchrun's rendezvous (world_size=
    // passed by hand) has nowhere to meet: the rank's check says so.
    if world <= 1 || from_env.is_none() {
        return Ok(in_process());
    }
    let address = rank::rank_zero_address(env)?;
    let host = (rank == 0).then(rank_zero_host);
    Ok(Coordinator::RankZero { address, host })
}

/// Starts the coordinator rank 0 hosts for its world, on the in-memory store.
fn rank_zero_host() -> rank::StartHost {
    Arc::new(|options: rank::HostOptions| {
        Box::pin(async move {
            let listen = options.listen.clone();
            let local = LocalCoordinator::start_on(&listen, options.store, options.auth_token)
                .await
                .map_err(|e| {
                    WorkerError::Stopped(format!(
                        "rank 0 cannot start the coordinator of its world: {e} (set {} to a free \
                         port on every rank, or pass coordinator=\"host:port\")",
                        rank::COORDINATOR_PORT_VAR
                    ))
                })?;
            Ok(InProcess {
                address: local.address().to_owned(),
                guard: Box::new(local),
            })
        })
    })
}

/// Who joins: a dynamic member's `name`, or the torchrun rank (explicit
/// parts over the environment's, else rank 0 of 1) and its data-parallel
/// group (`data_parallel=(dp_rank, dp_size)`).
pub struct Joiner {
    pub name: Option<String>,
    pub rank: Option<u32>,
    pub world_size: Option<u32>,
    pub run_id: Option<String>,
    pub restart_count: Option<u64>,
    pub data_parallel: Option<(u32, u32)>,
}

impl Joiner {
    /// The identity a process of `mode` joins as; `stripe` is its share
    /// of the rank (each DataLoader worker of a dynamic job is a member of
    /// its own). A dynamic member without a name is named after the host
    /// and this process.
    pub fn identity(
        &self,
        mode: Mode,
        stripe: Stripe,
        env: &HashMap<String, String>,
    ) -> Result<Identity> {
        if mode == Mode::Dynamic {
            if let Some((dp_rank, dp_size)) = self.data_parallel {
                return Err(WorkerError::Config(format!(
                    "data_parallel=({dp_rank}, {dp_size}) is for mode=\"sync\": a dynamic job's \
                     members lease units one by one, so the peers of a group would not read \
                     identical batches"
                )));
            }
            let name = match &self.name {
                Some(name) if stripe.count > 1 => format!("{name}-w{}", stripe.index),
                Some(name) => name.clone(),
                None => default_member(env),
            };
            return Ok(Identity::Name(name));
        }
        let from_env = Identity::from_torchrun_env(env)?;
        let (env_rank, env_world, env_run, env_restart) = match from_env {
            Some(Identity::Torchrun {
                rank,
                world,
                run_id,
                restart,
                ..
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
            dp: self
                .data_parallel
                .map(|(rank, size)| DataParallel { rank, size }),
        })
    }
}

/// A dynamic member's name when none is given: the host's and this
/// process's (a forked DataLoader worker takes its own).
pub fn default_member(env: &HashMap<String, String>) -> String {
    let host = env.get("HOSTNAME").map_or("host", String::as_str);
    format!("{host}-{}", std::process::id())
}

/// The error of iterating a loader whose job's epochs are all read: a new
/// pass would be an empty epoch, which a training loop would take for a
/// real one.
pub fn exhausted(job: &str, epochs: Option<u64>) -> pyo3::PyErr {
    let epochs = epochs.map_or_else(|| "every epoch".to_owned(), |n| format!("epochs={n}"));
    pyo3::exceptions::PyRuntimeError::new_err(format!(
        "job {job:?} is finished: all its epochs were read ({epochs}), so this pass would \
         yield nothing. Pass a larger epochs= to the Loader (or epochs=None: as many epochs as \
         the training loop asks for), or another job= to train again"
    ))
}

/// What the loader reads, for `repr`: the URL, or the mix.
pub fn describe_data(spec: &JobSpec) -> String {
    if spec.sources.is_empty() {
        format!("{:?}", spec.manifest_url)
    } else {
        let parts: Vec<String> = spec
            .sources
            .iter()
            .map(|s| format!("{:?} ({:?})", s.manifest_url, s.take))
            .collect();
        format!("[{}]", parts.join(", "))
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
    pub async fn start(config: RankConfig) -> Result<Self> {
        let rank = rank::Rank::start(config).await?;
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

    pub fn hosts_coordinator(&self) -> bool {
        self.rank.hosts_coordinator()
    }

    /// See [`rank::Rank::linger`].
    pub async fn linger(&self, within: std::time::Duration) -> Result<()> {
        self.rank.linger(within).await
    }

    /// See [`rank::Rank::leave_at_exit`].
    pub async fn leave_at_exit(&self, within: std::time::Duration) {
        self.rank.leave_at_exit(within).await
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

    pub async fn report(&self, state: &LoaderState) -> Result<()> {
        self.rank.report(state).await
    }

    pub async fn commit(&self, state: &LoaderState) -> Result<()> {
        self.rank.commit(state).await
    }

    pub async fn load_state_dict(&mut self, state: &LoaderState) -> Result<()> {
        self.rank.load_state_dict(state).await
    }

    pub fn check_resumed(&self) -> Result<()> {
        self.rank.check_resumed()
    }
}
