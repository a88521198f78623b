"""Data-parallel groups under a real torchrun: 4 ranks on a (dp=2, tp=2)
gloo DeviceMesh read with ``data_parallel=tributary.torch.data_parallel(mesh,
"dp")``: the tensor-parallel peers' batches are byte-identical, the two
groups' parts disjoint. One rank is killed with SIGKILL mid-epoch; the job is
restarted with 2 ranks and DP=1 (TP=2) from the last committed checkpoint,
and every sample of the epoch is trained exactly once across both runs.

The helpers take the dataset URL and the loader's keywords, so other
datasets (token datasets) run the same checks."""

import collections
import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import tributary_bin
from test_torchrun import free_port, start_coordinator, wait_for

pytest.importorskip("torch")

SAMPLES = 240

# One torchrun rank: a (dp, tp) CPU DeviceMesh over gloo, a loader reading
# the mesh's data-parallel group, one line per batch (step, generation,
# samples after it, the sha256 of every column, the sample ids). Every
# `commit_every` steps rank 0 writes the loader state to ckpt-RUN-STEP.json,
# and after a barrier (the checkpoint is durable) every rank commits it. A
# rank told to hold at a step waits there until it is killed. A restarted
# run resumes from the newest checkpoint the job committed.
SCRIPT = r"""
import glob, hashlib, json, os, signal, sys
import numpy as np
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
import tributary, tributary.torch

cfg = json.loads(sys.argv[1])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (world // cfg["tp"], cfg["tp"]), mesh_dim_names=("dp", "tp"))
dp = tributary.torch.data_parallel(mesh, "dp")
log = open(os.path.join(cfg["dir"], f"{cfg['run']}-rank{rank}.log"), "a", buffering=1)
loader = tributary.Loader(cfg["dataset"], coordinator=cfg["coordinator"], job=cfg["job"],
                          data_parallel=dp, return_ids=True, **cfg["loader"])
assert loader.data_parallel == dp, (loader.data_parallel, dp)
assert (loader.rank, loader.world_size) == (rank, world)
# Only earlier runs' checkpoints: one this run's rank 0 wrote a moment ago
# (a slow peer starting) is not a restart's (the coordinator refuses it too).
checkpoints = sorted((p for p in glob.glob(os.path.join(cfg["dir"], "ckpt-*.json"))
                      if not os.path.basename(p).startswith(f"ckpt-{cfg['run']}-")),
                     key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]), reverse=True)
for path in checkpoints:
    state = json.load(open(path))
    try:
        loader.load_state_dict(state)
    except ValueError as error:  # written, but not every rank committed it
        if "past the job's commit" not in str(error):
            raise
        continue
    log.write(f"resume {state['generation']} {state['samples']}\n")
    break
log.write(f"start {os.getpid()} {dp[0]} {dp[1]} {loader.generation}\n")
step = 0
for batch in loader:
    step += 1
    digest = hashlib.sha256()
    for column in batch:
        digest.update(np.ascontiguousarray(column).tobytes())
    state = loader.state_dict()
    log.write(f"batch {step} {state['generation']} {state['samples']} {digest.hexdigest()} "
              + " ".join(str(i) for i in batch.ids.tolist()) + "\n")
    if step % cfg["commit_every"] == 0:
        if rank == 0:
            path = os.path.join(cfg["dir"], f"ckpt-{cfg['run']}-{step}.json")
            with open(path + ".tmp", "w") as f:
                json.dump(state, f)
            os.replace(path + ".tmp", path)
        dist.barrier()
        loader.commit(state)
        log.write(f"commit {step} {state['generation']} {state['samples']}\n")
    if cfg.get("hold") == [rank, step]:
        log.write("hold\n")
        signal.pause()
log.write("done\n")
dist.destroy_process_group()
"""


def rank_lines(directory, run, rank, kind):
    """The `kind` lines of rank `rank`'s log in run `run`, split."""
    log = directory / f"{run}-rank{rank}.log"
    if not log.exists():
        return []
    return [l.split()[1:] for l in log.read_text().splitlines() if l.split()[:1] == [kind]]


