"""examples/preemption_demo.sh as a user runs it (small: 32 px images): the
demo of the README and docs/src/elastic.md must keep working as the example
it drives (examples/train_resnet.py) and its step log change. It kills rank 1
between checkpoints; torchrun restarts the group; every sample of the epoch
goes into the final model once."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, tributary_bin

pytest.importorskip("torch")
pytest.importorskip("torchvision")


def test_the_preemption_demo_trains_every_sample_once():
    env = {**os.environ, "PYTHON": sys.executable, "TRIBUTARY_BIN": tributary_bin(),
           "IMAGE_SIZE": "32"}
    run = subprocess.run(["bash", str(REPO / "examples" / "preemption_demo.sh"), "1600"],
                         env=env, capture_output=True, text=True, timeout=300)
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    killed = re.search(r"kill -9 of rank 1 \(pid \d+\) after (\d+) steps", run.stdout)
    assert killed and int(killed.group(1)) % 10 != 0, "the kill lands between checkpoints"
    once = re.search(r"exactly once: (\d+) samples kept, (\d+) distinct, of 1600; "
                     r"(\d+) discarded with the killed group", run.stdout)
    assert once, run.stdout
    kept, distinct, discarded = map(int, once.groups())
    assert kept == distinct == 1600
    assert discarded > 0
