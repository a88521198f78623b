"""The examples as a user runs them, so that they keep working as the code
they drive changes.

examples/preemption_demo.sh (small: 32 px images), the demo of the README
and docs/src/elastic.md, with the example it drives
(examples/train_resnet.py) and its step log: it kills rank 1 between
checkpoints; torchrun restarts the group; every sample of the epoch goes into
the final model once.

examples/clip_pairs.py (docs/src/python.md): a CSV listing of image-caption
pairs packed and read back; it checks every pair against its listing row
itself and exits non-zero if one is off."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, tributary_bin


def test_the_clip_pairs_example_reads_every_pair_of_its_listing(tmp_path):
    env = {**os.environ, "TRIBUTARY_BIN": tributary_bin()}
    run = subprocess.run([sys.executable, str(REPO / "examples" / "clip_pairs.py"),
                          "--workdir", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=300)
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^96 pairs in 6 batches of up to 16, listing order", run.stdout, re.M)
    assert re.search(r"^shuffled epoch: 96 pairs, each once", run.stdout, re.M)
    assert run.stdout.rstrip().endswith("ok")


def test_the_preemption_demo_trains_every_sample_once():
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
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
