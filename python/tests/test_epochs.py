"""Epochs as the README's loop drives them (issue 26, 1d and 1e):
``for epoch in range(N): for batch in loader`` never gets a silent empty
epoch, by default gets as many epochs as it asks for, and a finite job its
ranks read to the end shows finished."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tributary
from conftest import tributary_bin
from test_torchrun import start_coordinator

# The session's dataset: 40 samples in shards of 16.
SAMPLES = 40


def epoch_ids(loader):
    """The sample ids of one pass over ``loader``."""
    return np.concatenate([batch[-1] for batch in loader]).tolist()


def test_iterating_past_epochs_raises_instead_of_an_empty_epoch(dataset):
    loader = tributary.Loader(dataset, batch_size=4, image_size=8, epochs=1, return_ids=True,
                              job="past-epochs")
    assert len(epoch_ids(loader)) == SAMPLES
    # The README's loop asking for a second epoch of a one-epoch job: an
    # error that says what to do, never a pass that yields nothing.
    with pytest.raises(RuntimeError, match=r"epochs=1.*larger epochs=.*epochs=None"):
        for _ in loader:
            pytest.fail("a batch past the job's epochs")
    # And again: still an error, not a quiet empty pass.
    with pytest.raises(RuntimeError, match="is finished"):
        iter(loader)


def test_epochs_default_unbounded_as_many_as_the_loop_asks_for(dataset):
    loader = tributary.Loader(dataset, batch_size=4, image_size=8, return_ids=True,
                              job="unbounded")
    passes = [epoch_ids(loader) for _ in range(3)]
    for ids in passes:
        assert sorted(ids) == list(range(SAMPLES)), "every epoch reads every sample once"
    assert passes[0] != passes[1], "each epoch is shuffled anew"
    assert loader.epoch == 2


README_RANK = textwrap.dedent("""
    import os, sys, time, tributary
    dataset, address, rank, out = sys.argv[1:5]
    loader = tributary.Loader(dataset, coordinator=address, job="readme", batch_size=4,
                              image_size=8, epochs=2, rank=int(rank), world_size=2,
                              return_ids=True)
    # Both ranks joined before either reads, as DDP's init_process_group
    # holds them (a rank may not start an epoch its group has left).
    open(out + ".ready", "w").close()
    others = [out.replace(f"rank{rank}.", f"rank{r}.") + ".ready" for r in range(2)]
    deadline = time.time() + 60
    while not all(os.path.exists(path) for path in others):
        assert time.time() < deadline, "the other rank never joined"
        time.sleep(0.01)
    with open(out, "w") as f:
        for epoch in range(2):
            for images, labels, ids in loader:
                f.write(f"{epoch} " + " ".join(map(str, ids.tolist())) + "\\n")
""")


def test_jobs_driven_by_the_readme_loop_finish(dataset, tmp_path):
    """Two real ranks (processes) under a real coordinator run the README's
    loop over a two-epoch job and exit; the job then shows finished, with no
    rank asking for the epoch after the last."""
    coordinator, address = start_coordinator()
    try:
        script = tmp_path / "rank.py"
        script.write_text(README_RANK)
        ranks = [subprocess.Popen([sys.executable, str(script), dataset, address, str(r),
                                   str(tmp_path / f"rank{r}.txt")],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(2)]
        for proc in ranks:
            output, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, output
        status = subprocess.run([tributary_bin(), "status", "--coordinator", address,
                                 "--job", "readme", "--output", "json"],
                                check=True, capture_output=True, text=True)
    finally:
        coordinator.kill()
        coordinator.wait()
    frame = json.loads(status.stdout.splitlines()[0])
    (job,) = frame["jobs"]
    assert job["finished"], job
    assert job["finished_at_ms"], "recorded, so the retention applies"
    # Both epochs were read, each sample once per epoch across the ranks.
    for epoch in range(2):
        ids = [int(i) for r in range(2)
               for line in (tmp_path / f"rank{r}.txt").read_text().splitlines()
               if line.split()[0] == str(epoch) for i in line.split()[1:]]
        assert len(ids) == len(set(ids)) == SAMPLES, f"epoch {epoch}"


def test_a_job_read_by_dataloader_workers_finishes(dataset, tmp_path):
    """With worker processes (each a stripe, reporting nothing) the
    DataLoader reports the pass's end from the main process."""
    torch = pytest.importorskip("torch")
    import tributary.torch as ttorch

    coordinator, address = start_coordinator()
    try:
        ds = ttorch.IterableDataset(dataset, coordinator=address, job="workers", batch_size=4,
                                    image_size=8, epochs=1)
        loader = ttorch.DataLoader(ds, num_workers=2)
        assert sum(len(labels) for _, labels in loader) == SAMPLES
        status = subprocess.run([tributary_bin(), "status", "--coordinator", address,
                                 "--job", "workers", "--output", "json"],
                                check=True, capture_output=True, text=True)
    finally:
        coordinator.kill()
        coordinator.wait()
    (job,) = json.loads(status.stdout.splitlines()[0])["jobs"]
    assert job["finished"], job
