#!/usr/bin/env bash
# examples/train_gpt.py under elastic torchrun, with a preemption and a
# resize: two ranks train until they have committed twice; one of them is
# killed with SIGKILL between checkpoints, which ends the group; the job is
# restarted with ONE rank (another world size), which resumes from the last
# committed checkpoint and finishes the epoch. examples/check_gpt_run.py then
# asserts from the step logs that every token window of the epoch went into
# the final model exactly once and that the loss kept falling after the
# restart.
#
#   examples/preemption_gpt.sh [DIR]       (after scripts/test.sh, or
#                                           pip install './python[torch]')
#
# Sizes from the environment: DOCUMENTS (4000), DIM (192), LAYERS (4),
# HEADS (6), BATCH (8), LENGTH (128), EVERY (checkpoint every, 20).
set -euo pipefail
cd "$(dirname "$0")/.."
. examples/kill_between_checkpoints.sh
[ "${EVERY:-20}" -ge 2 ] ||
    { echo "EVERY must be at least 2: the kill lands between two checkpoints" >&2; exit 2; }
PY=${PYTHON:-.venv/bin/python}
BIN=${TRIBUTARY_BIN:-target/release/tributary}
[ -x "$BIN" ] || cargo build --release --quiet --bin tributary
BIN=$(realpath "$BIN")
DIR=${1:-$(mktemp -d)}
mkdir -p "$DIR"
LENGTH=${LENGTH:-128}
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
COORD_PORT=$(port)

"$BIN" coordinator --listen "127.0.0.1:$COORD_PORT" >"$DIR/coordinator.log" 2>&1 &
COORD=$!
trap 'kill $COORD 2>/dev/null || true' EXIT
: >"$DIR/steps.log"
count() { grep -c "^$1 " "$DIR/steps.log" || true; }

train() {  # train NPROC: a torchrun group of NPROC ranks on this node
    OMP_NUM_THREADS=1 TRIBUTARY_BIN="$BIN" "$PY" -m torch.distributed.run --nnodes=1 \
        --nproc-per-node="$1" --rdzv-backend=c10d --rdzv-endpoint="127.0.0.1:$(port)" \
        --max-restarts=0 examples/train_gpt.py --dataset "$DIR/tokens" \
        --coordinator "127.0.0.1:$COORD_PORT" --documents "${DOCUMENTS:-4000}" \
        --dim "${DIM:-192}" --layers "${LAYERS:-4}" --heads "${HEADS:-6}" \
        --batch-size "${BATCH:-8}" --sequence-length "$LENGTH" \
        --checkpoint-dir "$DIR/checkpoints" --checkpoint-every "${EVERY:-20}" \
        --step-log "$DIR/steps.log"
}

STARTED=$(date +%s.%N)
train 2 >"$DIR/torchrun-2.log" 2>&1 &
TORCHRUN=$!
# Two commits by rank 1, then a kill between checkpoints.
until [ "$(count 'commit [0-9]* 1')" -ge 2 ]; do
    kill -0 $TORCHRUN 2>/dev/null || { cat "$DIR/torchrun-2.log"; exit 1; }
    sleep 0.05
done
VICTIM=$(awk '$1 == "start" && $3 == "1" { print $5; exit }' "$DIR/steps.log")
kill_between_checkpoints "$VICTIM" 1 "${EVERY:-20}" "$DIR/steps.log"
wait $TORCHRUN && { echo "the group of two did not fail"; exit 1; }
echo "the group of two failed; restarting with one rank"
train 1 >"$DIR/torchrun-1.log" 2>&1 || { cat "$DIR/torchrun-1.log"; exit 1; }
echo "trained in $("$PY" -c "import time; print(f'{time.time() - $STARTED:.1f}')") s"
grep -hE "^rank " "$DIR/torchrun-2.log" "$DIR/torchrun-1.log" | grep -E "parameters|step" | tail -n 6
"$PY" examples/check_gpt_run.py "$DIR/steps.log" "$DIR/tokens" "$LENGTH" "$BIN"
