#!/usr/bin/env bash
# The GPU comparison (`bench/run.sh gpu [IMAGES]`): a ResNet-50 training step
# (bf16, channels_last) fed by PyTorch's DataLoader (16 workers) and by
# Tributary with 1 to 16 decode threads (pageable, then "pinned":
# device="cuda" with normalize=True), on the same synthetic JPEGs; prints
# the data-wait table (bench/gpu_step.py says how it is measured).
#
# Needs a CUDA GPU and a python3 with torch and torchvision. Uses the
# `tributary` binary at TRIBUTARY_BIN (default: target/release/tributary)
# and an importable `tributary` package; where either is missing it builds
# them (cargo, pip) first.
#
#   bench/run.sh gpu                 10000 images, threads 1,2,4,8,16
#   THREADS=4,16 WORKERS=16 BATCH=256 STEPS=30 PREFETCH=2 bench/run.sh gpu 20000
#   WORKERS=0 THREADS=8 PREFETCH=4 bench/run.sh gpu     no DataLoader row
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${1:-10000}
PY=${PYTHON:-python3}
BIN=${TRIBUTARY_BIN:-$PWD/target/release/tributary}

if [ ! -x "$BIN" ]; then
    echo "== building the release binary" >&2
    cargo build --release --quiet --bin tributary
fi
if ! "$PY" -c "import tributary" 2>/dev/null; then
    echo "== installing the tributary package" >&2
    "$PY" -m pip install --quiet ./python
fi

WORK=${WORK:-$(mktemp -d)}
if [ ! -f "$WORK/shards/manifest.json" ]; then
    echo "== $IMAGES synthetic ImageNet-like images, packed, in $WORK" >&2
    "$BIN" synth "$WORK/images" --images "$IMAGES" --classes 10 >/dev/null
    "$BIN" pack "$WORK/images" "$WORK/shards" >/dev/null
fi

"$PY" bench/gpu_step.py --images "$WORK/images" --shards "$WORK/shards" \
    --threads "${THREADS:-1,2,4,8,16}" --workers "${WORKERS:-16}" \
    --batch "${BATCH:-256}" --steps "${STEPS:-30}" --warmup "${WARMUP:-5}" \
    --prefetch "${PREFETCH:-2}" \
    ${JSON:+--json "$JSON"}
