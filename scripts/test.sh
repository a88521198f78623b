#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs lints
# and every test (unit, property, integration, end-to-end).
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
echo "== cargo test"
cargo test --workspace
echo "== deploy: render and validate manifests (kustomize, kubernetes-validate, hadolint, flags against target/debug/tributary)"
"$TRIBUTARY_VENV/bin/python" -m pytest -q deploy/tests
echo "== python: pip install ./python into the test venv (debug profile), then pytest"
PATH="$TRIBUTARY_VENV/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev" \
    "$TRIBUTARY_VENV/bin/pip" install --quiet --no-build-isolation --no-deps --force-reinstall ./python
"$TRIBUTARY_VENV/bin/python" -m pytest -q python/tests
