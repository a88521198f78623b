"""A real elastic torchrun run of examples/train_resnet.py: one worker is
killed with SIGKILL mid-epoch, torchrun restarts the group, training resumes
from the last checkpoint, and every sample of the epoch goes into the final
model exactly once (what the killed group trained after its checkpoint is
discarded with it)."""

import collections
import os
import re
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


def parent(pid):
    """The parent of process ``pid`` (from /proc), or None once it is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def groups(log):
    """The tokens of the groups torchrun formed, oldest first."""
    return sorted({int(s[1]) for s in lines(log, "start")})


def kept_samples(log):
    """The sample ids that went into the final model, and how many were
    trained and then discarded: a group's batches past the point the next
    group resumed from (its loader state at the last checkpoint; all of them
    when the next group found no checkpoint) were thrown away with it."""
    order = groups(log)
    resumed = {int(r[1]): (int(r[3]), int(r[4])) for r in lines(log, "resume")}
    kept, discarded = [], 0
    for t in lines(log, "train"):
        group, point, ids = int(t[1]), (int(t[3]), int(t[4])), t[5:]
        later = [g for g in order if g > group]
        if later and (later[0] not in resumed or point > resumed[later[0]]):
            discarded += len(ids)
            continue
        kept.extend(int(i) for i in ids)
    return kept, discarded


def assert_each_sample_once(kept):
    assert len(kept) == len(set(kept)), "a sample went into the model twice"
    assert set(kept) <= set(range(SAMPLES))
    assert SAMPLES - len(kept) < 2, \
        f"{SAMPLES - len(kept)} samples never trained (drop-last of 2 ranks drops < 2)"


def accepts(address):
    """Whether something accepts connections at ``host:port``."""
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def start_coordinator(cwd=None):
    """A coordinator on the in-memory store (run in ``cwd``), once it
    accepts connections; returns it and its address."""
    address = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([tributary_bin(), "coordinator", "--listen", address], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(f"the coordinator at {address}", lambda: accepts(address), 30, proc)
    return proc, address


def train_command(launch, images, coordinator, tmp_path, checkpoint_every):
    """torchrun (elastic, c10d; flags in ``launch``) running the example,
    its step log at tmp_path/train.log."""
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    return [
        torchrun, *launch, "--max-restarts=3", "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--rdzv-conf=last_call_timeout=1",
        str(REPO / "examples" / "train_resnet.py"),
        "--dataset", images, "--coordinator", coordinator,
        "--batch-size", "4", "--image-size", "32", "--classes", "4",
        "--checkpoint", str(tmp_path / "ckpt.pt"), "--checkpoint-every", str(checkpoint_every),
        "--step-log", str(tmp_path / "train.log"),
    ]


@pytest.fixture()
def images(tmp_path):
    path = tmp_path / "shards"
    subprocess.run([tributary_bin(), "synth", str(tmp_path / "img"), "--images", str(SAMPLES),
                    "--classes", "4"], check=True, capture_output=True)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "img"), str(path),
                    "--max-samples", "16"], check=True, capture_output=True)
    return str(path)


def test_killed_worker_restart_resumes_from_checkpoint_exactly_once(images, tmp_path):
    coordinator, address = start_coordinator()
    log = tmp_path / "train.log"
    # A held-out split of 31 samples (2 ranks: 16 and 15), read with an
    # unshuffled eval loader after the epoch.
    val = tmp_path / "val"
    subprocess.run([tributary_bin(), "synth", str(tmp_path / "val-img"), "--images", "31",
                    "--classes", "4", "--seed", "1"], check=True, capture_output=True)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "val-img"), str(val)], check=True,
                   capture_output=True)
    # The elastic launch of the example's docstring; one node joins, so the
    # rendezvous need not wait its default 30 s for more.
    command = train_command(["--nnodes=1:3", "--nproc-per-node=2"], images, address, tmp_path,
                            checkpoint_every=10) + ["--val-dataset", str(val)]
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
        victim = next(int(s[4]) for s in lines(log, "start") if s[2] == "1")
        os.kill(victim, signal.SIGKILL)
        output, _ = trainer.communicate(timeout=300)
    finally:
        if trainer.poll() is None:
            trainer.kill()
        coordinator.kill()
    assert trainer.returncode == 0, output
    # The restarted group validated on every sample of the held-out split.
    assert re.search(r"epoch 0 val_accuracy [0-9.]+ \(31 samples\)", output), output
    print(output)

    first, second = groups(log)
    resumes = lines(log, "resume")
    assert len(resumes) == 2 and {int(r[1]) for r in resumes} == {second}, \
        "both ranks of the restarted group loaded the checkpoint"
    generation, committed = resumes[0][3], int(resumes[0][4])
    assert all(r[3:5] == [generation, str(committed)] for r in resumes)

    kept, discarded = kept_samples(log)
    assert committed > 0 and discarded > 0, "the kill landed between a commit and the next"
    assert_each_sample_once(kept)
    batches = collections.Counter(t[2] for t in lines(log, "train") if int(t[1]) == second)
    assert len(set(batches.values())) == 1, f"unequal batch counts per rank: {batches}"
    assert len(lines(log, "done")) == 2
    print(f"kept {len(kept)} of {SAMPLES}; committed {committed} per rank before the kill, "
          f"{discarded} samples discarded with the killed group")


def test_a_node_joins_then_is_preempted_and_every_sample_trains_once(images, tmp_path):
    """Two torchrun agents, as two nodes of an elastic PyTorchJob: node A
    trains alone, node B joins (the group re-forms with world 2; A's agent
    still counts 0 restarts, as B's does), then node B is killed with
    SIGKILL, agent and worker (a preempted node): A's group fails, A
    re-forms alone and finishes the epoch from the last checkpoint."""
    coordinator, address = start_coordinator()
    log = tmp_path / "train.log"
    command = train_command(["--nnodes=1:2", "--nproc-per-node=1", "--rdzv-id=job",
                             "--monitor-interval=0.5"], images, address, tmp_path,
                            checkpoint_every=5)
    # torch 2.15's rendezvous shares one store across rounds by default and
    # fails to re-publish its address when membership changes (the joining
    # node waits for MASTER_ADDR of the new round, forever); the examples in
    # deploy/ set this too.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

    def node(name):
        # Its own session: killing the node kills its agent and its worker.
        return subprocess.Popen(command, cwd=tmp_path, env=env, start_new_session=True,
                                stdout=open(tmp_path / f"{name}.out", "w"),
                                stderr=subprocess.STDOUT)

    a = node("a")
    b = None
    try:
        wait_for("node A's first commit", lambda: lines(log, "commit"), 240, a)
        b = node("b")
        wait_for("a group of two", lambda: any(s[3] == "2" for s in lines(log, "start")), 240, a)
        two = max(groups(log))
        wait_for("a commit of the group of two",
                 lambda: any(int(c[1]) == two for c in lines(log, "commit")), 240, a)
        # The node dies: its agent and its worker (torchrun starts workers
        # in sessions of their own, so the process group is not enough).
        workers = [int(s[4]) for s in lines(log, "start") if int(s[1]) == two]
        victims = [pid for pid in workers if parent(pid) == b.pid]
        assert len(victims) == 1, f"node B's worker among {workers}"
        os.killpg(b.pid, signal.SIGKILL)
        os.kill(victims[0], signal.SIGKILL)
        b.wait()
        a.wait(timeout=300)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        coordinator.kill()
    output = (tmp_path / "a.out").read_text()
    assert a.returncode == 0, output

    order = groups(log)
    worlds = {int(s[1]): int(s[3]) for s in lines(log, "start")}
    assert [worlds[g] for g in order][:2] == [1, 2] and worlds[order[-1]] == 1, \
        f"groups and their worlds: {[(g, worlds[g]) for g in order]}"
    assert all(int(r[1]) in order[1:] for r in lines(log, "resume"))
    kept, discarded = kept_samples(log)
    assert_each_sample_once(kept)
    print(f"groups {[(g, worlds[g]) for g in order]}; kept {len(kept)} of {SAMPLES}, "
          f"{discarded} discarded with failed or re-formed groups")
