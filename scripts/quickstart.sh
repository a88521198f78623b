#!/usr/bin/env bash
# The README's first command: installs what building needs (protoc), builds
# the release binary, and runs `tributary quickstart` (extra arguments are
# passed on, e.g. --images 4096 --ranks 4).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --build
exec cargo run --release --quiet --bin tributary -- quickstart "$@"
