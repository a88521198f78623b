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


def synth_dataset(root: pathlib.Path, images: int, classes: int, seed: int, per_shard: int) -> str:
    """`images` synthetic images in `classes` classes, packed into shards of
    `per_shard` samples under `root`; returns the dataset's directory."""
    source, shards = root / "images", root / "shards"
    run = lambda *args: subprocess.run([tributary_bin(), *args], check=True, capture_output=True)
    run("synth", str(source), "--images", str(images), "--classes", str(classes), "--seed", str(seed))
    run("pack", str(source), str(shards), "--max-samples", str(per_shard))
    return str(shards)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> str:
    """40 images in 4 classes, packed into shards of 16 samples."""
    return synth_dataset(tmp_path_factory.mktemp("data"), 40, 4, 3, 16)


def write_webdataset(directory: pathlib.Path, shards, index: bool = True) -> str:
    """Writes `shards` (each a list of `(key, {ext: bytes})`) as WebDataset
    tar files in `directory` and indexes them with `tributary index`."""
    import io
    import tarfile

    directory.mkdir(parents=True, exist_ok=True)
    for number, samples in enumerate(shards):
        with tarfile.open(directory / f"part-{number:04d}.tar", "w") as tar:
            for key, fields in samples:
                for ext, data in fields.items():
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    if index:
        subprocess.run([tributary_bin(), "index", str(directory)], check=True, capture_output=True)
    return str(directory)


def image_folder(root: pathlib.Path, sizes, fmt: str = "PNG", seed: int = 0) -> pathlib.Path:
    """An ImageFolder tree of smooth, textured images of the given sizes in
    two classes, written by PIL in `fmt`."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    suffix = {"PNG": "png", "JPEG": "jpg", "WEBP": "webp"}[fmt]
    for i, (width, height) in enumerate(sizes):
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        phase = rng.uniform(0, 6.28, size=3)
        pixels = np.stack(
            [127 + 120 * np.sin(x / (7 + c * 3) + y / (11 + c) + phase[c]) for c in range(3)], axis=-1
        )
        pixels += rng.normal(0, 6, size=pixels.shape)  # texture: resampling must matter
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        directory = root / f"class{i % 2}"
        directory.mkdir(parents=True, exist_ok=True)
        image.save(directory / f"{i:04d}.{suffix}", fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return root
