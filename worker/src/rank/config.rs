//! What a rank is started with (a job's spec, and what is the rank's
//! own), and the checks every caller gets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tributary_common::job::{JobSpec, Mode};

use crate::coordinated::client::FAILOVER_DEADLINE;
use crate::coordinated::{AuthToken, ClientCredentials, DynamicOptions, Identity};
use crate::{
    CacheConfig, DecodeConfig, InvalidConfig, Result, StoreOptions, Stripe, Tail, WorkerError,
};

/// A coordinator started for one rank alone: its address, and what keeps
/// it running (held by the [`super::Rank`], dropped after its loader).
pub struct InProcess {
    /// `host:port` it listens on (loopback).
    pub address: String,
    /// Dropping it stops the coordinator.
    pub guard: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Starts an in-process coordinator once the dataset is open; given the
/// rank's store options (it reads the manifest with them). The worker does
/// not link the coordinator: its caller passes this (e.g. one that starts
/// `tributary_coordinator::LocalCoordinator`).
pub type StartInProcess =
    Arc<dyn Fn(StoreOptions) -> BoxFuture<'static, Result<InProcess>> + Send + Sync>;

/// Where the rank's coordinator is.
#[derive(Clone)]
pub enum Coordinator {
    /// Replicas other ranks reach too: `host:port` or
    /// `http(s)://host:port`, comma lists allowed. The client proves itself
    /// with [`RankConfig::credentials`].
    Shared(Vec<String>),
    /// One started in this process for this rank alone, on the in-memory
    /// store: it asks for no credentials, and serves a world of one rank
    /// (a dynamic job: one process).
    InProcess(StartInProcess),
    /// A torchrun world's coordinator, hosted by its rank 0 at `address`
    /// ([`super::rank_zero_address`]): rank 0 starts it with `host`, every
    /// other rank (`host: None`) waits until it is up. Every rank proves
    /// itself with [`RankConfig::credentials`], whose token rank 0's
    /// coordinator asks for. It dies with rank 0.
    RankZero {
        address: String,
        host: Option<super::StartHost>,
    },
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Shared(addresses) => f.debug_tuple("Shared").field(addresses).finish(),
            Self::InProcess(_) => f.write_str("InProcess"),
            Self::RankZero { address, host } => f
                .debug_struct("RankZero")
                .field("address", address)
                .field("hosts", &host.is_some())
                .finish(),
        }
    }
}

/// How the client proves itself to a [`Coordinator::Shared`].
#[derive(Debug, Clone)]
pub enum Credentials {
    /// As given.
    Given(ClientCredentials),
    /// Read when the client is made, after its addresses were checked:
    /// TLS and the bearer token from `env` (the process environment, passed
    /// in from the edge: `TRIBUTARY_TLS_*`, `TRIBUTARY_AUTH_TOKEN(_FILE)`),
    /// and `auth_token`, when given, over the environment's token (errors
    /// call it `auth_token`).
    Env {
        env: HashMap<String, String>,
        auth_token: Option<String>,
    },
}

impl Default for Credentials {
    /// None: plain gRPC, no token.
    fn default() -> Self {
        Self::Given(ClientCredentials::default())
    }
}

impl Credentials {
    pub(super) fn resolve(&self) -> Result<ClientCredentials> {
        match self {
            Self::Given(credentials) => Ok(credentials.clone()),
            Self::Env { env, auth_token } => {
                let mut credentials = ClientCredentials::from_env(env)?;
                if let Some(token) = auth_token {
                    credentials.auth_token = Some(AuthToken::new(token, "auth_token")?);
                }
                Ok(credentials)
            }
        }
    }
}

