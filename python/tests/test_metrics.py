"""A rank's metrics: `Loader.metrics()`, and `/metrics` served on `metrics_port`."""

import re
import shutil
import subprocess
import urllib.request

import pytest

import tributary

from conftest import REPO

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def promtool() -> str:
    venv = REPO / ".venv" / "bin" / "promtool"
    if venv.exists():
        return str(venv)
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is missing: scripts/setup.sh unpacks it into .venv/bin")
    return found


def scrape(loader) -> str:
    with urllib.request.urlopen(f"http://{loader.metrics_address}/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def series(text: str, name: str) -> dict:
    """`{labels: value}` of the samples named `name`."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{([^}}]*)\}} (\S+)", line)
        if match:
            found[match.group(1)] = float(match.group(2))
    return found


def test_an_epoch_is_served_with_the_job_and_rank_and_agrees_with_metrics(dataset, monkeypatch):
    monkeypatch.setenv("TRIBUTARY_METRICS_HOST", "127.0.0.1")
    loader = tributary.Loader(dataset, job="metrics", seed=1, metrics_port=0, **SMALL)
    host, port = loader.metrics_address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    delivered = sum(len(labels) for _, labels in loader)
    assert delivered == 40

    text = scrape(loader)
    assert series(text, "tributary_rank_samples_total") == {'job="metrics",rank="0"': 40.0}
    assert series(text, "tributary_rank_fetch_requests_in_flight") == {
        'job="metrics",rank="0"': 0.0
    }
    check = subprocess.run([promtool(), "check", "metrics"], input=text.encode(),
                           capture_output=True)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()

    m = loader.metrics()
    assert m["samples"] == delivered and m["batches"] == 5
    assert m["requests_in_flight"] == 0
    assert 0 < m["data_wait"] <= 1
    assert m["bytes"] > 0 and m["bytes_per_second"] > 0 and m["samples_per_second"] > 0
    assert m["parse_seconds_per_sample"] > 0 and m["decode_seconds_per_sample"] > 0
    assert m["bad_samples_skipped"] == 0
    latency = m["fetch_latency_seconds"]
    assert latency["count"] == m["fetch_requests"] > 0
    assert latency["buckets"][-1] == (float("inf"), latency["count"])
    counts = [count for _, count in latency["buckets"]]
    assert counts == sorted(counts)
    assert 0 <= latency["p50"] <= latency["p90"] <= latency["p99"]
    served = series(text, "tributary_rank_fetch_duration_seconds_count")
    assert served == {'job="metrics",rank="0"': float(latency["count"])}


def test_no_port_no_endpoint_and_the_environment_fills_in(dataset, monkeypatch):
    monkeypatch.delenv("TRIBUTARY_METRICS_PORT", raising=False)
    quiet = tributary.Loader(dataset, **SMALL)
    assert quiet.metrics_address is None
    assert quiet.metrics()["samples"] == 0
    monkeypatch.setenv("TRIBUTARY_METRICS_PORT", "0")
    monkeypatch.setenv("TRIBUTARY_METRICS_HOST", "127.0.0.1")
    served = tributary.Loader(dataset, **SMALL)
    assert served.metrics_address.startswith("127.0.0.1:")
    assert "tributary_rank_data_wait_ratio" in scrape(served)
    # An explicit None wins over the environment.
    assert tributary.Loader(dataset, metrics_port=None, **SMALL).metrics_address is None


@pytest.mark.parametrize("port", [-1, 65536, "9400", 1.5, True])
def test_a_bad_port_is_a_value_error_naming_it(dataset, port):
    with pytest.raises(ValueError, match="metrics_port must be a port number"):
        tributary.Loader(dataset, metrics_port=port, **SMALL)


@pytest.mark.parametrize("name, value", [("TRIBUTARY_METRICS_PORT", "http"),
                                         ("TRIBUTARY_METRICS_HOST", "a host")])
def test_a_bad_environment_is_a_value_error_naming_the_variable(dataset, monkeypatch, name, value):
    monkeypatch.setenv("TRIBUTARY_METRICS_PORT", "0")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        tributary.Loader(dataset, **SMALL)


def test_a_port_in_use_is_an_os_error(dataset, monkeypatch):
    monkeypatch.setenv("TRIBUTARY_METRICS_HOST", "127.0.0.1")
    first = tributary.Loader(dataset, metrics_port=0, **SMALL)
    port = int(first.metrics_address.rsplit(":", 1)[1])
    with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
        tributary.Loader(dataset, metrics_port=port, **SMALL)


def test_a_dataloader_worker_serves_none(dataset):
    with pytest.raises(ValueError, match="metrics_port is for the process that iterates"):
        tributary.Loader(dataset, metrics_port=0, worker=(0, 2), **SMALL)
