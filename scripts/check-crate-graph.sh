#!/usr/bin/env bash
# The crate graph's rules (docs/ARCHITECTURE.md): tributary-common links no
# async runtime or RPC stack; tributary-coordinator (its dev-dependencies
# included) links no image stack, nor the worker, nor the tools; the dataset
# tools (tributary-tools, which may use the image stack to synthesize) stay
# out of the worker and of the Python wheel that ships it, and link no part
# of the rank pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."

forbid() {
    local crate=$1 edges=$2 pattern=$3 found
    found=$(cargo tree --quiet -p "$crate" -e "$edges" --prefix none | grep -E "^($pattern) v" | sort -u || true)
    if [ -n "$found" ]; then
        echo "$crate links what it must not:" >&2
        echo "$found" >&2
        return 1
    fi
    echo "$crate: none of $pattern"
}

forbid tributary-common normal 'tokio|tonic|hyper|object_store'
forbid tributary-coordinator all 'tributary-worker|tributary-tools|turbojpeg-sys|image|fast_image_resize|rayon|jpeg-encoder'
forbid tributary-worker normal 'tributary-tools|jpeg-encoder'
forbid tributary-python normal 'tributary-tools|jpeg-encoder'
forbid tributary-tools normal 'tributary-worker|tributary-coordinator|turbojpeg-sys|fast_image_resize'
