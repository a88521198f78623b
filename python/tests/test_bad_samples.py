"""Bad samples through the Python `Loader`: raised by default, naming the
shard, the byte offset and the key; skipped with on_error="skip"; and image
formats chosen by magic bytes, not the file name."""

import struct
import subprocess
import zlib

import pytest

import tributary

from conftest import tributary_bin

SMALL = dict(batch_size=8, image_size=32, decode_threads=2, shuffle_buffer=0)


def png(width: int, height: int) -> bytes:
    """An RGB8 PNG, written by hand (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(
        b"\0" + b"".join(bytes((x * 5 % 256, y * 7 % 256, 99)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> str:
    """40 images in 4 classes; one is not an image, and a PNG is named .JPEG."""
    root = tmp_path_factory.mktemp("damaged")
    images, shards = root / "images", root / "shards"
    run = lambda *args: subprocess.run([tributary_bin(), *args], check=True, capture_output=True)
    run("synth", str(images), "--images", "40", "--classes", "4", "--seed", "5")
    files = sorted(p for p in images.rglob("*") if p.is_file())
    jpgs = [p for p in files if p.suffix == ".jpg"]
    jpgs[7].write_bytes(b"this is not an image at all")
    # A PNG named like an ImageNet JPEG, beside the class's JPEGs.
    jpgs[11].unlink()
    jpgs[11].with_suffix(".JPEG").write_bytes(png(48, 40))
    run("pack", str(images), str(shards), "--max-samples", "16")
    return str(shards)


def test_a_bad_sample_raises_by_default_naming_shard_offset_and_key(damaged):
    with pytest.raises(RuntimeError, match=r"shard shard-\d+\.tar, chunk at byte \d+: sample `") as error:
        for _ in tributary.Loader(damaged, seed=1, **SMALL):
            pass
    assert "not a JPEG, PNG or WebP" in str(error.value)


def test_skipped_samples_shorten_batches_and_keep_the_order(damaged):
    def epoch():
        loader = tributary.Loader(damaged, seed=1, on_error="skip", max_bad_fraction=0.05, return_ids=True, **SMALL)
        sizes, ids = [], []
        for images, labels, batch_ids in loader:
            assert images.shape[0] == labels.shape[0] == batch_ids.shape[0]
            sizes.append(images.shape[0])
            ids.extend(batch_ids.tolist())
        return sizes, ids, loader.state_dict()["samples"]

    sizes, ids, samples = epoch()
    assert len(sizes) == 5, "every batch comes out"
    assert sum(sizes) == 39, "one sample skipped, the PNG named .JPEG decoded"
    assert samples == 40, "the skipped sample counts as read"
    assert epoch() == (sizes, ids, samples), "same seed, same batches"


def test_past_max_bad_fraction_skipping_raises(damaged):
    with pytest.raises(RuntimeError, match="more than max_bad_fraction"):
        for _ in tributary.Loader(damaged, seed=1, on_error="skip", max_bad_fraction=0.0, **SMALL):
            pass


def test_bad_policy_arguments_are_value_errors(damaged):
    with pytest.raises(ValueError, match='on_error must be "raise" or "skip"'):
        tributary.Loader(damaged, on_error="ignore")
    with pytest.raises(ValueError, match="max_bad_fraction"):
        tributary.Loader(damaged, on_error="skip", max_bad_fraction=1.5)
