#!/usr/bin/env bash
# Builds the Python package's release wheel, what users download, and fails
# when it is larger than the limit (40 MB by default). Release builds carry
# no debug info (Cargo.toml, [profile.release]); with line tables the
# extension alone was 145 MB.
#
#   scripts/check-wheel-size.sh [LIMIT_MB]
#
# Uses maturin from the test virtualenv (TRIBUTARY_VENV, default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."

limit_mb=${1:-40}
venv=${TRIBUTARY_VENV:-$PWD/.venv}
out=target/wheel-size
rm -rf "$out"
PATH="$venv/bin:$PATH" maturin build --release --locked -m python/Cargo.toml \
    -i "$venv/bin/python" -o "$out"
wheels=("$out"/*.whl)
[ ${#wheels[@]} -eq 1 ] || { echo "check-wheel-size: expected one wheel in $out, got ${wheels[*]}" >&2; exit 1; }
# The wheel (compressed) is what is downloaded; the extension is what is
# installed and loaded.
"$venv/bin/python" - "${wheels[0]}" "$limit_mb" <<'PY'
import os, sys, zipfile
wheel, limit_mb = sys.argv[1], float(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    ext = max(z.infolist(), key=lambda i: i.file_size)
size = os.path.getsize(wheel)
print(f"check-wheel-size: {os.path.basename(wheel)}: {size / 1e6:.1f} MB "
      f"(limit {limit_mb:g} MB); {ext.filename}: {ext.file_size / 1e6:.1f} MB installed")
if size > limit_mb * 1e6:
    sys.exit(f"check-wheel-size: the wheel is over {limit_mb:g} MB: is the release "
             "profile still stripping debug info (Cargo.toml)?")
PY
