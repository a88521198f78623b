"""Checks the step log of a preempted examples/train_gpt.py run.

    python examples/check_gpt_run.py STEP_LOG DATASET SEQUENCE_LENGTH [TRIBUTARY_BIN]

(a) Every row (token window) of the epoch went into the final model exactly
once, counting only what each group trained up to the checkpoint the next
group resumed from: a failed group's steps past it were discarded with its
model. The rows of the epoch are the windows of L + 1 tokens of each shard
(``(tokens - 1) // L`` per shard; the tokens after a shard's last full window
are its stated tail; with TRIBUTARY_BIN, `tributary read --sequence-length`
must list exactly these row ids for the epoch); the only ones allowed missing are those of the DDP
lockstep remainder (fewer than one batch per rank of each group).
(b) The loss kept falling after the restart: the mean loss of the last
steps is below that of the first steps of the run, and below the mean of
the restarted group's first steps.
"""

import json
import os
import subprocess
import sys


def lines(path, kind):
    with open(path) as f:
        return [l.split() for l in f if l.startswith(kind + " ")]


def epoch_rows(dataset, length):
    with open(os.path.join(dataset, "manifest.json")) as f:
        shards = json.load(f)["shards"]
    return sum(max(s["tokens"] - 1, 0) // length for s in shards)


def kept_rows(log):
    """The row ids that went into the final model, the number discarded
    with failed groups, and the (group, step, loss) of every kept step."""
    order = sorted({int(s[1]) for s in lines(log, "start")})
    resumed = {int(r[1]): (int(r[3]), int(r[4])) for r in lines(log, "resume")}
    kept, discarded, losses = [], 0, []
    for t in lines(log, "train"):
        group, point, ids = int(t[1]), (int(t[3]), int(t[4])), t[7:]
        later = [g for g in order if g > group]
        if later and (later[0] not in resumed or point > resumed[later[0]]):
            discarded += len(ids)
            continue
        kept.extend(int(i) for i in ids)
        losses.append((group, int(t[5]), float(t[6])))
    return order, kept, discarded, losses


def read_rows(binary, dataset, length):
    """The row ids of epoch 0 as `tributary read` lists them (one rank)."""
    out = subprocess.run([binary, "read", dataset, "--sequence-length", str(length)],
                         check=True, capture_output=True, text=True).stdout
    return [int(line.split("\t")[0]) for line in out.splitlines() if line.strip()]


def check(log, dataset, length, binary=None, window=5):
    order, kept, discarded, losses = kept_rows(log)
    rows = epoch_rows(dataset, length)
    if binary:
        listed = read_rows(binary, dataset, length)
        assert sorted(listed) == list(range(rows)), \
            f"tributary read lists {len(listed)} rows, not the {rows} windows of the shards"
    worlds = {int(s[1]): int(s[3]) for s in lines(log, "start")}
    batch = len(lines(log, "train")[0]) - 7
    missing = set(range(rows)) - set(kept)
    print(f"groups (world sizes): {[worlds[g] for g in order]}; resumed from "
          f"{sorted(set(tuple(r[3:6]) for r in lines(log, 'resume')))} (generation, rows per rank, step)")
    print(f"exactly once: {len(kept)} rows kept, {len(set(kept))} distinct, of {rows} in the epoch; "
          f"{len(missing)} in the lockstep remainder; {discarded} discarded with the killed group")
    assert len(order) >= 2, "the run was never restarted"
    assert len(kept) == len(set(kept)), "a row was trained twice"
    assert set(kept) <= set(range(rows)), f"row ids outside the epoch's {rows}"
    remainder = sum(worlds[g] * batch for g in order)
    assert len(missing) < remainder, f"{len(missing)} rows never trained (allowed < {remainder})"

    # Steps of the final model, in order: the kept steps of each group.
    curve = [loss for _, _, loss in sorted(losses, key=lambda g: (g[0], g[1]))]
    restarted = [loss for group, _, loss in losses if group == order[-1]]
    first, last = curve[:window], restarted[-window:]
    after = restarted[:window]
    mean = lambda xs: sum(xs) / len(xs)
    print(f"loss: first {window} steps {mean(first):.3f}, first {window} after the restart "
          f"{mean(after):.3f}, last {window} {mean(last):.3f}")
    assert len(restarted) >= 2 * window, f"only {len(restarted)} steps after the restart"
    assert mean(last) < mean(first), "the loss did not fall over the run"
    assert mean(last) < mean(after), "the loss did not keep falling after the restart"


if __name__ == "__main__":
    check(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