def torchrun(directory, run, dataset, loader_kwargs, *, nproc, tp, coordinator, job,
             commit_every, hold=None):
    """Starts `nproc` ranks of SCRIPT under torchrun (no restarts), their
    logs in `directory` named after `run`."""
    script = directory / "rank.py"
    script.write_text(SCRIPT)
    cfg = {"dir": str(directory), "run": run, "dataset": dataset, "loader": loader_kwargs,
           "tp": tp, "coordinator": coordinator, "job": job, "commit_every": commit_every,
           "hold": hold}
    # A launch of its own (the run is the rendezvous id, which the ranks
    # join the coordinator with), as a resubmitted job is.
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
               f"--nproc-per-node={nproc}", "--max-restarts=0", f"--rdzv-id={run}",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}",
               str(script), json.dumps(cfg)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(command, cwd=directory, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def batches(directory, run, rank):
    """Rank `rank`'s batches in run `run`: (step, generation, samples,
    digest, ids)."""
    return [(int(b[0]), int(b[1]), int(b[2]), b[3], [int(i) for i in b[4:]])
            for b in rank_lines(directory, run, rank, "batch")]


def assert_peers_identical(directory, run, groups):
    """Every peer of each group (a list of lists of ranks) read the same
    batches, byte for byte, for as long as both read; returns each group's
    batches (its longest-reading peer's)."""
    read = []
    for peers in groups:
        logs = [batches(directory, run, r) for r in peers]
        common = min(len(l) for l in logs)
        assert common > 0, f"run {run}: group {peers} read nothing"
        for rank, log in zip(peers[1:], logs[1:]):
            assert [b[3] for b in log[:common]] == [b[3] for b in logs[0][:common]], \
                f"run {run}: rank {rank}'s batches differ from rank {peers[0]}'s"
        read.append(max(logs, key=len))
    return read


def assert_groups_disjoint(read):
    seen = collections.Counter(i for group in read for b in group for i in b[4])
    twice = sorted(i for i, n in seen.items() if n > 1)
    assert not twice, f"samples read by two groups (or twice by one): {twice[:10]}"


def kill_and_resize(tmp_path, dataset, loader_kwargs, *, samples, commit_every=5, hold_at=12):
    """The run of this file: TP=2 DP=2 over 4 ranks, rank 3 held at step
    `hold_at` and killed with SIGKILL once every rank committed; then TP=2
    DP=1 over 2 ranks resuming from the last committed checkpoint. Checks
    peers, groups and that every one of the `samples` ids trained exactly
    once (a run's batches past the point the next resumed from are
    discarded); returns the committed point and the discarded count."""
    coordinator, address = start_coordinator()
    job = "dp"
    first = second = None
    try:
        first = torchrun(tmp_path, "a", dataset, loader_kwargs, nproc=4, tp=2,
                         coordinator=address, job=job, commit_every=commit_every,
                         hold=[3, hold_at])
        last_commit = hold_at - hold_at % commit_every
        wait_for("every rank's commit and rank 3 holding",
                 lambda: all(any(int(c[0]) == last_commit
                                 for c in rank_lines(tmp_path, "a", r, "commit"))
                             for r in range(4))
                 and (tmp_path / "a-rank3.log").read_text().endswith("hold\n"),
                 240, first)
        victim = int(rank_lines(tmp_path, "a", 3, "start")[0][0])
        os.kill(victim, signal.SIGKILL)
        output, _ = first.communicate(timeout=120)
        assert first.returncode != 0, output
        assert not any(rank_lines(tmp_path, "a", r, "done") for r in range(4)), \
            "the kill landed mid-epoch"

        second = torchrun(tmp_path, "b", dataset, loader_kwargs, nproc=2, tp=2,
                          coordinator=address, job=job, commit_every=commit_every)
        output, _ = second.communicate(timeout=240)
        assert second.returncode == 0, output
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
        coordinator.kill()

    starts = [rank_lines(tmp_path, "a", r, "start")[0] for r in range(4)]
    assert [(int(s[1]), int(s[2])) for s in starts] == [(0, 2), (0, 2), (1, 2), (1, 2)], starts
    groups_a = assert_peers_identical(tmp_path, "a", [[0, 1], [2, 3]])
    assert_groups_disjoint(groups_a)

    resumes = [rank_lines(tmp_path, "b", r, "resume") for r in range(2)]
    assert all(len(r) == 1 for r in resumes), f"both ranks resumed: {resumes}"
    generation, committed = int(resumes[0][0][0]), int(resumes[0][0][1])
    assert resumes[1][0] == resumes[0][0]
    assert committed == last_commit * loader_kwargs["batch_size"], "the last point all committed"
    starts = [rank_lines(tmp_path, "b", r, "start")[0] for r in range(2)]
    assert [(int(s[1]), int(s[2])) for s in starts] == [(0, 1), (0, 1)], starts
    (group_b,) = assert_peers_identical(tmp_path, "b", [[0, 1]])
    assert all(len(rank_lines(tmp_path, "b", r, "done")) == 1 for r in range(2))
    assert len(batches(tmp_path, "b", 0)) == len(batches(tmp_path, "b", 1))

    kept = [i for group in groups_a for b in group if b[1] == generation and b[2] <= committed
            for i in b[4]]
    discarded = sum(len(b[4]) for group in groups_a for b in group if b[2] > committed)
    kept += [i for b in group_b for i in b[4]]
    twice = sorted(i for i, n in collections.Counter(kept).items() if n > 1)
    missing = sorted(set(range(samples)) - set(kept))
    assert not twice and not missing and len(kept) == samples, \
        f"{len(kept)} kept of {samples}: twice {twice[:10]}, never {missing[:10]}"
    return committed, discarded


@pytest.fixture()
def images(tmp_path):
    path = tmp_path / "shards"
    subprocess.run([tributary_bin(), "synth", str(tmp_path / "img"), "--images", str(SAMPLES),
                    "--classes", "4"], check=True, capture_output=True)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "img"), str(path),
                    "--max-samples", "16"], check=True, capture_output=True)
    return str(path)