/// Everything a rank starts with: the job's spec (what the rank creates
/// the job with if it does not exist, and checks it against if it does),
/// and what is the rank's own: the job's name, the coordinator and the
/// client's credentials, who joins, how the loader decodes, the cache and
/// the metrics. [`RankConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct RankConfig {
    /// The job: its data (`manifest_url` or `sources`), seed, batch size,
    /// epochs, mode and the rest. The fields the protocol leaves at zero
    /// for the coordinator's default may be zero here too.
    pub spec: JobSpec,
    /// How the dataset (and an in-process coordinator) reads the store.
    pub store: StoreOptions,
    pub coordinator: Coordinator,
    /// Ignored by an in-process coordinator.
    pub credentials: Credentials,
    /// How long coordinator calls retry before they fail.
    pub deadline: Duration,
    /// The job's name.
    pub job: String,
    /// Who joins: a torchrun rank (sync) or a member name (dynamic).
    pub identity: Identity,
    /// The secret of the membership this process shares (a DataLoader
    /// worker passes its parent's, so its Join may replace it).
    pub member_secret: Option<String>,
    /// How the loader decodes (the job and the coordinator's assignment
    /// make its plan: [`crate::coordinated::loader_config`]).
    pub decode: DecodeConfig,
    /// `false`: read the unshuffled (evaluation) split by rank, without a
    /// coordinator ([`super::OrderedReader`]).
    pub shuffle: bool,
    /// How an unshuffled split's uneven tail is handled.
    pub tail: Tail,
    /// Dynamic: lookahead, what a lost lease does, and the hooks.
    pub dynamic: DynamicOptions,
    /// Sync: the epoch to read first (`None`: the generation's).
    pub epoch: Option<u64>,
    /// Sync: which of the epoch's batches this process reads (a DataLoader
    /// worker's share). Dynamic: each process is a member of its own.
    pub stripe: Stripe,
    /// Serve the rank's metrics (`tributary_rank_*`, `docs/METRICS.md`) at
    /// `GET /metrics` on this `host:port` for as long as the rank lives
    /// (port 0 picks a free one: [`super::Rank::metrics_address`]).
    pub metrics_listen: Option<String>,
    /// Keep fetched shards in this local directory, within this many bytes
    /// (shared by the ranks of a node: `tributary_io::cache`).
    pub cache: Option<CacheConfig>,
}

impl RankConfig {
    /// The job `spec` under the name `job`; the loader's defaults; no
    /// credentials.
    pub fn new(
        spec: JobSpec,
        coordinator: Coordinator,
        job: impl Into<String>,
        identity: Identity,
    ) -> Self {
        Self {
            spec,
            store: StoreOptions::default(),
            coordinator,
            credentials: Credentials::default(),
            deadline: FAILOVER_DEADLINE,
            job: job.into(),
            identity,
            member_secret: None,
            decode: DecodeConfig::default(),
            shuffle: true,
            tail: Tail::Uneven,
            dynamic: DynamicOptions::default(),
            epoch: None,
            stripe: Stripe::default(),
            metrics_listen: None,
            cache: None,
        }
    }

    fn in_process(&self) -> bool {
        matches!(self.coordinator, Coordinator::InProcess(_))
    }

    /// Checks what can be checked before anything is opened: the job's
    /// spec ([`JobSpec::validate`], its zeros taken as the coordinator's
    /// defaults), then what is the rank's own.
    pub fn validate(&self) -> Result<()> {
        self.spec.clone().with_defaults().validate()?;
        let bad = |message: String| Err(WorkerError::Config(message));
        let invalid = |invalid: InvalidConfig| Err(WorkerError::Invalid(invalid));
        let dynamic = self.spec.mode == Mode::Dynamic;
        let size = self.decode.transform.size;
        if size.height == 0 || size.width == 0 {
            return bad(format!("image_size {size} must be at least 1"));
        }
        if self.decode.decode_threads == 0 {
            return bad("decode_threads must be at least 1".into());
        }
        if self.spec.sequence.is_some() {
            // A token job's columns, named by `fields`: checked before
            // anything is opened.
            crate::pipeline::tokens::TokenOutput::from_fields(
                &self.decode.fields,
                self.decode.token_ids,
            )?;
        }
        let Stripe { index, count } = self.stripe;
        if count == 0 || index >= count {
            return invalid(InvalidConfig::Stripe { index, count });
        }
        if dynamic && self.in_process() && count > 1 {
            return invalid(InvalidConfig::DynamicStripesInProcess { count });
        }
        if !dynamic && self.dynamic.lookahead.is_some() {
            return invalid(InvalidConfig::LookaheadForSync);
        }
        crate::pipeline::decode::bad_samples::validate_fraction(self.decode.max_bad_fraction)
            .map_err(WorkerError::Config)?;
        if dynamic && self.epoch.is_some() {
            return invalid(InvalidConfig::EpochForDynamic);
        }
        if self.tail == Tail::Pad && self.shuffle {
            return bad(
                "tail=\"pad\" is for shuffle=False (evaluation) reading, which splits the dataset without dropping any sample".into(),
            );
        }
        if !self.shuffle && dynamic {
            return invalid(InvalidConfig::UnshuffledDynamic);
        }
        if let Some(cache) = &self.cache {
            if cache.limit == 0 {
                return bad(format!(
                    "cache_limit must be at least 1 byte (cache_dir={:?})",
                    cache.dir
                ));
            }
        }
        if let Some(address) = &self.metrics_listen {
            validate_listen(address).map_err(WorkerError::Config)?;
        }
        if let Identity::Torchrun {
            rank, world, dp, ..
        } = self.identity
        {
            if world == 0 || rank >= world {
                return bad(format!(
                    "rank {rank} is outside a world of {world} ranks (world_size must exceed rank)"
                ));
            }
            if let Some(dp) = dp {
                let given = format!("data_parallel=({}, {})", dp.rank, dp.size);
                dp.check(world)
                    .map_err(|e| WorkerError::Config(format!("{given}: {e}")))?;
                if dynamic {
                    return bad(format!(
                        "{given} is for Mode::Sync: a dynamic job's members lease units one by \
                         one, so the peers of a data-parallel group would not read identical \
                         batches"
                    ));
                }
            }
            if self.in_process() && world > 1 && self.shuffle {
                return invalid(InvalidConfig::WorldInProcess { world });
            }
        }
        Ok(())
    }
}

