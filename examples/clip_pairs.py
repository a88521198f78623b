"""Image-caption pairs, CLIP-style: a CSV listing packed into shards, read
back as (uint8 images, captions).

    python examples/clip_pairs.py [--workdir DIR] [--tributary PATH]

It makes a few synthetic photos (``tributary synth``), writes a listing
``path,label,caption`` of them with captions built from each row (some with
commas and double quotes, which the CSV quotes), packs it with
``tributary pack listing.csv DIR`` (the caption becomes each sample's
``txt`` field, the integer label its class index), then reads

    tributary.Loader(DIR, fields=["image", "txt"], dtype="uint8",
                     layout="NHWC", transform="resize", image_size=64)

which yields ``(N x 64 x 64 x 3 uint8 array, list of N str)``. uint8
batches are a quarter of float32's bytes; with torch installed,
``tributary.torch.normalize`` turns one into the normalised float32
``N x 3 x 64 x 64`` (channels_last) batch a model takes, on the GPU when
there is one. It checks that every pair matches its listing row (the
caption, and the image against the listed file resized with PIL) and exits
non-zero if anything is off.
"""

import argparse
import csv
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import tributary

IMAGES, CLASSES, SIZE, BATCH = 96, 6, 64, 16


def caption(row: int, label: int) -> str:
    """Row ``row``'s caption: commas always, double quotes in every third."""
    if row % 3 == 0:
        return f'a "photo" of class {label}, number {row}'
    return f"a photo of class {label}, number {row}"


def write_listing(images: pathlib.Path, listing: pathlib.Path) -> list:
    """Lists every synthetic image (paths relative to the listing); returns
    the rows as (path, label, caption)."""
    files = sorted(p for p in images.rglob("*") if p.is_file())  # JPEGs and a PNG
    rows = []
    for i, path in enumerate(files):
        label = int(path.parent.name.rsplit("_", 1)[-1])  # class_003 -> 3
        rows.append((str(path.relative_to(listing.parent)), label, caption(i, label)))
    with open(listing, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["path", "label", "caption"])
        out.writerows(rows)
    return rows


def resized(path: pathlib.Path):
    """The listed file resized to SIZE x SIZE with PIL (None without PIL)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB").resize((SIZE, SIZE), Image.BILINEAR), dtype=np.float32)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", help="where to write the images, listing and shards "
                                     "(default: a temporary directory, removed after)")
    p.add_argument("--tributary", default=os.environ.get("TRIBUTARY_BIN") or shutil.which("tributary"),
                   help="the tributary CLI (default: $TRIBUTARY_BIN or tributary on PATH)")
    args = p.parse_args()
    if not args.tributary:
        sys.exit("no tributary CLI: pass --tributary PATH or set TRIBUTARY_BIN")
    temporary = None
    if args.workdir:
        work = pathlib.Path(args.workdir).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        temporary = tempfile.TemporaryDirectory(prefix="clip-pairs-")
        work = pathlib.Path(temporary.name)
    images, listing, shards = work / "images", work / "listing.csv", work / "shards"
    for old in (images, shards):
        shutil.rmtree(old, ignore_errors=True)

    subprocess.run([args.tributary, "synth", str(images), "--images", str(IMAGES),
                    "--classes", str(CLASSES)], check=True, stdout=subprocess.DEVNULL)
    rows = write_listing(images, listing)
    subprocess.run([args.tributary, "pack", str(listing), str(shards)], check=True)

    # Listing order, one pass: batch after batch lines up with the rows.
    loader = tributary.Loader(str(shards), fields=["image", "txt"], dtype="uint8", layout="NHWC",
                              transform="resize", image_size=SIZE, batch_size=BATCH, shuffle=False)
    seen, batches, worst = 0, 0, 0.0
    for pixels, captions in loader:
        assert pixels.dtype == np.uint8 and pixels.shape == (len(captions), SIZE, SIZE, 3), pixels.shape
        assert all(isinstance(c, str) for c in captions)
        for j, text in enumerate(captions):
            path, label, expected = rows[seen + j]
            assert text == expected, f"row {seen + j}: caption {text!r}, listed {expected!r}"
            reference = resized(listing.parent / path)
            if reference is not None:
                worst = max(worst, float(np.abs(pixels[j].astype(np.float32) - reference).mean()))
            if seen + j < 2:
                print(f"pair {seen + j}: {pixels[j].shape} uint8 image, mean {pixels[j].mean():.1f}, "
                      f"caption {text!r}")
        seen, batches = seen + len(captions), batches + 1
    assert seen == len(rows) == IMAGES, f"read {seen} pairs of {len(rows)} listed, {IMAGES} made"
    assert batches == len(loader) == -(-len(rows) // BATCH), (batches, len(loader))
    # Resizers differ a little (antialiasing, rounding); another image would be far off.
    assert worst < 12, f"an image differs from its listed file by {worst:.1f} on average"
    print(f"{seen} pairs in {batches} batches of up to {BATCH}, listing order; "
          f"largest mean pixel difference from PIL's resize {worst:.2f}")

    # Shuffled training reading: the ids say which row each pair came from.
    loader = tributary.Loader(str(shards), fields=["image", "txt"], dtype="uint8", layout="NHWC",
                              transform="resize", image_size=SIZE, batch_size=BATCH,
                              shuffle=True, seed=7, return_ids=True)
    order = []
    for pixels, captions, ids in loader:
        for text, i in zip(captions, ids.tolist()):
            assert text == rows[i][2], f"sample {i}: caption {text!r}, listed {rows[i][2]!r}"
        order += ids.tolist()
    assert sorted(order) == list(range(len(rows))), "a shuffled epoch reads every pair once"
    assert order != sorted(order), "a shuffled epoch is not in listing order"
    print(f"shuffled epoch: {len(order)} pairs, each once, first ids {order[:6]}")

    try:
        import torch

        import tributary.torch as tt
    except ImportError:
        print("torch is not installed: skipping tributary.torch.normalize")
    else:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        pixels, captions = next(iter(tributary.Loader(
            str(shards), fields=["image", "txt"], dtype="uint8", layout="NHWC",
            transform="resize", image_size=SIZE, batch_size=BATCH, shuffle=False)))
        batch = tt.normalize(torch.from_numpy(pixels), device=device, layout="NHWC")
        assert batch.shape == (BATCH, 3, SIZE, SIZE) and batch.dtype == torch.float32
        assert batch.is_contiguous(memory_format=torch.channels_last)
        mean = torch.tensor(tt.IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(tt.IMAGENET_STD).view(1, 3, 1, 1)
        expected = (torch.from_numpy(pixels).permute(0, 3, 1, 2).float() / 255 - mean) / std
        assert torch.allclose(batch.cpu(), expected, atol=1e-5)
        print(f"normalize: {tuple(batch.shape)} {batch.dtype} channels_last on {device}, "
              f"mean {batch.mean().item():+.3f}")
    if temporary:
        temporary.cleanup()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
