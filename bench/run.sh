#!/usr/bin/env bash
# The throughput comparison: Tributary against PyTorch's DataLoader on the
# same images, on this machine, each contender in a process of its own.
#
#   bench/run.sh [IMAGES]        (default 5000; run by hand, not by CI)
#   ROUNDS=3 RTT_MS=20 bench/run.sh
#
# Sets up everything it needs: the project venv with torch and torchvision
# (scripts/setup.sh), the release binary, extension and delaying proxy,
# s3rver (an S3-compatible server, from npm), a synthetic ImageNet-like
# dataset packed into shards, the S3 server on loopback with the proxy
# (+20 ms per round trip) in front of it, and the same images as one object
# each for the per-image-GET baseline.
#
# Besides the train preset it measures the eval preset (Resize(256) +
# CenterCrop(224), read in order: Tributary's transform="eval" against
# torchvision's under the DataLoader) and Tributary's uint8 NHWC output
# against its float32 NCHW one (the train preset).
#
# This machine's speed drifts from minute to minute, so the rows every ratio
# rests on (decode-only, the DataLoader, Tributary local and remote, both
# sides of the eval and uint8 comparisons) run ROUNDS times, interleaved; the table shows each figure's median and each
# ratio's median over the rounds (each ratio taken within one round).
set -euo pipefail
cd "$(dirname "$0")/.."
# `bench/run.sh gpu [IMAGES]`: the ResNet-50 step on a GPU (bench/gpu.sh).
if [ "${1:-}" = gpu ]; then
    shift
    exec bench/gpu.sh "$@"
fi
IMAGES=${1:-5000}
# The per-image-GET baseline reads this many of them (it is slow).
PER_IMAGE=$(( IMAGES < 1500 ? IMAGES : 1500 ))
RTT_MS=${RTT_MS:-20}
ROUNDS=${ROUNDS:-3}
CORES=$(nproc)

scripts/setup.sh >/dev/null
VENV=$PWD/.venv
PY=$VENV/bin/python
TOOLS=$PWD/target/bench-tools
echo "== building the release binary, extension and delay proxy; s3rver" >&2
cargo build --release --quiet --bin tributary --example delay_proxy
PATH="$VENV/bin:$PATH" "$VENV/bin/pip" install --quiet --no-build-isolation --no-deps \
    --force-reinstall ./python
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
[ -x "$TOOLS/node_modules/.bin/s3rver" ] ||
    npm install --silent --prefix "$TOOLS" --no-audit --no-fund s3rver@3.7.1 >/dev/null
BIN=$PWD/target/release/tributary

WORK=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "== $IMAGES synthetic ImageNet-like images, packed" >&2
"$BIN" synth "$WORK/images" --images "$IMAGES" --classes 10 >/dev/null
"$BIN" pack "$WORK/images" "$WORK/shards" >/dev/null
# The same images stored byte for byte: what restart markers buy.
"$BIN" pack "$WORK/images" "$WORK/shards-plain" --keep-jpeg-bytes >/dev/null

echo "== S3 server, +$RTT_MS ms proxy, uploads" >&2
S3=$(port)
SLOW=$(port)
mkdir "$WORK/s3"
"$TOOLS/node_modules/.bin/s3rver" -d "$WORK/s3" -a 127.0.0.1 -p "$S3" -s \
    --configure-bucket bench >/dev/null 2>&1 &
SERVER=$!
pids+=($SERVER)
target/release/examples/delay_proxy "127.0.0.1:$SLOW" "127.0.0.1:$S3" "$RTT_MS" >/dev/null &
PROXY=$!
pids+=($PROXY)
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
"$PY" - "$S3" "$WORK" "$PER_IMAGE" <<'PY'
import pathlib, sys, time, boto3
port, work, count = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3])
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
for _ in range(100):  # the server is starting
    try:
        s3.head_bucket(Bucket="bench")
        break
    except Exception:
        time.sleep(0.1)
keys = []
for path in sorted(p for p in (work / "images").rglob("*") if p.is_file())[:count]:
    key = "images/" + str(path.relative_to(work / "images"))
    s3.upload_file(str(path), "bench", key)
    keys.append(key)
(work / "keys.txt").write_text("\n".join(keys))
PY
"$BIN" pack "$WORK/images" s3://bench/shards --s3-endpoint "http://127.0.0.1:$S3" >/dev/null

run() { echo "== $*" >&2; "$PY" bench/contenders.py "$@" --watch "$SERVER" "$PROXY" | tee -a "$WORK/results.jsonl"; }
decode_only() {
    echo "== decode-only, 1 thread" >&2
    "$BIN" bench "$WORK/shards" --threads 1 --samples "$(( IMAGES < 1000 ? IMAGES : 1000 ))" |
        "$PY" -c 'import json, re, sys; print(json.dumps({"label": "decode-only", "samples_per_s":
            float(re.search(r"decode-only ceiling\s+([\d.]+)", sys.stdin.read()).group(1))}))' |
        tee -a "$WORK/results.jsonl"
}
remote=(--dataset s3://bench/shards --endpoint "http://127.0.0.1:$SLOW")
for round in $(seq "$ROUNDS"); do
    echo "== round $round of $ROUNDS" >&2
    decode_only
    run torch-folder --label torch --images "$WORK/images" --workers "$CORES"
    run tributary --label local --dataset "$WORK/shards"
    run tributary --label local-plain --dataset "$WORK/shards-plain"
    run tributary --label remote "${remote[@]}"
    run torch-folder --label torch-eval --transform eval --images "$WORK/images" --workers "$CORES"
    run tributary --label local-eval --transform eval --dataset "$WORK/shards"
    run tributary --label local-uint8 --dtype uint8 --dataset "$WORK/shards"
done
run torch-s3 --label torch-s3 --bucket bench --keys "$WORK/keys.txt" \
    --endpoint "http://127.0.0.1:$SLOW" --workers 2
for threads in 1 2 4 8 16; do
    [ "$threads" -le "$CORES" ] || continue
    run tributary --label "threads-$threads" --dataset "$WORK/shards" --threads "$threads"
done
run tributary --label remote-1 "${remote[@]}" --threads 1
run tributary --label local-1 --dataset "$WORK/shards" --threads 1
run tributary --label epochs --dataset "$WORK/shards" --epochs 3

SAMPLE_BYTES=$("$PY" -c 'import json, sys; m = json.load(open(sys.argv[1])); print(sum(s["bytes"] for s in m["shards"]) / sum(s["samples"] for s in m["shards"]))' "$WORK/shards/manifest.json")
"$PY" bench/table.py "$WORK/results.jsonl" --cores "$CORES" --rtt-ms "$RTT_MS" --sample-bytes "$SAMPLE_BYTES"