def test_tp2_dp2_peers_read_identical_batches_then_a_kill_and_dp1_restart_trains_each_sample_once(
        images, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    loader = {"batch_size": 4, "image_size": 16, "seed": 7, "epochs": 1, "decode_threads": 1}
    committed, discarded = kill_and_resize(run, images, loader, samples=SAMPLES)
    assert discarded > 0, "the killed run trained past its last commit"
    print(f"committed {committed} per group before the kill; {discarded} samples discarded")


def test_a_data_parallel_keyword_is_checked_and_errors_name_it(dataset):
    import tributary

    def refused(error, says, **kwargs):
        with pytest.raises(error) as raised:
            tributary.Loader(dataset, **kwargs)
        assert says in str(raised.value), raised.value

    refused(ValueError, "data_parallel=(2, 2): dp_rank 2 must be below dp_size 2",
            rank=0, world_size=4, data_parallel=(2, 2))
    refused(ValueError, "data_parallel=(0, 3): world_size 4 is not a multiple of dp_size 3",
            rank=0, world_size=4, data_parallel=(0, 3))
    refused(ValueError, "data_parallel=(0, 0): dp_size must be at least 1",
            rank=0, world_size=4, data_parallel=(0, 0))
    refused(TypeError, "data_parallel must be a (dp_rank, dp_size) pair", data_parallel=2)
    refused(ValueError, "data_parallel must be a (dp_rank, dp_size) pair", data_parallel=(-1, 2))
    refused(ValueError, 'is for mode="sync"', mode="dynamic", data_parallel=(0, 1))


def test_unshuffled_peers_of_a_group_read_the_groups_part(dataset):
    """shuffle=False, no coordinator: ranks 0 and 1 of 2, one group (TP=2,
    DP=1), both read the whole dataset, in the same order."""
    import tributary

    ids = []
    for rank in range(2):
        loader = tributary.Loader(dataset, shuffle=False, transform="eval", image_size=8,
                                  batch_size=8, rank=rank, world_size=2, data_parallel=(0, 1),
                                  return_ids=True)
        assert (loader.rank, loader.world_size, loader.data_parallel) == (rank, 2, (0, 1))
        ids.append([i for _, _, batch in loader for i in batch.tolist()])
    assert ids[0] == ids[1] and sorted(ids[0]) == list(range(40))


MESH = r"""
import os, sys
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
import tributary, tributary.torch

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp", "tp"))
print("dp", *tributary.torch.data_parallel(mesh, "dp"))
print("index", *tributary.torch.data_parallel(mesh, 1))
for bad in ("pp", 2):
    try:
        tributary.torch.data_parallel(mesh, bad)
    except ValueError as error:
        print("refused", error)
loader = tributary.Loader(sys.argv[1], data_parallel=tributary.torch.data_parallel(mesh, "dp"),
                          image_size=8, batch_size=8, epochs=1)
print("read", loader.data_parallel, sum(len(labels) for _, labels in loader))
dist.destroy_process_group()
"""


def test_data_parallel_reads_a_real_device_mesh(dataset):
    """A 1-process gloo DeviceMesh on the CPU, (dp=1, tp=1)."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "RANK": "0", "WORLD_SIZE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MESH, dataset], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["dp 0 1", "index 0 1"], lines
    assert "refused data_parallel: the mesh has no dimension 'pp' (its dimensions: ('dp', 'tp'))" \
        in lines, lines
    assert "refused data_parallel: dimension 2 is outside the mesh's 2" in lines, lines
    assert lines[-1] == "read (0, 1) 40", lines
