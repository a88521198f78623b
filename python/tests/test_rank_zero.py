"""Two ranks under a real torchrun with no coordinator given (issue 26,
2a): rank 0 hosts the coordinator on MASTER_ADDR, one port above
MASTER_PORT, rank 1 finds it there, and the two read every sample exactly
once between them, epoch after epoch."""

import os
import socket
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

# The session's dataset: 40 samples.
SAMPLES = 40

TRAIN = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist, tributary
    # A DDP script's start: the group every step's all-reduce runs in.
    dist.init_process_group("gloo")
    # Nothing but the dataset (and what the test needs to look): no
    # coordinator, no rank, no world size.
    loader = tributary.Loader(sys.argv[1], batch_size=4, image_size=8, return_ids=True)
    with open(os.path.join(sys.argv[2], f"rank{os.environ['RANK']}.txt"), "w") as out:
        out.write(f"coordinator {loader.coordinator}\\n")
        for epoch in range(2):
            for images, labels, ids in loader:
                dist.all_reduce(torch.ones(1))  # DDP's gradient all-reduce
                out.write(f"{epoch} " + " ".join(map(str, ids.tolist())) + "\\n")
    dist.destroy_process_group()
""")


def free_port_pair():
    """A port P with P + 1 free too (torchrun's store on P, the coordinator on P + 1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65535:
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no two free adjacent ports")


def torchrun(tmp_path, dataset, env):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    port = free_port_pair()
    # torchrun itself (`python -m torch.distributed.run`), with this Python.
    command = [sys.executable, "-m", "torch.distributed.run",
               "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
               str(script), dataset, str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **env}
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    return run, port


def test_two_ranks_without_a_coordinator_read_each_sample_once(dataset, tmp_path):
    run, port = torchrun(tmp_path, dataset, {})
    assert run.returncode == 0, run.stdout + run.stderr
    logs = [(tmp_path / f"rank{r}.txt").read_text().splitlines() for r in range(2)]
    # Both reached the coordinator rank 0 hosts, one port above MASTER_PORT.
    assert [log[0] for log in logs] == [f"coordinator 127.0.0.1:{port + 1}"] * 2
    for epoch in range(2):
        per_rank = [[int(i) for line in log[1:] if line.split()[0] == str(epoch)
                     for i in line.split()[1:]] for log in logs]
        assert all(per_rank), f"epoch {epoch}: each rank read a part"
        ids = per_rank[0] + per_rank[1]
        assert len(ids) == len(set(ids)) == SAMPLES, f"epoch {epoch}: each sample exactly once"


def test_the_coordinator_port_can_be_set(dataset, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        chosen = s.getsockname()[1]
    run, _ = torchrun(tmp_path, dataset, {"TRIBUTARY_COORDINATOR_PORT": str(chosen)})
    assert run.returncode == 0, run.stdout + run.stderr
    for r in range(2):
        first = (tmp_path / f"rank{r}.txt").read_text().splitlines()[0]
        assert first == f"coordinator 127.0.0.1:{chosen}"
