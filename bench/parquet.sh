#!/usr/bin/env bash
# Parquet datasets read in place: Tributary over the benchmark's JPEGs
# written as Hugging Face-style Parquet (an image struct column + label),
# against Tributary over the same images in its tar shards, and against
# Hugging Face `datasets` streaming the same Parquet files under a torch
# DataLoader, on the same cores, in the same run.
#
#   bench/parquet.sh [IMAGES]        (default 12000, ~7 minutes on 2 cores; by hand, not by CI)
#   IMAGES=20000 ROUNDS=3 FILES=8 ROW_GROUP=100 COMPRESSION=snappy bench/parquet.sh
#
# - `tributary synth` images (ImageNet-like sizes, JPEG), packed into tar
#   shards with `tributary pack`, and the same images and labels written
#   into FILES Parquet files data/train-0000i-of-0000N.parquet (an `image`
#   struct {bytes, path}, an int64 `label`, the `huggingface` schema
#   metadata, row groups of ROW_GROUP rows, COMPRESSION (snappy, pyarrow's
#   and `datasets`' default), a page index; bench/parquet.py write),
#   indexed with `tributary index`; all of it in the page cache;
# - every contender in a process of its own (bench/contenders.py), the
#   train preset (RandomResizedCrop 224 + flip + normalise, float32
#   N x 3 x 224 x 224, batches of 64), every image once, all cores:
#   tributary.Loader(fields=["image", "label"]) over the Parquet files,
#   tributary.Loader over the tar shards, and `datasets` (pinned,
#   DATASETS_VERSION) load_dataset("parquet", streaming=True) with PIL and
#   torchvision in a DataLoader with one worker per core; and, for
#   reference, bench/run.sh's baseline: the DataLoader over the images as
#   files (torchvision's ImageFolder);
# - ROUNDS (3) interleaved rounds, each starting with the next contender;
#   the steady samples/s (half to 80% of the epoch) and the first batch
#   (construction included), medians and min-max, and the ratios Parquet /
#   tar and Parquet / `datasets` taken within each round (bench/parquet.py
#   table);
# - then `tributary bench` over both datasets (one decode thread): the
#   stage times of one loader without Python (fetch, parse, decode).
#
# `datasets` is not a test dependency: it goes into a venv of its own,
# target/bench-venv, which sees the project venv's packages (torch,
# torchvision, pyarrow) through a .pth file; the release extension is
# installed there too, so the project venv is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
# 12000: `datasets` sleeps 5 s in each worker once its files are read
# (SLEEP_TIME_ON_THREADS_SHUTDOWN), when 1024 rows (its shuffle buffer) are
# still to come: at 1 - 1024 x 2 / 12000 = 83% of the epoch with 2 workers,
# after the steady window (half to 80%). More cores need more images.
IMAGES=${1:-${IMAGES:-12000}}
ROUNDS=${ROUNDS:-3}
ROW_GROUP=${ROW_GROUP:-100}
COMPRESSION=${COMPRESSION:-snappy}
DATASETS_VERSION=5.2.0
CORES=$(nproc)
# `datasets` gives each DataLoader worker whole files: at least one a worker.
FILES=${FILES:-$((CORES > 8 ? CORES : 8))}
if [ "$IMAGES" -lt $((1024 * CORES * 5)) ]; then
    echo "note: with $IMAGES images the \`datasets\` row's steady window holds its workers' 5-s sleep" \
        "(more than $((1024 * CORES * 5)) images leave it out)" >&2
fi

[ -x .venv/bin/python ] || scripts/setup.sh >/dev/null
VENV=$PWD/.venv
BENCH_VENV=$PWD/target/bench-venv
PY=$BENCH_VENV/bin/python
if ! "$PY" -c "import datasets, sys; sys.exit(datasets.__version__ != '$DATASETS_VERSION')" 2>/dev/null; then
    echo "== $BENCH_VENV: datasets $DATASETS_VERSION beside the project venv's packages" >&2
    "$VENV/bin/python" -m venv "$BENCH_VENV"
    purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
    purelib "$VENV/bin/python" >"$(purelib "$PY")/project-venv.pth"
    "$PY" -m pip install --quiet --disable-pip-version-check "datasets==$DATASETS_VERSION"
fi
echo "== building the release binary and extension" >&2
cargo build --release --quiet --bin tributary
rm -rf target/bench-wheel
PATH="$VENV/bin:$PATH" maturin build --quiet --release --locked -m python/Cargo.toml \
    -i "$PY" -o target/bench-wheel >/dev/null
"$PY" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall target/bench-wheel/*.whl
BIN=$PWD/target/release/tributary

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results.jsonl
# `datasets` on local files, without the Hub or the user's cache.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME=$WORK/hf-home

echo "== $IMAGES synthetic ImageNet-like images: tar shards, Parquet files" >&2
"$BIN" synth "$WORK/images" --images "$IMAGES" --classes 10 >&2
"$BIN" pack "$WORK/images" "$WORK/shards" >/dev/null
"$PY" bench/parquet.py write "$WORK/images" "$WORK/parquet" --files "$FILES" --row-group "$ROW_GROUP" \
    --compression "$COMPRESSION" >&2
"$BIN" index "$WORK/parquet" >&2
cat "$WORK"/shards/* "$WORK"/parquet/data/* >/dev/null  # into the page cache
PARQUET_FILES=("$WORK"/parquet/data/*.parquet)

echo "machine: $CORES cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "tar shards: $(du -sm "$WORK/shards" | cut -f1) MB; Parquet: ${#PARQUET_FILES[@]} files, row groups of $ROW_GROUP, $COMPRESSION, $(du -sm "$WORK/parquet" | cut -f1) MB"
run() { echo "== $*" >&2; "$PY" bench/contenders.py "$@" | tee -a "$RESULTS"; }
contender() {
    case $1 in
    parquet) run tributary --label parquet --dataset "$WORK/parquet" --fields image,label ;;
    tar) run tributary --label tar --dataset "$WORK/shards" ;;
    datasets) run hf-datasets --label datasets --parquet "${PARQUET_FILES[@]}" --workers "$CORES" ;;
    folder) run torch-folder --label folder --images "$WORK/images" --workers "$CORES" ;;
    esac
}
order=(parquet tar datasets folder)
for round in $(seq "$ROUNDS"); do
    echo "== round $round of $ROUNDS" >&2
    # Each round starts with the next contender: none always runs first.
    for i in "${!order[@]}"; do
        contender "${order[(round - 1 + i) % ${#order[@]}]}"
    done
done
"$PY" bench/parquet.py table "$RESULTS" --cores "$CORES"

SAMPLES=$(( IMAGES < 2000 ? IMAGES : 2000 ))
for dataset in "parquet --fields image,label" "shards"; do
    echo
    echo "tributary bench $dataset --threads 1 --samples $SAMPLES:"
    # shellcheck disable=SC2086 # the name, then its flags
    set -- $dataset
    "$BIN" bench "$WORK/$1" "${@:2}" --threads 1 --samples "$SAMPLES" 2>&1 | tail -n 12
done
