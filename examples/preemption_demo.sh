#!/usr/bin/env bash
# The training example under elastic torchrun, with a preemption: once the
# group has committed twice, one worker is killed with SIGKILL; torchrun
# restarts the group, which resumes from the last checkpoint. The step logs
# then show that every sample of the epoch went into the final model once.
#
#   examples/preemption_demo.sh [IMAGES]     (after scripts/test.sh or
#                                             pip install './python[torch]' torchvision)
#
# IMAGE_SIZE (112) from the environment; python/tests/test_examples.py runs
# it at 32 px.
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/kill_between_checkpoints.sh
IMAGES=${1:-1600}
EVERY=10  # steps between checkpoints
PY=${PYTHON:-.venv/bin/python}
BIN=${TRIBUTARY_BIN:-target/release/tributary}
[ -x "$BIN" ] || cargo build --release --quiet --bin tributary
DIR=$(mktemp -d)
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
COORD_PORT=$(port)
RDZV_PORT=$(port)

"$BIN" synth "$DIR/images" --images "$IMAGES" --classes 10 --seed 1 >/dev/null
"$BIN" pack "$DIR/images" "$DIR/ds" >/dev/null
"$BIN" coordinator --listen "127.0.0.1:$COORD_PORT" >"$DIR/coordinator.log" 2>&1 &
COORD=$!
trap 'kill $COORD 2>/dev/null || true; rm -rf "$DIR"' EXIT
touch "$DIR/steps.log"
count() { grep -c "^$1 " "$DIR/steps.log" || true; }

STARTED=$(date +%s.%N)
OMP_NUM_THREADS=1 "$(dirname "$PY")/torchrun" --nnodes=1:3 --nproc-per-node=2 \
    --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$RDZV_PORT" --rdzv-conf=last_call_timeout=1 \
    --max-restarts=3 examples/train_resnet.py --dataset "$DIR/ds" \
    --coordinator "127.0.0.1:$COORD_PORT" --batch-size 16 --image-size "${IMAGE_SIZE:-112}" \
    --checkpoint "$DIR/checkpoint.pt" \
    --checkpoint-every "$EVERY" --step-log "$DIR/steps.log" >"$DIR/torchrun.log" 2>&1 &
TORCHRUN=$!

# Two commits by rank 1, then a kill between checkpoints.
until [ "$(count 'commit [0-9]* 1')" -ge 2 ]; do
    kill -0 "$TORCHRUN" 2>/dev/null || { cat "$DIR/torchrun.log"; exit 1; }
    sleep 0.2
done
# The first group's rank 1 (lines: KIND GROUP RANK ...).
VICTIM=$(awk '$1 == "start" && $3 == "1" { print $5; exit }' "$DIR/steps.log")
kill_between_checkpoints "$VICTIM" 1 "$EVERY" "$DIR/steps.log"
wait "$TORCHRUN"
echo "torchrun finished in $("$PY" -c "import time; print(f'{time.time() - $STARTED:.1f}')") s"
grep -E "^rank " "$DIR/torchrun.log" | sed 's/\(samples\/s (all ranks)\)rank/\1\nrank/; s/\(from step [0-9]*\)rank/\1\nrank/'

"$PY" - "$DIR/steps.log" "$IMAGES" <<'PY'
import collections, sys
lines = [l.split() for l in open(sys.argv[1])]
first = next(l[1] for l in lines if l[0] == "start")  # the killed group's id
generation, committed = next(l[3:5] for l in lines if l[0] == "resume")
kept, discarded, steps = [], 0, collections.Counter()
for kind, group, rank, gen, samples, *ids in (l for l in lines if l[0] == "train"):
    which = "killed group" if group == first else "restarted group"
    steps[f"{which} rank {rank}"] += 1
    if group == first and (gen != generation or int(samples) > int(committed)):
        discarded += len(ids)  # trained after the checkpoint by the killed group
        continue
    kept += ids
print(f"the restarted group resumed generation {generation} after {committed} committed samples per rank")
print("steps:", dict(steps))
print(f"exactly once: {len(kept)} samples kept, {len(set(kept))} distinct, of {sys.argv[2]}; "
      f"{discarded} discarded with the killed group")
assert len(kept) == len(set(kept)), "a sample was trained twice"
# Only the DDP lockstep remainder may go untrained: under a batch per rank.
assert 0 <= int(sys.argv[2]) - len(set(kept)) < 2 * 16, "a sample was lost"
PY
