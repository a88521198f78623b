"""A real elastic torchrun run of examples/train_resnet.py: one worker is
killed with SIGKILL mid-epoch, torchrun restarts the group, training resumes
from the last checkpoint, and every sample of the epoch goes into the final
model exactly once (what the killed group trained after its checkpoint is
discarded with it)."""

import collections
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import REPO, tributary_bin

pytest.importorskip("torch")
pytest.importorskip("torchvision")

SAMPLES = 400


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout, proc=None):
    deadline = time.time() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def lines(log, kind):
    if not log.exists():
        return []
    return [l.split() for l in log.read_text().splitlines() if l.startswith(kind + " ")]


@pytest.fixture()
def images(tmp_path):
    path = tmp_path / "shards"
    subprocess.run([tributary_bin(), "synth", str(tmp_path / "img"), "--images", str(SAMPLES),
                    "--classes", "4"], check=True, capture_output=True)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "img"), str(path),
                    "--max-samples", "16"], check=True, capture_output=True)
    return str(path)


def test_killed_worker_restart_resumes_from_checkpoint_exactly_once(images, tmp_path):
    port = free_port()
    coordinator = subprocess.Popen(
        [tributary_bin(), "coordinator", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "train.log"
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    command = [
        # The elastic launch of the example's docstring; one node joins, so
        # the rendezvous need not wait its default 30 s for more.
        torchrun, "--nnodes=1:3", "--nproc-per-node=2", "--max-restarts=3",
        "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--rdzv-conf=last_call_timeout=1",
        str(REPO / "examples" / "train_resnet.py"),
        "--dataset", images, "--coordinator", f"127.0.0.1:{port}",
        "--batch-size", "4", "--image-size", "32", "--classes", "4",
        "--checkpoint", str(tmp_path / "ckpt.pt"), "--checkpoint-every", "10",
        "--step-log", str(log),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    trainer = subprocess.Popen(command, cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # Mid-epoch, after a checkpoint and a few steps past it: kill rank 1.
        wait_for("a commit", lambda: lines(log, "commit"), 240, trainer)
        first_commit = max(int(c[5]) for c in lines(log, "commit"))
        wait_for("steps past the commit",
                 lambda: sum(1 for t in lines(log, "train") if t[2] == "1") > first_commit + 1,
                 120, trainer)
        victim = next(int(s[4]) for s in lines(log, "start") if s[1:3] == ["0", "1"])
        os.kill(victim, signal.SIGKILL)
        output, _ = trainer.communicate(timeout=300)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        coordinator.kill()
    assert trainer.returncode == 0, output
    print(output)

    starts = lines(log, "start")
    assert {s[1] for s in starts} == {"0", "1"}, f"torchrun restarted the group once: {starts}"
    resumes = lines(log, "resume")
    assert len(resumes) == 2, "both restarted ranks loaded the checkpoint"
    generation, committed = resumes[0][3], int(resumes[0][4])
    assert all(r[3:5] == [generation, str(committed)] for r in resumes)

    kept, discarded = [], 0
    batches = collections.Counter()
    for t in lines(log, "train"):
        restart, rank, gen, samples, ids = t[1], t[2], t[3], int(t[4]), t[5:]
        batches[(restart, gen, rank)] += 1
        if restart == "0" and (gen != generation or samples > committed):
            if gen == generation:
                discarded += len(ids)
            continue
        kept.extend(int(i) for i in ids)
    assert committed > 0 and discarded > 0, "the kill landed between a commit and the next"
    assert len(kept) == len(set(kept)), "a sample went into the model twice"
    assert set(kept) <= set(range(SAMPLES))
    assert SAMPLES - len(kept) < 2, f"{SAMPLES - len(kept)} samples never trained (drop-last of 2 ranks drops < 2)"
    for restart in ("1",):
        counts = {r: n for (re, _, r), n in batches.items() if re == restart}
        assert len(set(counts.values())) == 1, f"unequal batch counts per rank: {counts}"
    assert len(lines(log, "done")) == 2
    print(f"kept {len(kept)} of {SAMPLES}; committed {committed} per rank before the kill, "
          f"{discarded} samples discarded with the killed group")
