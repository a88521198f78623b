"""examples/preemption_gpt.sh, small: examples/train_gpt.py packs a synthetic
corpus with the byte-level tokenizer and trains a tiny GPT on it under
torchrun with two ranks and packing="concat"; one rank is killed with
SIGKILL between checkpoints, the job restarts with one rank (a changed world
size) from the last committed checkpoint, and examples/check_gpt_run.py
asserts from the step logs that every token window of the epoch went into
the final model exactly once and that the loss kept falling after the
restart."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, tributary_bin

pytest.importorskip("torch")


def test_train_gpt_killed_rank_resized_restart_trains_every_window_once(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "TRIBUTARY_BIN": tributary_bin(),
           "DOCUMENTS": "900", "DIM": "32", "LAYERS": "1", "HEADS": "2", "BATCH": "8",
           "LENGTH": "64", "EVERY": "25"}
    run = subprocess.run(["bash", str(REPO / "examples" / "preemption_gpt.sh"), str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=120)
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "groups (world sizes): [2, 1]" in run.stdout
    kept = re.search(r"exactly once: (\d+) rows kept, (\d+) distinct, of (\d+) in the epoch; "
                     r"(\d+) in the lockstep remainder; (\d+) discarded", run.stdout)
    assert kept, run.stdout
    rows, distinct, epoch, missing, discarded = map(int, kept.groups())
    assert rows == distinct and distinct + missing == epoch
    assert discarded > 0, "the kill landed between a checkpoint and the next"
    assert "loss: first" in run.stdout  # the loss check ran (and passed: rc 0)


def test_check_gpt_run_refuses_a_window_trained_twice(tmp_path):
    """The check is not vacuous: a log in which the restarted group trains a
    row that the first group committed fails it."""
    sys.path.insert(0, str(REPO / "examples"))
    import check_gpt_run

    dataset = tmp_path / "tokens"
    dataset.mkdir()
    # One shard of 4 * 8 + 1 tokens: 4 windows of L + 1 = 9 tokens.
    (dataset / "manifest.json").write_text(
        '{"shards": [{"name": "s.bin", "tokens": 33, "documents": 1}]}')
    log = tmp_path / "steps.log"
    steps = ["start 1 0 1 100 0",
             "train 1 0 0 2 1 5.0 0 1",
             "commit 1 0 0 2 1",
             "train 1 0 0 4 2 4.0 2 3",
             "resume 2 0 0 2 1",
             "start 2 0 1 101 0"]
    steps += [f"train 2 0 0 {4 + 2 * i} {2 + i} {3.0 - 0.1 * i} 2 3" if i == 0 else
              f"train 2 0 0 {4 + 2 * i} {2 + i} {3.0 - 0.1 * i} 0 1" for i in range(10)]
    log.write_text("\n".join(steps) + "\n")
    with pytest.raises(AssertionError, match="trained twice"):
        check_gpt_run.check(str(log), str(dataset), 8)


def test_train_gpt_document_mask_keeps_attention_inside_each_document():
    """With document_ids (--document-mask) a token's output does not depend
    on the tokens of the row's earlier documents; without, it does."""
    import torch

    sys.path.insert(0, str(REPO / "examples"))
    import train_gpt

    torch.manual_seed(0)
    model = train_gpt.GPT(vocab=257, length=16, dim=32, layers=1, heads=2)
    ids = torch.randint(0, 257, (2, 16))
    positions = torch.cat([torch.arange(8), torch.arange(8)]).repeat(2, 1)
    documents = torch.tensor([0] * 8 + [1] * 8).repeat(2, 1)
    changed = ids.clone()
    changed[:, :8] = 5  # other tokens in the first document only
    with torch.no_grad():
        masked = model(ids, positions, documents)[:, 8:]
        assert torch.allclose(model(changed, positions, documents)[:, 8:], masked, atol=1e-5)
        assert not torch.allclose(model(changed, positions)[:, 8:], model(ids, positions)[:, 8:],
                                  atol=1e-5)
