//! The rank's metrics from Python: `metrics_port=` (or the environment's
//! `TRIBUTARY_METRICS_PORT` and `TRIBUTARY_METRICS_HOST`) becomes the
//! rank's `metrics_listen`, and `Loader.metrics()` a dict.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList};
use tributary_worker::pipeline::metrics::MetricsSnapshot;

/// The port to serve on when `metrics_port=` is not given.
pub const PORT_VAR: &str = "TRIBUTARY_METRICS_PORT";
/// The host to bind (default [`DEFAULT_HOST`]: every interface, so that a
/// Prometheus PodMonitor reaches the pod's IP).
pub const HOST_VAR: &str = "TRIBUTARY_METRICS_HOST";
pub const DEFAULT_HOST: &str = "0.0.0.0";

/// `metrics_port=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsPort {
    /// Not given: [`PORT_VAR`] decides (unset or empty: off).
    FromEnv,
    /// `None`: off.
    Off,
    /// A port; 0 picks a free one.
    Port(u16),
}

/// `metrics_port=`: an int in 0..65535 or None.
pub fn metrics_port_arg(value: &Bound<'_, PyAny>) -> PyResult<MetricsPort> {
    if value.is_none() {
        return Ok(MetricsPort::Off);
    }
    let bad = || {
        PyValueError::new_err(format!(
            "metrics_port must be a port number in 0..65535 (0: any free port) or None, not {value}"
        ))
    };
    if value.is_instance_of::<PyBool>() {
        return Err(bad());
    }
    let port: i64 = value.extract().map_err(|_| bad())?;
    u16::try_from(port)
        .map(MetricsPort::Port)
        .map_err(|_| bad())
}

/// The `host:port` to serve on, `None` for none. `env` is the process
/// environment, read at the edge.
pub fn listen_address(
    port: MetricsPort,
    env: &HashMap<String, String>,
) -> Result<Option<String>, String> {
    let set = |name: &str| env.get(name).filter(|v| !v.is_empty());
    let port = match port {
        MetricsPort::Off => return Ok(None),
        MetricsPort::Port(port) => port,
        MetricsPort::FromEnv => match set(PORT_VAR) {
            None => return Ok(None),
            Some(value) => value.parse::<u16>().map_err(|_| {
                format!("{PORT_VAR}={value:?} must be a port number in 0..65535 (0: any free port)")
            })?,
        },
    };
    let host = set(HOST_VAR).map_or(DEFAULT_HOST, String::as_str);
    if host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(format!(
            "{HOST_VAR}={host:?} must be a host name or an IP address"
        ));
    }
    // A bare IPv6 address takes brackets before its port.
    if host.contains(':') && !host.starts_with('[') {
        return Ok(Some(format!("[{host}]:{port}")));
    }
    Ok(Some(format!("{host}:{port}")))
}

/// `Loader.metrics()`: the rank's counters over its life.
pub fn snapshot_to_py<'py>(py: Python<'py>, m: &MetricsSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let latency = PyDict::new(py);
    for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)] {
        latency.set_item(name, m.fetch_latency.quantile(q))?;
    }
    let mut buckets: Vec<(f64, u64)> = m.fetch_latency.buckets.clone();
    buckets.push((f64::INFINITY, m.fetch_latency.count));
    latency.set_item("buckets", PyList::new(py, buckets)?)?;
    latency.set_item("count", m.fetch_latency.count)?;
    latency.set_item("sum", m.fetch_latency.sum)?;
    let dict = PyDict::new(py);
    dict.set_item("samples", m.samples)?;
    dict.set_item("samples_per_second", m.samples_per_sec())?;
    dict.set_item("batches", m.batches)?;
    dict.set_item("bytes", m.fetched_bytes)?;
    dict.set_item("bytes_per_second", m.bytes_per_sec())?;
    dict.set_item("fetch_requests", m.fetch_requests)?;
    dict.set_item("requests_in_flight", m.fetches_in_flight)?;
    dict.set_item("fetch_latency_seconds", latency)?;
    dict.set_item("parse_seconds_per_sample", m.parse_seconds_per_sample())?;
    dict.set_item("decode_seconds_per_sample", m.decode_seconds_per_sample())?;
    dict.set_item("data_wait", m.data_wait)?;
    dict.set_item("data_wait_seconds", m.consumer_wait.as_secs_f64())?;
    dict.set_item("bad_samples_skipped", m.bad_samples)?;
    let cache = PyDict::new(py);
    let c = &m.cache;
    for (name, value) in [
        ("hits", c.hits),
        ("hit_bytes", c.hit_bytes),
        ("misses", c.misses),
        ("miss_bytes", c.miss_bytes),
        ("fills", c.fills),
        ("fill_bytes", c.fill_bytes),
        ("evictions", c.evictions),
        ("corrupt", c.corrupt),
        ("errors", c.errors),
    ] {
        cache.set_item(name, value)?;
    }
    dict.set_item("cache", cache)?;
    Ok(dict)
}
