#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs lints
# and every test (unit, property, integration, end-to-end), builds the user
# guide and checks its code blocks, and checks the release wheel's size.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
export TRIBUTARY_VENV="$PWD/.venv"

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== crate graph (common pure, the coordinator without the image stack, the tools outside the worker)"
scripts/check-crate-graph.sh
echo "== cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --workspace
echo "== cargo build (the binary the end-to-end tests drive)"
cargo build --quiet -p tributary-cli
echo "== docs: the user guide (mdbook build docs, into target/book), then its code blocks and links"
# mdbook reports a broken include or a bad SUMMARY.md as a warning or an
# error in its log and may still exit 0: either fails here.
log=$("$TRIBUTARY_VENV/bin/mdbook" build docs 2>&1) || { echo "$log"; exit 1; }
if grep -E "ERROR|WARN" <<<"$log"; then echo "mdbook build docs: warnings or errors above" >&2; exit 1; fi
"$TRIBUTARY_VENV/bin/python" -m pytest -q docs/tests
echo "== cargo test"
cargo test --workspace
echo "== deploy: render and validate manifests (kustomize, kubernetes-validate, hadolint, flags against target/debug/tributary)"
"$TRIBUTARY_VENV/bin/python" -m pytest -q deploy/tests
echo "== python: pip install ./python into the test venv (debug profile), then pytest"
PATH="$TRIBUTARY_VENV/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
    "$TRIBUTARY_VENV/bin/pip" install --quiet --no-build-isolation --no-deps --force-reinstall ./python
"$TRIBUTARY_VENV/bin/python" -m pytest -q python/tests
echo "== release wheel: built with maturin, at most 40 MB (what users download)"
scripts/check-wheel-size.sh 40
