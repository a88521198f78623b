//! The `Loader` Python class: a rank's loader (see `inner.rs`), and the
//! [`RankConfig`] its constructor builds, kept to rebuild it after `fork()`.

use std::collections::HashMap;
use std::time::Duration;

use pyo3::exceptions::{PyStopIteration, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tributary_worker::coordinated::{Code, DynamicOptions, OnLeaseLost};
use tributary_worker::pipeline::machine_batch_bytes;
use tributary_worker::rank::{Coordinator, Credentials, JobSpec, Mode, RankConfig};
use tributary_worker::{
    DecodeConfig, Dtype, Layout, OnError, Preset, StoreOptions, Stripe, Tail, Transform,
    WorkerError,
};

use crate::args::{dataset_arg, fields_arg, image_size_arg, sequence_arg, state_from, state_to_py};
use crate::columns;
use crate::errors::to_py;
use crate::inner::{self, Inner, Joiner, Rank, Runtime};
use crate::metrics::{self, metrics_port_arg, MetricsPort};
use crate::runtime::block;
use tributary_common::tokens::rows::IdType;

fn duration(timeout_s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(timeout_s)
        .map_err(|_| PyValueError::new_err(format!("timeout_s={timeout_s} is not a duration")))
}

/// Starts a loader, interruptibly.
fn start(py: Python<'_>, config: &RankConfig) -> PyResult<Inner> {
    let runtime = Runtime::new().map_err(to_py)?;
    let rank = block(py, &runtime, Rank::start(config.clone()))?.map_err(to_py)?;
    Ok(Inner { runtime, rank })
}

/// A rank's data loader. See `tributary/__init__.pyi` for the full contract.
///
/// Not `unsendable`: Python's cycle collector runs on whichever thread
/// allocates, and may free a loader on a background thread (the device
/// copy thread, a user's), where an unsendable one is leaked with an error
/// instead of dropped. One call at a time is what PyO3's borrow flag
/// enforces (a second thread's call while one blocks is refused).
#[pyclass(module = "tributary._tributary")]
pub(crate) struct Loader {
    /// What the rank starts with (again in a forked child).
    config: RankConfig,
    /// Yield each batch's sample ids as a third array.
    return_ids: bool,
    /// Yield each batch's sample datasets (positions in the mix).
    return_sources: bool,
    /// A dynamic member named after its process (no `name=`): `HOSTNAME`
    /// and the rest of the environment, to name a forked child after its.
    default_name: Option<HashMap<String, String>>,
    inner: Option<Inner>,
    pid: u32,
    /// The coordinator's address (the in-process one's, when started here).
    address: String,
}

impl Loader {
    /// The native state, rebuilt when this is a forked child.
    fn inner(&mut self, py: Python<'_>) -> PyResult<&mut Inner> {
        self.abandon_if_forked();
        if self.inner.is_none() {
            self.inner = Some(start(py, &self.config)?);
        }
        Ok(self.inner.as_mut().expect("started above"))
    }

    /// The native state if this process started it: at exit, a forked
    /// child has nothing of the parent's to wait for or leave (and must
    /// not start a rank just to do so).
    fn started_here(&self) -> Option<&Inner> {
        self.inner
            .as_ref()
            .filter(|_| self.pid == std::process::id())
    }

    /// In a forked child, abandons the parent's native state: the runtime's
    /// threads did not survive fork(), and its destructor would wait for
    /// them forever, so it is leaked.
    fn abandon_if_forked(&mut self) {
        if self.pid != std::process::id() {
            if let Some(stale) = self.inner.take() {
                std::mem::forget(stale);
            }
            self.pid = std::process::id();
            // The parent still serves its metrics on that port, and hosts
            // rank 0's coordinator: the child reaches the parent's.
            self.config.metrics_listen = None;
            if let Coordinator::RankZero { host, .. } = &mut self.config.coordinator {
                *host = None;
            }
            if let Some(env) = &self.default_name {
                self.config.identity =
                    tributary_worker::coordinated::Identity::Name(inner::default_member(env));
            }
        }
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.abandon_if_forked();
    }
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (
        dataset, *, coordinator=None, job="default".to_owned(), batch_size=64,
        image_size=None, seed=0, mode="sync", epochs=None, shuffle_buffer=1024,
        decode_threads=None, rank=None, world_size=None, run_id=None,
        restart_count=None, name=None, storage_options=None, timeout_s=60.0,
        return_ids=false, worker=None, epoch=None, auth_token=None, lookahead=None,
        on_lease_lost="rejoin", on_error="raise", max_bad_fraction=0.01, max_batch_mib=None,
        member_secret=None,
        transform="train", scale=(0.08, 1.0), ratio=(0.75, 4.0 / 3.0), flip=true,
        crop_fraction=0.875, keep_aspect=false, reduced_dct=false, fill=0, dtype="float32", layout="NCHW",
        mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), fields=None, shuffle=true,
        tail="uneven", metrics_port=MetricsPort::FromEnv, epoch_samples=0, return_sources=false,
        cache_dir=None, cache_limit=None, sequence_length=None, packing="concat",
        token_dtype="int64", data_parallel=None
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn new(
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        coordinator: Option<String>,
        job: String,
        batch_size: u32,
        image_size: Option<&Bound<'_, PyAny>>,
        seed: u64,
        mode: &str,
        epochs: Option<u64>,
        shuffle_buffer: u32,
        decode_threads: Option<usize>,
        rank: Option<u32>,
        world_size: Option<u32>,
        run_id: Option<String>,
        restart_count: Option<u64>,
        name: Option<String>,
        storage_options: Option<HashMap<String, String>>,
        timeout_s: f64,
        return_ids: bool,
        worker: Option<(usize, usize)>,
        epoch: Option<u64>,
        auth_token: Option<String>,
        lookahead: Option<u64>,
        on_lease_lost: &str,
        on_error: &str,
        max_bad_fraction: f64,
        max_batch_mib: Option<u64>,
        member_secret: Option<String>,
        transform: &str,
        scale: (f64, f64),
        ratio: (f64, f64),
        flip: bool,
        crop_fraction: f64,
        keep_aspect: bool,
        reduced_dct: bool,
        fill: u8,
        dtype: &str,
        layout: &str,
        mean: (f32, f32, f32),
        std: (f32, f32, f32),
        fields: Option<&Bound<'_, PyAny>>,
        shuffle: bool,
        tail: &str,
        #[pyo3(from_py_with = metrics_port_arg)] metrics_port: MetricsPort,
        epoch_samples: u64,
        return_sources: bool,
        cache_dir: Option<std::path::PathBuf>,
        cache_limit: Option<u64>,
        sequence_length: Option<u32>,
        packing: &str,
        token_dtype: &str,
        data_parallel: Option<(u32, u32)>,
    ) -> PyResult<Self> {
        let value = |e: String| PyValueError::new_err(e);
        let (dataset, sources) = dataset_arg(dataset)?;
        let transform = Transform {
            preset: transform.parse::<Preset>().map_err(value)?,
            size: image_size_arg(image_size)?,
            scale,
            ratio,
            flip,
            crop_fraction,
            keep_aspect,
            reduced_dct,
            fill,
            dtype: dtype.parse::<Dtype>().map_err(value)?,
            layout: layout.parse::<Layout>().map_err(value)?,
            mean: mean.into(),
            std: std.into(),
        };
        transform.validate().map_err(value)?;
        let fields = fields_arg(fields)?;
        let tail: Tail = tail.parse().map_err(PyValueError::new_err)?;
        let on_lease_lost = on_lease_lost.parse::<OnLeaseLost>().map_err(to_py)?;
        let on_error: OnError = on_error.parse().map_err(PyValueError::new_err)?;
        let timeout = Duration::try_from_secs_f64(timeout_s).map_err(|_| {
            PyValueError::new_err(format!("timeout_s={timeout_s} is not a duration"))
        })?;
        let mode = match mode {
            "sync" => Mode::Sync,
            "dynamic" => Mode::Dynamic,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mode must be \"sync\" or \"dynamic\", not {other:?}"
                )))
            }
        };
        let env: HashMap<String, String> = std::env::vars().collect();
        let metrics_listen = if worker.is_some() {
            // Worker processes would all want the one port; the process
            // that iterates serves.
            if let MetricsPort::Port(_) = metrics_port {
                return Err(PyValueError::new_err(
                    "metrics_port is for the process that iterates the loader, not a DataLoader \
                     worker (worker=)",
                ));
            }
            None
        } else {
            metrics::listen_address(metrics_port, &env).map_err(PyValueError::new_err)?
        };
        let cache = inner::cache_arg(cache_dir, cache_limit, &env).map_err(value)?;
        let stripe = worker.map_or_else(Stripe::default, |(index, count)| Stripe { index, count });
        let sequence = sequence_arg(sequence_length, packing)?;
        let token_ids = match token_dtype {
            "int64" => IdType::I64,
            "int32" => IdType::I32,
            other => {
                return Err(PyValueError::new_err(format!(
                    "token_dtype must be \"int64\" or \"int32\", not {other:?}"
                )))
            }
        };
        let spec = JobSpec {
            sequence,
            sources,
            epoch_samples,
            batch_size,
            seed,
            mode,
            epochs,
            shuffle_buffer,
            ..JobSpec::new(dataset)
        };
        let joiner = Joiner {
            name,
            rank,
            world_size,
            run_id,
            restart_count,
            data_parallel,
        };
        let identity = joiner.identity(mode, stripe, &env).map_err(to_py)?;
        let default_name = (mode == Mode::Dynamic && joiner.name.is_none()).then(|| env.clone());
        let mut store = StoreOptions::from_vars(env.clone());
        for (key, value) in storage_options.unwrap_or_default() {
            store.set(&key, value);
        }
        let mut decode = DecodeConfig {
            transform,
            fields,
            on_error,
            max_bad_fraction,
            token_ids,
            max_batch_bytes: max_batch_mib
                .map_or_else(machine_batch_bytes, |mib| mib.saturating_mul(1 << 20)),
            ..DecodeConfig::default()
        };
        if let Some(threads) = decode_threads {
            decode.decode_threads = threads;
        }
        let coordinator = match coordinator {
            Some(address) => Coordinator::Shared(vec![address]),
            None if !shuffle => inner::in_process(),
            None => inner::no_coordinator_given(&identity, &env).map_err(to_py)?,
        };
        let config = RankConfig {
            store,
            credentials: Credentials::Env { env, auth_token },
            deadline: timeout,
            member_secret,
            decode,
            shuffle,
            tail,
            dynamic: DynamicOptions {
                lookahead,
                on_lease_lost,
                ..DynamicOptions::default()
            },
            epoch,
            stripe,
            metrics_listen,
            cache,
            ..RankConfig::new(spec, coordinator, job, identity)
        };
        let inner = start(py, &config)?;
        Ok(Self {
            config,
            return_ids,
            return_sources,
            default_name,
            address: inner.rank.address().to_owned(),
            inner: Some(inner),
            pid: std::process::id(),
        })
    }

    /// Starts the next epoch when the current one has been read to its end;
    /// raises when the job's epochs are all read (never an empty epoch).
    fn __iter__<'py>(
        mut slf: PyRefMut<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let epochs = slf.config.spec.epochs;
        let job = slf.config.job.clone();
        let Inner { runtime, rank } = slf.inner(py)?;
        let more = if rank.finished() {
            false
        } else if rank.exhausted {
            block(py, runtime, rank.next_epoch())?.map_err(to_py)?
        } else {
            true
        };
        if !more {
            return Err(inner::exhausted(&job, epochs));
        }
        Ok(slf)
    }

    /// One value per field (by default `(images, labels)`: float32
    /// `N x 3 x S x S`, normalised, and int64 `N`), then the sample ids
    /// with `return_ids=True`, then the validity mask with `tail="pad"`.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (ids, sources) = (self.return_ids, self.return_sources);
        let valid = self.config.tail == Tail::Pad;
        let Inner { runtime, rank } = self.inner(py)?;
        if rank.exhausted || rank.finished() {
            return Err(PyStopIteration::new_err(()));
        }
        match block(py, runtime, rank.next())? {
            Some(Ok(batch)) => columns::batch_to_py(py, batch, ids, sources, valid),
            Some(Err(error)) => Err(to_py(error)),
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// Starts `epoch` over from its first batch (sync mode): the epoch of
    /// the rank's generation, or the next one.
    fn set_epoch(&mut self, py: Python<'_>, epoch: u64) -> PyResult<()> {
        let Inner { runtime, rank } = self.inner(py)?;
        block(py, runtime, rank.set_epoch(epoch))?.map_err(to_py)
    }

    /// Batches of this rank's part of the current generation.
    fn __len__(&mut self, py: Python<'_>) -> PyResult<usize> {
        let batch = u64::from(self.config.spec.batch_size);
        let samples = self.inner(py)?.rank.samples().map_err(to_py)?;
        Ok(samples.div_ceil(batch) as usize)
    }

    /// Where this rank stands: save it with a checkpoint.
    fn state_dict<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let state = self.inner(py)?.rank.state_dict().map_err(to_py)?;
        state_to_py(py, &state)
    }

    /// Tells the coordinator that a checkpoint holding `state` is durable:
    /// a restarted group resumes right after it.
    fn commit(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let state = state_from(state)?;
        let Inner { runtime, rank } = self.inner(py)?;
        block(py, runtime, rank.commit(&state))?.map_err(to_py)
    }

    /// Reports that the trainer consumed `state` (sync), waiting for the
    /// answer: `tributary.torch.DataLoader` sends it at the end of a pass
    /// its worker processes read, so that the job's end is known.
    fn report(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let state = state_from(state)?;
        let Inner { runtime, rank } = self.inner(py)?;
        block(py, runtime, rank.report(&state))?.map_err(to_py)
    }

    /// Reports this rank's whole part of the current generation as read
    /// (sync), waiting for the answer: what the last of a rank's DataLoader
    /// worker processes sends once every stripe of the pass is read, as a
    /// plain DataLoader's main process reports nothing (the next epoch
    /// opens once every rank's part is read).
    /// A newer restart that replaced the generation is logged, not raised:
    /// what this generation read no longer decides the job's epochs (the
    /// rank's next call says it is stale), as at the end of a part the rank
    /// reads itself.
    fn report_end(&mut self, py: Python<'_>) -> PyResult<()> {
        let Inner { runtime, rank } = self.inner(py)?;
        let mut state = rank.state_dict().map_err(to_py)?;
        state.samples = rank.samples().map_err(to_py)?;
        match block(py, runtime, rank.report(&state))? {
            Err(WorkerError::Coordinator {
                code: Code::FailedPrecondition,
                message,
            }) => {
                tracing::warn!(generation = state.generation, %message, "the end of the part was not recorded");
                Ok(())
            }
            reported => reported.map_err(to_py),
        }
    }

    /// Resumes from a restored checkpoint's state, before reading: the
    /// loader reads on from it, or raises saying why it cannot.
    fn load_state_dict(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let state = state_from(state)?;
        let Inner { runtime, rank } = self.inner(py)?;
        block(py, runtime, rank.load_state_dict(&state))?.map_err(to_py)
    }

    /// Raises when this new process must resume from the job's commit
    /// before reading (for readers that share its membership).
    fn check_resumed(&mut self, py: Python<'_>) -> PyResult<()> {
        self.inner(py)?.rank.check_resumed().map_err(to_py)
    }

    #[getter]
    fn epoch(&mut self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.inner(py)?.rank.describe().epoch)
    }

    #[getter]
    fn generation(&mut self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.inner(py)?.rank.describe().generation)
    }

    #[getter]
    fn rank(&mut self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.inner(py)?.rank.describe().rank)
    }

    #[getter]
    fn world_size(&mut self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.inner(py)?.rank.describe().world)
    }

    /// `(dp_rank, dp_size)`: the part of the data this rank reads and the
    /// number of parts (its data-parallel group, or its rank and world).
    #[getter]
    fn data_parallel(&mut self, py: Python<'_>) -> PyResult<(u32, u32)> {
        let part = self.inner(py)?.rank.describe().data_parallel;
        Ok((part.rank, part.size))
    }

    /// The coordinator's address; with `coordinator=None`, the in-process
    /// coordinator's (loopback), which processes forked from this one use.
    #[getter]
    fn coordinator(&self) -> &str {
        &self.address
    }

    /// Whether this process is rank 0 hosting its torchrun world's
    /// coordinator (no `coordinator=` given).
    #[getter]
    fn hosts_coordinator(&mut self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.inner(py)?.rank.hosts_coordinator())
    }

    /// Rank 0 hosting the coordinator, at exit: waits (at most `timeout_s`)
    /// until the job is finished or the other ranks are gone.
    #[pyo3(signature = (timeout_s=60.0))]
    fn linger(&mut self, py: Python<'_>, timeout_s: f64) -> PyResult<()> {
        let within = duration(timeout_s)?;
        match self.started_here() {
            Some(Inner { runtime, rank }) => {
                block(py, runtime, rank.linger(within))?.map_err(to_py)
            }
            None => Ok(()),
        }
    }

    /// Any other rank, at exit: leaves the job now (waiting at most
    /// `timeout_s`) rather than when its lease expires, so that rank 0 and
    /// a re-run of this rank do not wait the lease out.
    #[pyo3(signature = (timeout_s=5.0))]
    fn leave_at_exit(&mut self, py: Python<'_>, timeout_s: f64) -> PyResult<()> {
        let within = duration(timeout_s)?;
        match self.started_here() {
            Some(Inner { runtime, rank }) => block(py, runtime, rank.leave_at_exit(within)),
            None => Ok(()),
        }
    }

    #[getter]
    fn member(&mut self, py: Python<'_>) -> PyResult<String> {
        Ok(self.inner(py)?.rank.member())
    }

    /// The rank's counters over its life: samples, bytes, reads in flight
    /// and their latency, time per sample, data wait.
    fn metrics<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let snapshot = self.inner(py)?.rank.metrics();
        metrics::snapshot_to_py(py, &snapshot)
    }

    /// `"host:port"` where `/metrics` is served; None when it is not.
    #[getter]
    fn metrics_address(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self
            .inner(py)?
            .rank
            .metrics_address()
            .map(|a| a.to_string()))
    }

    fn __repr__(&mut self, py: Python<'_>) -> PyResult<String> {
        let place = self.inner(py)?.rank.describe();
        let (epoch, generation, rank, world) =
            (place.epoch, place.generation, place.rank, place.world);
        Ok(format!(
            "Loader(dataset={}, job={:?}, epoch={epoch}, generation={generation}, rank={rank}, world_size={world})",
            inner::describe_data(&self.config.spec),
            self.config.job
        ))
    }
}
