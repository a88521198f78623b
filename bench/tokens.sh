#!/usr/bin/env bash
# Token batches: Tributary against a Megatron-style baseline on the same
# tokens, cores and run; and packing documents/s against the Python
# `tokenizers` package.
#
#   bench/tokens.sh              (run by hand, not by CI)
#   TOKENS=134217728 LENGTH=2048 BATCH=8 MEASURE=33554432 bench/tokens.sh
#
# - a token dataset of TOKENS random u16 tokens (documents of ~600 tokens,
#   log-normal lengths) in Megatron .bin/.idx shards of 32 Mi tokens
#   (bench/tokens.py dataset), read from the page cache;
# - Tributary: tributary.Loader(sequence_length=LENGTH, packing="concat",
#   batch_size=BATCH) in-process, 1 and 2 decode threads, and `tributary
#   bench --sequence-length`;
# - Megatron-style: GPTDataset's document index, sample index and shuffle
#   index over numpy memmaps of the same .bin files, under a torch
#   DataLoader with 2 workers and with 0 (bench/tokens.py megatron);
# - every contender in a process of its own, MEASURE tokens after its first
#   batch: tokens/s, CPU-seconds per million tokens (the process and its
#   descendants), time to the first batch (construction included);
# - `tributary pack --tokenizer bytes` documents/s over a JSONL corpus of
#   DOCUMENTS documents, and the `tokenizers` package's encode_batch with a
#   byte-level BPE tokenizer.json (TOKENIZER_JSON) on the same corpus, when
#   both are at hand.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
BIN=${TRIBUTARY_BIN:-target/release/tributary}
PACK_BIN=${PACK_BIN:-$BIN}
TOKENS=${TOKENS:-134217728}
LENGTH=${LENGTH:-2048}
BATCH=${BATCH:-8}
MEASURE=${MEASURE:-33554432}
DOCUMENTS=${DOCUMENTS:-200000}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
RESULTS=$DIR/results.jsonl

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "binary: $BIN ($(stat -c %y "$BIN" | cut -d. -f1)); python: $PY"
"$PY" bench/tokens.py dataset "$DIR/tokens" --tokens "$TOKENS"
cat "$DIR"/tokens/*.bin >/dev/null  # into the page cache

contender() {  # contender KIND NAME [FLAGS...]
    local kind=$1 name=$2
    shift 2
    "$PY" bench/tokens.py "$kind" "$DIR/tokens" --name "$name" --length "$LENGTH" \
        --batch "$BATCH" --tokens "$MEASURE" "$@" | tail -n 1 >>"$RESULTS"
}
contender tributary "Tributary Loader, 1 decode thread" --threads 1
contender tributary "Tributary Loader, 2 decode threads" --threads 2
contender megatron "Megatron-style, 2 workers" --workers 2
contender megatron "Megatron-style, 0 workers" --workers 0
"$PY" bench/tokens.py table "$RESULTS"

echo
echo "tributary bench --sequence-length $LENGTH --batch-size $BATCH --threads 1:"
"$BIN" bench "$DIR/tokens" --sequence-length "$LENGTH" --batch-size "$BATCH" --threads 1 \
    --samples $((MEASURE / LENGTH)) 2>&1 | tail -n 6

echo
"$PY" bench/tokens.py corpus "$DIR/corpus.jsonl" --documents "$DOCUMENTS"
echo "corpus: $DOCUMENTS documents, $(du -m "$DIR/corpus.jsonl" | cut -f1) MB"
if "$PACK_BIN" pack --help | grep -q -- --tokenizer; then
    STARTED=$(date +%s.%N)
    "$PACK_BIN" pack "$DIR/corpus.jsonl" "$DIR/packed" --tokenizer bytes --text-field text >/dev/null 2>&1
    "$PY" -c "import time; s = time.time() - $STARTED; print(f'tributary pack --tokenizer bytes: {$DOCUMENTS / s:.0f} documents/s ({s:.1f} s)')"
    if [ -n "${TOKENIZER_JSON:-}" ]; then
        STARTED=$(date +%s.%N)
        "$PACK_BIN" pack "$DIR/corpus.jsonl" "$DIR/packed-bpe" --tokenizer "$TOKENIZER_JSON" --text-field text >/dev/null 2>&1
        "$PY" -c "import time; s = time.time() - $STARTED; print(f'tributary pack --tokenizer {\"$TOKENIZER_JSON\"}: {$DOCUMENTS / s:.0f} documents/s ({s:.1f} s)')"
    fi
else
    echo "$PACK_BIN has no pack --tokenizer: pack not measured"
fi
if "$PY" -c "import tokenizers" 2>/dev/null && [ -n "${TOKENIZER_JSON:-}" ]; then
    "$PY" bench/tokens.py tokenizers "$DIR/corpus.jsonl" --name tokenizers --tokenizer "$TOKENIZER_JSON"
else
    echo "the tokenizers package or TOKENIZER_JSON is missing: its encode_batch not measured"
fi
