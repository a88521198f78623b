#!/usr/bin/env bash
# The thread-scaling table: `tributary bench` with N decode threads on N
# cores (`taskset -c 0-(N-1)`), N = 1, 2, 4, ... up to the core count, and
# each N's per-thread rate against one thread's, whole run and steady
# (from the first batch on), beside the decode-only ceiling's own scaling.
#
#   bench/scaling.sh [DATASET]      (default: 10000 synthetic images, packed)
#   THREADS=1,8,16 ROUNDS=3 SAMPLES=6000 bench/scaling.sh /data/shards
#   EXTRA="--u8" bench/scaling.sh   (any more `tributary bench` flags)
#
# Run by hand, not by CI. Uses the `tributary` binary at TRIBUTARY_BIN
# (default target/release/tributary), building it first where it is
# missing. The issue's target: the per-thread rate falls by no more than
# 10% from 1 thread to all cores.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TRIBUTARY_BIN:-$PWD/target/release/tributary}
CORES=$(nproc)
ROUNDS=${ROUNDS:-3}
SAMPLES=${SAMPLES:-6000}
if [ -z "${THREADS:-}" ]; then
    THREADS=1
    n=2
    while [ "$n" -le "$CORES" ]; do THREADS="$THREADS,$n"; n=$((n * 2)); done
    # All cores, where the count is not a power of two.
    case ",$THREADS," in *",$CORES,"*) ;; *) THREADS="$THREADS,$CORES" ;; esac
fi

if [ ! -x "$BIN" ]; then
    echo "== building the release binary" >&2
    cargo build --release --quiet --bin tributary
fi
WORK=${WORK:-$(mktemp -d)}
DATASET=${1:-}
if [ -z "$DATASET" ]; then
    DATASET=$WORK/shards
    if [ ! -f "$DATASET/manifest.json" ]; then
        echo "== 10000 synthetic ImageNet-like images, packed, in $WORK" >&2
        "$BIN" synth "$WORK/images" --images 10000 --classes 10 >/dev/null
        "$BIN" pack "$WORK/images" "$DATASET" >/dev/null
    fi
fi

# The median figure of a `tributary bench` line: "  NAME   1234.5 samples/s ...".
figure() { grep -E "^  $1 +[0-9]" "$2" | head -1 | sed -E 's/^  [a-z /-]+ +([0-9.]+).*/\1/'; }

echo "$CORES cores; $SAMPLES samples; $ROUNDS rounds each; threads $THREADS ${EXTRA:-}"
echo
echo "| threads | pipeline (per thread) | steady (per thread) | ceiling (per thread) | pipeline / ceiling | per thread against the first row: whole, steady, ceiling |"
echo "|---|---|---|---|---|---|"
one=""
for n in ${THREADS//,/ }; do
    if [ "$n" -gt "$CORES" ]; then
        echo "(skipping $n threads: $CORES cores)" >&2
        continue
    fi
    log=$WORK/scaling-$n.txt
    # shellcheck disable=SC2086 # EXTRA is a list of flags
    taskset -c "0-$((n - 1))" "$BIN" bench "$DATASET" --samples "$SAMPLES" \
        --threads "$n" --rounds "$ROUNDS" ${EXTRA:-} >"$log" 2>&1 ||
        { cat "$log" >&2; exit 1; }
    pipeline=$(figure pipeline "$log")
    steady=$(figure "steady rate" "$log")
    ceiling=$(figure "decode-only ceiling" "$log")
    row=$(python3 - "$n" "$pipeline" "$steady" "$ceiling" "$one" <<'EOF'
import sys
n, pipeline, steady, ceiling = int(sys.argv[1]), *map(float, sys.argv[2:5])
per = [x / n for x in (pipeline, steady, ceiling)]
first = [float(x) for x in sys.argv[5].split()] if sys.argv[5] else per
vs = ", ".join(f"{p / f:.2f}x" for p, f in zip(per, first))
print(f"| {n} | {pipeline:.1f} ({per[0]:.1f}) | {steady:.1f} ({per[1]:.1f}) "
      f"| {ceiling:.1f} ({per[2]:.1f}) | {pipeline / ceiling:.2f} | {vs} |")
print(" ".join(f"{p:.3f}" for p in (per if not sys.argv[5] else first)))
EOF
)
    echo "$row" | head -1
    [ -n "$one" ] || one=$(echo "$row" | tail -1)
done
echo
echo "Each figure is the median of the rounds (logs in $WORK/scaling-N.txt)."