/// `host:port`, the port a number (0 picks one); the host is resolved
/// when bound.
fn validate_listen(address: &str) -> std::result::Result<(), String> {
    let bad = |why: &str| {
        Err(format!(
            "metrics_listen {address:?} {why}: give host:port (port 0 picks a free one)"
        ))
    };
    let Some((host, port)) = address.rsplit_once(':') else {
        return bad("has no port");
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return bad("has no valid host");
    }
    if port.parse::<u16>().is_err() {
        return bad("has no port number in 0..65535");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tributary_common::proto::v1;

    use super::*;
    use crate::coordinated::DataParallel;

    fn torchrun(rank: u32, world: u32) -> Identity {
        Identity::Torchrun {
            rank,
            world,
            run_id: "r".into(),
            restart: 0,
            dp: None,
        }
    }

    fn shared(identity: Identity) -> RankConfig {
        RankConfig::new(
            JobSpec::new("/data"),
            Coordinator::Shared(vec!["127.0.0.1:1".into()]),
            "job",
            identity,
        )
    }

    fn in_process(identity: Identity) -> RankConfig {
        let start: StartInProcess =
            Arc::new(|_| Box::pin(async { Err(WorkerError::Stopped("not started".into())) }));
        RankConfig::new(
            JobSpec::new("/data"),
            Coordinator::InProcess(start),
            "job",
            identity,
        )
    }

    fn error(config: &RankConfig) -> String {
        config.validate().expect_err("invalid").to_string()
    }

    #[test]
    fn the_defaults_are_valid_and_name_the_job_they_create() {
        let config = shared(torchrun(0, 1));
        config.validate().expect("valid");
        let job = v1::JobConfig::from(&config.spec);
        assert_eq!(job.manifest_url, "/data");
        assert_eq!(
            (job.batch_size, job.epochs, job.shuffle_buffer),
            // Epochs: unbounded (0 in the protocol), as many as asked for.
            (64, 0, 1024)
        );
        assert_eq!(job.mode, v1::Mode::Sync as i32);
        assert_eq!(job.remainder, v1::RemainderPolicy::RemainderDrop as i32);
    }

    #[test]
    fn zero_sizes_and_counts_are_named() {
        let mut config = shared(torchrun(0, 1));
        config.spec.batch_size = 0;
        assert!(error(&config).contains("batch_size must be at least 1"));
        let mut config = shared(torchrun(0, 1));
        config.decode.transform.size = crate::Size::square(0);
        assert!(error(&config).contains("image_size 0 must be at least 1"));
        let mut config = shared(torchrun(0, 1));
        config.spec.epochs = Some(0);
        assert!(error(&config).contains("epochs must be at least 1"));
        let mut config = shared(torchrun(0, 1));
        config.decode.decode_threads = 0;
        assert!(error(&config).contains("decode_threads must be at least 1"));
        let mut config = shared(torchrun(0, 1));
        config.stripe = Stripe { index: 2, count: 2 };
        assert!(error(&config).contains("stripe (2, 2): the stripe index must be below"));
        let mut config = shared(torchrun(0, 1));
        config.decode.max_bad_fraction = 1.5;
        assert!(error(&config).contains("max_bad_fraction"));
    }

    #[test]
    fn a_cache_limit_is_at_least_one_byte() {
        let mut config = shared(torchrun(0, 1));
        config.cache = Some(CacheConfig {
            dir: "/tmp/c".into(),
            limit: 0,
        });
        assert!(
            error(&config).contains("cache_limit must be at least 1 byte (cache_dir=\"/tmp/c\")")
        );
        config.cache = Some(CacheConfig {
            dir: "/tmp/c".into(),
            limit: 1,
        });
        config.validate().expect("valid");
    }

    #[test]
    fn a_metrics_address_is_host_and_port() {
        for good in ["0.0.0.0:9400", "127.0.0.1:0", "[::]:9400", "localhost:80"] {
            let mut config = shared(torchrun(0, 1));
            config.metrics_listen = Some(good.into());
            config.validate().expect(good);
        }
        for bad in ["9400", ":9400", "host:", "host:65536", "host:x", "a b:1"] {
            let mut config = shared(torchrun(0, 1));
            config.metrics_listen = Some(bad.into());
            let error = error(&config);
            assert!(
                error.contains(&format!("metrics_listen {bad:?}")),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_rank_outside_its_world_is_refused() {
        assert!(error(&shared(torchrun(2, 2))).contains("rank 2 is outside a world of 2 ranks"));
        assert!(error(&shared(torchrun(0, 0))).contains("outside a world of 0 ranks"));
        shared(torchrun(1, 2))
            .validate()
            .expect("a shared coordinator");
    }

    #[test]
    fn a_data_parallel_group_must_fit_the_world_and_a_sync_job() {
        let grouped = |rank, world, dp_rank, dp_size| Identity::Torchrun {
            rank,
            world,
            run_id: "r".into(),
            restart: 0,
            dp: Some(DataParallel {
                rank: dp_rank,
                size: dp_size,
            }),
        };
        shared(grouped(3, 4, 1, 2)).validate().expect("TP=2 DP=2");
        shared(grouped(1, 2, 0, 1)).validate().expect("TP=2 DP=1");
        for (identity, says) in [
            (
                grouped(0, 4, 0, 0),
                "data_parallel=(0, 0): dp_size must be at least 1",
            ),
            (
                grouped(0, 4, 2, 2),
                "data_parallel=(2, 2): dp_rank 2 must be below dp_size 2",
            ),
            (
                grouped(0, 2, 0, 4),
                "data_parallel=(0, 4): dp_size 4 exceeds world_size 2",
            ),
            (
                grouped(0, 4, 0, 3),
                "world_size 4 is not a multiple of dp_size 3",
            ),
        ] {
            let error = error(&shared(identity));
            assert!(error.contains(says), "{error}");
        }
        let mut dynamic = shared(grouped(0, 2, 0, 1));
        dynamic.spec.mode = Mode::Dynamic;
        assert!(error(&dynamic).contains("data_parallel=(0, 1) is for Mode::Sync"));
    }

    #[test]
    fn an_in_process_coordinator_serves_one_rank_or_one_process_alone() {
        in_process(torchrun(0, 1)).validate().expect("one rank");
        assert!(error(&in_process(torchrun(0, 2))).contains("needs a shared coordinator"));
        let mut config = in_process(Identity::Name("m".into()));
        config.spec.mode = Mode::Dynamic;
        config.validate().expect("one process");
        config.stripe = Stripe { index: 0, count: 2 };
        assert!(error(&config).contains("worker processes of a dynamic job need a shared"));
    }

    #[test]
    fn options_of_the_other_mode_are_refused() {
        let mut config = shared(torchrun(0, 1));
        config.dynamic.lookahead = Some(64);
        assert!(error(&config).contains("dynamic.lookahead is for Mode::Dynamic"));
        let mut config = shared(Identity::Name("m".into()));
        config.spec.mode = Mode::Dynamic;
        config.dynamic.lookahead = Some(64);
        config.validate().expect("dynamic lookahead");
        config.epoch = Some(1);
        assert!(error(&config).contains("epoch is for Mode::Sync"));
    }

    #[test]
    fn a_given_auth_token_wins_over_the_environments_and_is_checked() {
        let env: HashMap<String, String> =
            [("TRIBUTARY_AUTH_TOKEN".to_owned(), "from-env".to_owned())].into();
        let credentials = Credentials::Env {
            env: env.clone(),
            auth_token: Some("given".into()),
        };
        assert_eq!(
            credentials.resolve().expect("valid").auth_token,
            Some(AuthToken::new("given", "t").expect("token"))
        );
        let from_env = Credentials::Env {
            env,
            auth_token: None,
        };
        assert_eq!(
            from_env.resolve().expect("valid").auth_token,
            Some(AuthToken::new("from-env", "t").expect("token"))
        );
        let bad = Credentials::Env {
            env: HashMap::new(),
            auth_token: Some("a b".into()),
        };
        let error = bad.resolve().expect_err("spaces").to_string();
        assert!(
            error.contains("auth_token: the auth token must be visible ASCII"),
            "{error}"
        );
    }
}
