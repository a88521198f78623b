#!/usr/bin/env bash
# The local shard cache (`--cache-dir`, `--cache-limit`): how long epoch 2
# takes to read from S3 behind a +20 ms proxy without a cache, with a cache
# that holds the dataset, with one that holds half of it, and from local
# shards, all in one run on this machine. Each epoch is one
# `tributary read` process (epoch 2 runs after a restart, so it includes
# checking the cached files against the manifest). Labels only
# (`--fields cls`): no image decoding, so the figures are the reading.
#
#   bench/cache.sh [IMAGES]          (default 3000; run by hand, not by CI)
#   ROUNDS=3 RTT_MS=20 BIN=target/release/tributary bench/cache.sh
#
# While each cached run reads, the cache directory's size (the files under
# entries/ and tmp/, listed under the cache's lock) is sampled every 10 ms;
# the table shows the largest size seen against the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${1:-3000}
RTT_MS=${RTT_MS:-20}
ROUNDS=${ROUNDS:-3}
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
PROFILE=${PROFILE:-release}
[ "$PROFILE" = dev ] && DIR=debug || DIR=$PROFILE

[ -x .venv/bin/moto_server ] || scripts/setup.sh >/dev/null
cargo build --profile "$PROFILE" --quiet --bin tributary --example delay_proxy
BIN=${BIN:-$TARGET/$DIR/tributary}
PROXY_BIN=$TARGET/$DIR/examples/delay_proxy

WORK=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
port() { .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

S3=$(port)
SLOW=$(port)
.venv/bin/moto_server -H 127.0.0.1 -p "$S3" >/dev/null 2>&1 &
pids+=($!)
"$PROXY_BIN" "127.0.0.1:$SLOW" "127.0.0.1:$S3" "$RTT_MS" >/dev/null &
pids+=($!)
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$S3/" && break; sleep 0.1; done
curl -s -X PUT "http://127.0.0.1:$S3/bench" >/dev/null

echo "== $IMAGES synthetic images, packed locally and into S3" >&2
"$BIN" synth "$WORK/images" --images "$IMAGES" --classes 10 >/dev/null
"$BIN" pack "$WORK/images" "$WORK/shards" --max-bytes $((16 << 20)) >/dev/null
"$BIN" pack "$WORK/images" s3://bench/ds --max-bytes $((16 << 20)) \
    --s3-endpoint "http://127.0.0.1:$S3" >/dev/null
DATASET=$(find "$WORK/shards" -name '*.tar*' -printf '%s\n' | awk '{s += $1} END {print s}')
SHARDS=$(find "$WORK/shards" -name '*.tar*' | wc -l)
LARGEST=$(find "$WORK/shards" -name '*.tar*' -printf '%s\n' | sort -n | tail -1)
HALF=$(( DATASET / 2 > LARGEST ? DATASET / 2 : LARGEST ))
echo "== $SHARDS shards, $DATASET bytes; half-size limit $HALF" >&2

# Seconds the loader took for one epoch (its own clock, in the read's
# stderr line "... in S s").
read_epoch() { # URL EPOCH [FLAGS...]
    local url=$1 epoch=$2
    shift 2
    "$BIN" read "$url" --epoch "$epoch" --fields cls --s3-endpoint "http://127.0.0.1:$SLOW" \
        "$@" 2>"$WORK/err" >/dev/null
    grep -o 'in [0-9.]* s$' "$WORK/err" | awk '{print $2}'
}

# Largest cache directory size seen while a command runs.
sampled() { # DIR COMMAND...
    local dir=$1
    shift
    (
        set +e
        max=0
        while [ ! -e "$WORK/stop" ]; do
            # Under the cache's own lock (flock(2), as the cache takes it):
            # an eviction and the admission it made room for, both or neither.
            size=$(flock "$dir/lock" find "$dir/entries" "$dir/tmp" -type f -printf '%s\n' 2>/dev/null |
                awk '{s += $1} END {print s + 0}')
            if [ "$size" -gt "$max" ]; then max=$size; fi
            sleep 0.01
        done
        echo "$max" >"$WORK/max"
    ) &
    local sampler=$!
    pids+=($sampler)
    "$@"
    touch "$WORK/stop"
    wait "$sampler" || true
    rm -f "$WORK/stop"
}

results=$WORK/results
for round in $(seq "$ROUNDS"); do
    echo "== round $round of $ROUNDS" >&2
    e1=$(read_epoch s3://bench/ds 0)
    e2=$(read_epoch s3://bench/ds 1)
    echo "no-cache $e1 $e2 0 0" >>"$results"
    for row in full:$((DATASET + 4096)) half:$HALF; do
        label=${row%%:*} limit=${row#*:}
        cache=$WORK/cache-$label-$round
        flags=(--cache-dir "$cache" --cache-limit "$limit")
        sampled "$cache" read_epoch s3://bench/ds 0 "${flags[@]}" >"$WORK/e1"
        max1=$(cat "$WORK/max")
        sampled "$cache" read_epoch s3://bench/ds 1 "${flags[@]}" >"$WORK/e2"
        max2=$(cat "$WORK/max")
        grep '^cache:' "$WORK/err" | sed "s/^/  $label epoch 2 /" >&2
        echo "cache-$label $(cat "$WORK/e1") $(cat "$WORK/e2") $(( max1 > max2 ? max1 : max2 )) $limit" >>"$results"
        rm -rf "$cache"
    done
    e1=$(read_epoch "$WORK/shards" 0)
    e2=$(read_epoch "$WORK/shards" 1)
    echo "local $e1 $e2 0 0" >>"$results"
done

.venv/bin/python - "$results" "$DATASET" "$SHARDS" "$RTT_MS" "$ROUNDS" <<'PY'
import statistics, sys
path, dataset, shards, rtt, rounds = sys.argv[1:]
rows = {}
for line in open(path):
    label, e1, e2, peak, limit = line.split()
    row = rows.setdefault(label, {"e1": [], "e2": [], "peak": 0, "limit": int(limit)})
    row["e1"].append(float(e1)); row["e2"].append(float(e2))
    row["peak"] = max(row["peak"], int(peak))
local = statistics.median(rows["local"]["e2"])
print(f"shard cache: {int(dataset) / 1e6:.1f} MB in {shards} shards, S3 (moto) behind +{rtt} ms, "
      f"median of {rounds} rounds, labels only (no decode)")
print(f"{'reader':<12} {'epoch 1 s':>10} {'epoch 2 s':>10} {'epoch 2 / local':>16} {'max dir MB':>11} {'limit MB':>9}")
for label in ("no-cache", "cache-full", "cache-half", "local"):
    row = rows[label]
    e1, e2 = statistics.median(row["e1"]), statistics.median(row["e2"])
    peak = f"{row['peak'] / 1e6:.1f}" if row["limit"] else "-"
    limit = f"{row['limit'] / 1e6:.1f}" if row["limit"] else "-"
    print(f"{label:<12} {e1:>10.3f} {e2:>10.3f} {e2 / local:>16.2f} {peak:>11} {limit:>9}")
    if row["limit"]:
        assert row["peak"] <= row["limit"], f"{label}: {row['peak']} bytes seen, over {row['limit']}"
PY
