"""Resume without torchrun: a process killed with ``kill -9`` after a
commit, run again by hand with the checkpoint it saved (``torch.save``), on
its own in-process coordinator (``coordinator=None``) or on a shared one."""

import subprocess
import sys

import pytest

from conftest import tributary_bin
from test_torchrun import start_coordinator

SCRIPT = r"""
import os, signal, sys
import torch
import tributary

dataset, checkpoint, stop_at, coordinator = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
loader = tributary.Loader(dataset, seed=5, batch_size=8, image_size=32, decode_threads=1,
                          return_ids=True, coordinator=coordinator or None, job="rerun")
if os.path.exists(checkpoint):
    loader.load_state_dict(torch.load(checkpoint)["loader"])
    print("resumed", loader.generation, flush=True)
for images, labels, ids in loader:
    print("batch", *ids.tolist(), flush=True)
    state = loader.state_dict()
    if state["samples"] == stop_at:
        torch.save({"loader": state}, checkpoint + ".tmp")
        os.replace(checkpoint + ".tmp", checkpoint)
        loader.commit(state)
        print("committed", flush=True)
        signal.pause()  # until the test kills it
print("done", flush=True)
"""


def run(dataset, checkpoint, stop_at, coordinator=""):
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, dataset, str(checkpoint), str(stop_at), coordinator],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def batch_ids(lines):
    return [int(i) for line in lines if line.startswith("batch ") for i in line.split()[1:]]


def killed_after_a_commit(dataset, checkpoint, coordinator=""):
    """Runs the script until it committed 16 samples, then kill -9; returns
    the ids it trained on."""
    first = run(dataset, checkpoint, 16, coordinator)
    lines = []
    for line in first.stdout:
        lines.append(line.strip())
        if line.strip() == "committed":
            break
    first.kill()  # SIGKILL: no cleanup, no goodbye to anyone
    first.wait()
    assert lines[-1] == "committed", (lines, first.stderr.read())
    trained = batch_ids(lines)
    assert len(trained) == 16
    return trained


def test_a_single_process_job_resumes_mid_epoch_after_kill_9(dataset, tmp_path):
    checkpoint = tmp_path / "checkpoint.pt"
    trained = killed_after_a_commit(dataset, checkpoint)
    second = run(dataset, checkpoint, -1)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    rest = out.split("\n")
    assert rest[0] == "resumed 1", (rest, err)
    assert rest[-2] == "done"
    delivered = trained + batch_ids(rest)
    assert len(delivered) == 40, "the epoch's 40 samples"
    assert len(set(delivered)) == 40, "each exactly once"


def test_a_restart_without_a_higher_restart_count_resumes_or_refuses(dataset, tmp_path):
    """A plain re-run against a shared coordinator (no torchrun, restart
    count 0 again): without its checkpoint it is refused before training a
    committed sample twice; with it, it reads on exactly once."""
    coordinator, address = start_coordinator()
    try:
        checkpoint = tmp_path / "checkpoint.pt"
        trained = killed_after_a_commit(dataset, checkpoint, address)
        careless = run(dataset, tmp_path / "none.pt", -1, address)
        out, err = careless.communicate(timeout=300)
        assert careless.returncode != 0 and "batch" not in out, out
        assert "load_state_dict" in err, err
        second = run(dataset, checkpoint, -1, address)
        out, err = second.communicate(timeout=300)
        assert second.returncode == 0, err
        rest = out.split("\n")
        assert rest[0] == "resumed 1", (rest, err)
        delivered = trained + batch_ids(rest)
        assert sorted(delivered) == sorted(set(delivered)) and len(delivered) == 40
    finally:
        coordinator.kill()


LEAVE = r"""
import sys, tributary
dataset, coordinator, mode = sys.argv[1:]
who = dict(name="alpha") if mode == "dynamic" else dict(rank=1, world_size=2, run_id="r")
loader = tributary.Loader(dataset, coordinator=coordinator, job=mode, mode=mode, batch_size=8,
                          image_size=32, **who)
print(loader.member, flush=True)
"""


@pytest.mark.parametrize("mode", ["dynamic", "sync"])
def test_a_process_that_exits_leaves_its_job_at_once(dataset, mode):
    """A process done with its loader leaves the job as it exits, rather
    than hold its membership until its lease expires (10 s): rank 0 hosting
    the coordinator stops waiting for it, and a re-run joins at once."""
    coordinator, address = start_coordinator()
    try:
        ran = subprocess.run([sys.executable, "-c", LEAVE, dataset, address, mode],
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        status = subprocess.run([tributary_bin(), "status", "--coordinator", address],
                                capture_output=True, text=True, timeout=60, check=True).stdout
        assert f"job {mode} " in status and " 0 members " in status, status
        assert ran.stdout.strip() not in status, status
    finally:
        coordinator.kill()
        coordinator.wait()
