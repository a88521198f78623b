#!/usr/bin/env bash
# Packs one big shard (GB gigabytes of random samples, one shard) into a
# local directory three ways in the same run and prints peak RSS and MB/s:
#   streaming   the default: the shard goes out in 16 MiB parts as it is built
#   in-memory   the same binary told to PUT shards up to 5 GiB whole
#               (--single-put-limit 5 GiB): the whole shard is held first
#   old         OLD_BIN, a build from before streaming, if given
# Needs /usr/bin/time (GNU). Usage:
#   scripts/bench-pack.sh [GB] [BIN] [OLD_BIN]
# e.g. scripts/bench-pack.sh 2 target/debug/tributary /tmp/tributary-old
set -euo pipefail
gb=${1:-2}
bin=${2:-target/debug/tributary}
old=${3:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-pack.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
samples=$((gb * 32))
for i in $(seq -w 1 "$samples"); do
    head -c 33554432 /dev/urandom >"$work/src/s$i.bin"
done
bytes=$((samples * 33554432))
echo "source: $samples samples of 32 MiB = $((bytes >> 20)) MiB, one shard (--max-bytes 8 GiB)"

run() {
    local label=$1 exe=$2
    shift 2
    rm -rf "$work/out"
    local start end
    start=$(date +%s.%N)
    /usr/bin/time -v -o "$work/time" "$exe" pack "$work/src" "$work/out" \
        --max-bytes $((8 << 30)) "$@" >"$work/stdout" 2>"$work/stderr" || {
        cat "$work/stderr"
        return 1
    }
    end=$(date +%s.%N)
    local rss
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
    awk -v l="$label" -v r="$rss" -v s="$start" -v e="$end" -v b="$bytes" \
        'BEGIN { printf "%-10s peak RSS %7.0f MiB   %6.1f s   %6.1f MB/s\n", l, r / 1024, e - s, b / (e - s) / 1e6 }'
    grep -o "[0-9]* multipart parts, at most [0-9.]* MB held by uploads" "$work/stdout" || true
}

run streaming "$bin"
run in-memory "$bin" --single-put-limit $((5 << 30))
if [ -n "$old" ]; then
    run old "$old"
fi
