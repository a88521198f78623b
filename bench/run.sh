#!/usr/bin/env bash
# The throughput comparison: Tributary against PyTorch's DataLoader on the
# same images, on this machine, each contender in a process of its own.
#
#   bench/run.sh [IMAGES]        (default 2000; run by hand, not by CI)
#
# Sets up everything it needs: the project venv with torch, torchvision and
# moto_server (scripts/setup.sh), the release binary and extension, a
# synthetic ImageNet-like dataset packed into shards, an S3 server on
# loopback with a delaying proxy (+20 ms per round trip) in front of it, and
# the same images as one object each for the per-image-GET baseline.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${1:-2000}
RTT_MS=${RTT_MS:-20}
CORES=$(nproc)

scripts/setup.sh >/dev/null
VENV=$PWD/.venv
PY=$VENV/bin/python
echo "== building the release binary and extension" >&2
cargo build --release --quiet --bin tributary
PATH="$VENV/bin:$PATH" "$VENV/bin/pip" install --quiet --no-build-isolation --no-deps \
    --force-reinstall ./python
BIN=$PWD/target/release/tributary

WORK=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

echo "== $IMAGES synthetic ImageNet-like images, packed" >&2
"$BIN" synth "$WORK/images" --images "$IMAGES" --classes 10 >/dev/null
"$BIN" pack "$WORK/images" "$WORK/shards" >/dev/null

echo "== S3 server, +$RTT_MS ms proxy, uploads" >&2
S3=$(port)
SLOW=$(port)
"$VENV/bin/moto_server" -p "$S3" >/dev/null 2>&1 &
pids+=($!)
"$PY" bench/delay_proxy.py --listen "127.0.0.1:$SLOW" --to "127.0.0.1:$S3" --rtt-ms "$RTT_MS" >/dev/null &
pids+=($!)
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
"$PY" - "$S3" "$WORK" <<'PY'
import pathlib, sys, time, boto3
port, work = sys.argv[1], pathlib.Path(sys.argv[2])
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}")
for _ in range(100):  # the server is starting
    try:
        s3.create_bucket(Bucket="bench")
        break
    except Exception:
        time.sleep(0.1)
keys = []
for path in sorted((work / "images").rglob("*")):
    if path.is_file():
        key = "images/" + str(path.relative_to(work / "images"))
        s3.upload_file(str(path), "bench", key)
        keys.append(key)
(work / "keys.txt").write_text("\n".join(keys))
PY
"$BIN" pack "$WORK/images" s3://bench/shards --s3-endpoint "http://127.0.0.1:$S3" >/dev/null

run() { echo "== $*" >&2; "$PY" bench/contenders.py "$@" | tee -a "$WORK/results.jsonl"; }
echo "== decode-only, 1 thread" >&2
"$BIN" bench "$WORK/shards" --threads 1 --samples "$(( IMAGES < 1000 ? IMAGES : 1000 ))" \
    | tee "$WORK/decode.txt" >&2
run torch-folder --images "$WORK/images" --workers "$CORES"
run tributary --dataset "$WORK/shards"
run tributary --dataset s3://bench/shards --endpoint "http://127.0.0.1:$SLOW"
run torch-s3 --bucket bench --keys "$WORK/keys.txt" --endpoint "http://127.0.0.1:$SLOW" --workers 2
for threads in 1 2 4 8 16; do
    [ "$threads" -le "$CORES" ] && run tributary --dataset "$WORK/shards" --threads "$threads"
done
run tributary --dataset "$WORK/shards" --epochs 3

"$PY" - "$WORK" "$CORES" "$RTT_MS" <<'PY'
import json, pathlib, re, sys
work, cores, rtt = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rows = [json.loads(l) for l in (work / "results.jsonl").read_text().splitlines()]
single = float(re.search(r"decode-only ceiling\s+([\d.]+)", (work / "decode.txt").read_text()).group(1))
base = rows[0]["samples_per_s"]
names = ["PyTorch DataLoader, ImageFolder, %d workers" % cores, "Tributary, local shards",
         f"Tributary, S3 +{rtt} ms", f"PyTorch DataLoader, one GET per image (S3 +{rtt} ms), 2 workers"]
names += [f"Tributary, local, {t} decode thread{'s' if t > 1 else ''}" for t in (1, 2, 4, 8, 16) if t <= cores]
names += ["Tributary, local, 3 epochs"]
print(f"\n{cores} cores; decode-only (JPEG decode alone, 1 thread): {single:.1f} images/s, "
      f"x {cores} cores = {single * cores:.1f}\n")
print("| contender | samples/s (after the first batch) | vs DataLoader | vs cores x decode-only | first batch | peak RSS |")
print("|---|---|---|---|---|---|")
for name, r in zip(names, rows):
    rss = f"{r['peak_rss_mib']} MiB"
    if len(r["rss_after_each_epoch_mib"]) > 1:
        rss += " (after each epoch: " + ", ".join(map(str, r["rss_after_each_epoch_mib"])) + ")"
    print(f"| {name} | {r['samples_per_s']:.1f} | {r['samples_per_s'] / base:.2f}x | "
          f"{r['samples_per_s'] / (single * cores):.0%} | {r['first_batch_s'] * 1000:.0f} ms | {rss} |")
local, remote = rows[1]["samples_per_s"], rows[2]["samples_per_s"]
print(f"\nremote / local: {remote / local:.0%}; remote / per-image GETs: {remote / rows[3]['samples_per_s']:.1f}x")
PY
