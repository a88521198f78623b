#!/usr/bin/env python3
"""Checks that the Python extension's test build can reuse the workspace's.

scripts/test.sh builds the extension (`pip install ./python`, debug profile)
after `cargo test --workspace` has built everything else. Cargo reuses a
compiled crate only where its features are the same, and the test build
resolves features over every member with its dev-dependencies (tokio's
`test-util`, tributary-io's `testing`, serde's `alloc`, the regex engine's
options the tools crate asks for). Built alone the extension resolved other
sets, and cargo compiled most of the dependency tree a second time: about
five minutes of a fresh CI run on 2 cores.

The extension's `unify-with-tests` feature (python/Cargo.toml, used only by
scripts/test.sh) asks for the test build's sets. This script compares, for
every crate of the extension's tree, the features `cargo tree` resolves for
the extension with `unify-with-tests` against those of the workspace with
its dev-dependencies, and fails naming each crate that differs and what to
add to the feature. Only normal (target) dependencies are compared: build
scripts and proc-macros resolve their features apart.
"""

import subprocess
import sys


def features(*args):
    """`cargo tree ARGS` as {package: set of feature lists}."""
    out = subprocess.run(
        ["cargo", "tree", "--prefix", "none", "-f", "{p}|{f}", *args],
        check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        if "|" not in line:
            continue
        package, feats = line.replace(" (*)", "").split("|", 1)
        found.setdefault(package.strip(), set()).add(feats.strip())
    return found


def main():
    extension = features("-p", "tributary-python", "--features", "unify-with-tests",
                         "-e", "normal")
    workspace = features("--workspace", "-e", "normal,dev")
    differ = []
    for package, sets in sorted(extension.items()):
        if package.startswith("tributary-python "):
            continue
        if workspace.get(package) != sets:
            differ.append((package, sets, workspace.get(package, set())))
    if not differ:
        print(f"unified features: the extension's {len(extension) - 1} dependencies resolve "
              "as in the workspace's test build")
        return 0
    print("unified features: the Python extension's test build would compile these crates "
          "a second time (their features differ from the workspace's test build):",
          file=sys.stderr)
    for package, ext, ws in differ:
        want = sorted(set(",".join(ws).split(",")) - set(",".join(ext).split(",")) - {""})
        print(f"  {package}: extension {sorted(ext)}, workspace {sorted(ws)}; "
              f"missing {want}", file=sys.stderr)
    print("add them to the `unify-with-tests` feature in python/Cargo.toml (an optional "
          "dependency with those features, or `crate/feature`)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
