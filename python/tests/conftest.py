"""Fixtures: a small packed dataset made with the `tributary` binary."""

import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def tributary_bin() -> str:
    explicit = os.environ.get("TRIBUTARY_BIN")
    if explicit:
        return explicit
    for profile in ("release", "debug"):
        path = REPO / "target" / profile / "tributary"
        if path.exists():
            return str(path)
    raise RuntimeError("build the binary first: cargo build --bin tributary")


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> str:
    """40 images in 4 classes, packed into shards of 16 samples."""
    root = tmp_path_factory.mktemp("data")
    images, shards = root / "images", root / "shards"
    run = lambda *args: subprocess.run([tributary_bin(), *args], check=True, capture_output=True)
    run("synth", str(images), "--images", "40", "--classes", "4", "--seed", "3")
    run("pack", str(images), str(shards), "--max-samples", "16")
    return str(shards)
