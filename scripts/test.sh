#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs lints
# and every test (unit, property, integration, end-to-end), builds the user
# guide and checks its code blocks, and checks that release builds carry no
# debug info (what kept the wheel small).
#
#   scripts/test.sh          what CI runs
#   scripts/test.sh --full   also builds the release wheel and checks its size
#                            (a full release build: about 10 more minutes)
set -euo pipefail
cd "$(dirname "$0")/.."

full=false
[ "${1:-}" = "--full" ] && full=true

# Each phase's header carries the seconds since the start, so a slow CI run
# shows where its time went.
start=$SECONDS
phase() { echo "== $* (at $((SECONDS - start)) s)"; }

scripts/setup.sh
export TRIBUTARY_VENV="$PWD/.venv"

phase "cargo fmt --check"
cargo fmt --all --check
phase "cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
phase "crate graph (common pure, the coordinator without the image stack, the tools outside the worker)"
scripts/check-crate-graph.sh
phase "unified features: the Python extension's test build resolves its dependencies' features as the workspace's does"
"$TRIBUTARY_VENV/bin/python" scripts/unified_features.py
phase "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --workspace
# Every test target and the binary the end-to-end tests drive, built once,
# with the features of the whole workspace and its dev-dependencies (tokio's
# test-util, tributary-io's testing). A `cargo build -p tributary-cli` here
# resolved tokio without test-util, and `cargo test` then built tokio and
# all that stands on it (hyper, tonic, object_store, every crate of ours) a
# second time: a fresh run's builds took 530 + 758 s on 2 cores, now 896 s.
phase "cargo test --no-run (the tests, and target/debug/tributary that the docs and end-to-end tests drive)"
cargo test --workspace --no-run --quiet
phase "docs: the user guide (mdbook build docs, into target/book), then its code blocks and links"
# mdbook reports a broken include or a bad SUMMARY.md as a warning or an
# error in its log and may still exit 0: either fails here.
log=$("$TRIBUTARY_VENV/bin/mdbook" build docs 2>&1) || { echo "$log"; exit 1; }
if grep -E "ERROR|WARN" <<<"$log"; then echo "mdbook build docs: warnings or errors above" >&2; exit 1; fi
"$TRIBUTARY_VENV/bin/python" -m pytest -q docs/tests
phase "python: pip install ./python into the test venv (debug profile, the test build's features: its dependencies are reused, not compiled again)"
PATH="$TRIBUTARY_VENV/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev --features unify-with-tests" \
    "$TRIBUTARY_VENV/bin/pip" install --quiet --no-build-isolation --no-deps --force-reinstall ./python
# pytest of python/tests runs in the background, beside cargo test, the
# fleet bench and the deploy tests: each suite mostly waits on the
# processes it starts (cargo test used 109% of the 2 cores over its 337 s,
# pytest 95% over 323 s), so together they take about the time of the
# longer one. Its log is printed once they are done.
phase "python: pytest (the slowest tests listed) starts in the background; its log follows the deploy tests"
pylog=$(mktemp)
"$TRIBUTARY_VENV/bin/python" -m pytest -q --durations=8 python/tests >"$pylog" 2>&1 &
pytest_pid=$!
trap 'kill "$pytest_pid" 2>/dev/null || true' EXIT
phase "cargo test"
cargo test --workspace
phase "fleet: 2,048 simulated ranks of one sync job against target/debug/tributary and a real etcd (0 failed calls, epoch 0 split exactly, the group's commit exact, a restart of every rank resuming exactly)"
# The release figures (16,384 ranks; --dynamic): README, Coordinator at fleet size.
# --workspace: the features the test build resolved (with -p tributary-tests
# alone, num-integer resolves otherwise, and parquet and every crate of ours
# are built again).
cargo test -q --workspace --bench fleet -- --ranks 2048 --step-ms 2000 --seconds 8 \
    --warmup-s 1 --commit-every 2 --require-clean --restart
phase "deploy: render and validate manifests (kustomize, kubernetes-validate, hadolint, flags against target/debug/tributary)"
"$TRIBUTARY_VENV/bin/python" -m pytest -q deploy/tests
phase "python: pytest's log (it ran beside the phases above)"
pytest_rc=0
wait "$pytest_pid" || pytest_rc=$?
trap - EXIT
cat "$pylog"
rm -f "$pylog"
[ "$pytest_rc" -eq 0 ] || { echo "python/tests failed (pytest exit status $pytest_rc): see its log above" >&2; exit 1; }
if $full; then
    phase "release wheel: built with maturin, at most 40 MB (what users download)"
    scripts/check-wheel-size.sh 40
else
    # With line tables the extension was 145 MB: the release profile must
    # keep stripping debug info (the wheel itself: --full).
    phase "release profile: no debug info (the wheel's size: scripts/test.sh --full)"
    "$TRIBUTARY_VENV/bin/python" - <<'PY'
import sys, tomllib
release = tomllib.load(open("Cargo.toml", "rb"))["profile"]["release"]
if release.get("debug") not in (False, 0, "none") or release.get("strip") not in ("debuginfo", "symbols", True):
    sys.exit(f"Cargo.toml [profile.release] keeps debug info ({release}): the wheel would be "
             "over 100 MB; set debug = false and strip = \"debuginfo\" (scripts/test.sh --full checks the wheel)")
print(f"release profile: debug={release.get('debug')!r} strip={release.get('strip')!r}")
PY
fi
phase "done"
