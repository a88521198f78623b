"""The image presets against torchvision on the same decoded pixels, every
dtype and layout, and determinism across thread counts.

The bounds (max absolute difference, in uint8 levels) are what this
implementation measures plus a margin; torchvision resamples with its own
fixed-point antialiased kernel, Tributary with fast_image_resize's, so a
level of rounding either way is expected, never more than a few.
"""

import subprocess

import numpy as np
import pytest
import torch
from torchvision.transforms.v2 import functional as F

import tributary
from conftest import image_folder, tributary_bin, write_webdataset

# Eval and resize: one resample, so rounding alone. Train (crop = the whole
# image, only the flip random): the same.
MAX_LEVELS = 2
MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
SIZES = [(96, 64), (64, 96), (200, 150), (150, 200), (333, 257), (40, 30)]


@pytest.fixture(scope="module")
def pngs(tmp_path_factory):
    """PNG images (exact pixels) of several sizes, and their pixels."""
    root = tmp_path_factory.mktemp("pngs")
    image_folder(root / "images", SIZES, "PNG", seed=5)
    shards = root / "shards"
    subprocess.run([tributary_bin(), "pack", str(root / "images"), str(shards)], check=True,
                   capture_output=True)
    return str(shards)


def read_all(dataset, **kwargs):
    """Every sample of one pass, by sample id: the image array per id."""
    loader = tributary.Loader(dataset, shuffle=False, return_ids=True, batch_size=4,
                              decode_threads=2, **kwargs)
    out = {}
    for images, _labels, ids in loader:
        for image, sample in zip(images, ids):
            out[int(sample)] = np.array(image)
    return out


def decoded(dataset):
    """The decoded pixels (HWC uint8) of each sample, from preset `none`."""
    return read_all(dataset, transform="none", dtype="uint8", layout="NHWC")


def chw(pixels):
    return torch.from_numpy(np.ascontiguousarray(pixels.transpose(2, 0, 1)))


def test_preset_none_gives_the_decoded_pixels_as_they_are(pngs):
    from PIL import Image

    pixels = decoded(pngs)
    assert len(pixels) == len(SIZES)
    shapes = sorted(p.shape for p in pixels.values())
    assert shapes == sorted((h, w, 3) for w, h in SIZES)
    # PNGs: exactly PIL's pixels (file order: class0 then class1, by name).
    import pathlib
    files = sorted(pathlib.Path(pngs).parent.glob("images/*/*.png"))
    by_shape = {np.asarray(Image.open(f).convert("RGB")).tobytes() for f in files}
    assert {p.tobytes() for p in pixels.values()} == by_shape
    # float32 NCHW of the same: normalised, transposed.
    floats = read_all(pngs, transform="none")
    for sample, image in floats.items():
        expected = (pixels[sample].transpose(2, 0, 1) / 255.0 - MEAN[:, None, None]) / STD[:, None, None]
        assert np.abs(image - expected).max() < 1e-5


def test_eval_matches_torchvisions_resize_and_center_crop(pngs):
    pixels = decoded(pngs)
    for size, fraction in ((32, 0.875), (48, 1.0), (24, 0.5)):
        ours = read_all(pngs, transform="eval", image_size=size, crop_fraction=fraction,
                        dtype="uint8", layout="NCHW")
        worst = 0
        for sample, image in ours.items():
            reference = F.center_crop(
                F.resize(chw(pixels[sample]), int(size / fraction), antialias=True), [size, size]
            )
            assert image.shape == (3, size, size)
            worst = max(worst, int(np.abs(image.astype(int) - reference.numpy().astype(int)).max()))
        assert worst <= MAX_LEVELS, f"eval {size}/{fraction}: {worst} levels"


def test_reduced_dct_eval_stays_within_a_few_levels_of_torchvisions_pixels(tmp_path):
    # Large photos: the centre crop shown is at least twice the output, so
    # the JPEG decodes at 1/2 (or 1/4) scale.
    image_folder(tmp_path / "images", [(640, 480), (1024, 768), (900, 1200), (2000, 1500)],
                 "JPEG", seed=11)
    shards = str(tmp_path / "shards")
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "images"), shards], check=True,
                   capture_output=True)
    pixels = decoded(shards)
    size = 112
    full = read_all(shards, transform="eval", image_size=size, dtype="uint8", layout="NCHW")
    fast = read_all(shards, transform="eval", image_size=size, dtype="uint8", layout="NCHW",
                    reduced_dct=True)
    means, worst_full = [], 0
    for sample, image in fast.items():
        reference = F.center_crop(
            F.resize(chw(pixels[sample]), int(size / 0.875), antialias=True), [size, size]
        ).numpy().astype(int)
        worst_full = max(worst_full, int(np.abs(full[sample].astype(int) - reference).max()))
        means.append(float(np.abs(image.astype(int) - reference).mean()))
        # Another decode, so other pixels: the option is taken.
        assert not np.array_equal(image, full[sample])
    assert worst_full <= MAX_LEVELS
    # Measured: 0.8 (640x480 at 1/2 scale) to 2.7 (2000x1500 at 1/8)
    # levels on average per image; a full decode is within 2 at worst.
    assert max(means) < 3.5, means


def test_an_upscale_resamples_in_torchvisions_order(pngs):
    """Fewer source rows than output rows: the horizontal pass runs first,
    as in torchvision's kernel, so the pixels are torchvision's (the other
    order rounds between the passes differently: within a level, about 0.2
    on average)."""
    pixels = decoded(pngs)
    ours = read_all(pngs, transform="resize", image_size=(300, 280), dtype="uint8",
                    layout="NHWC")
    means = []
    for sample, image in ours.items():
        assert pixels[sample].shape[0] < 300  # every image is upscaled
        reference = F.resize(chw(pixels[sample]), [300, 280], antialias=True)
        diff = np.abs(image.astype(int) - reference.numpy().transpose(1, 2, 0).astype(int))
        assert diff.max() <= MAX_LEVELS
        means.append(float(diff.mean()))
    # Measured: 0.0 for every image (0.18-0.22 in the vertical-first order).
    assert max(means) < 0.05, means


def test_resize_matches_torchvision_with_and_without_aspect(pngs):
    pixels = decoded(pngs)
    ours = read_all(pngs, transform="resize", image_size=(24, 40), dtype="uint8", layout="NHWC")
    for sample, image in ours.items():
        reference = F.resize(chw(pixels[sample]), [24, 40], antialias=True).numpy().transpose(1, 2, 0)
        assert image.shape == (24, 40, 3)
        assert np.abs(image.astype(int) - reference.astype(int)).max() <= MAX_LEVELS
    boxed = read_all(pngs, transform="resize", image_size=32, keep_aspect=True, fill=9,
                     dtype="uint8", layout="NHWC")
    for sample, image in boxed.items():
        h, w = pixels[sample].shape[:2]
        scale = min(32 / w, 32 / h)
        fw, fh = min(32, max(1, round(w * scale))), min(32, max(1, round(h * scale)))
        x, y = (32 - fw) // 2, (32 - fh) // 2
        reference = F.resize(chw(pixels[sample]), [fh, fw], antialias=True).numpy().transpose(1, 2, 0)
        inside = image[y:y + fh, x:x + fw]
        assert np.abs(inside.astype(int) - reference.astype(int)).max() <= MAX_LEVELS
        padding = np.ones((32, 32), bool)
        padding[y:y + fh, x:x + fw] = False
        assert (image[padding] == 9).all()


def test_train_with_a_whole_image_crop_matches_torchvision_up_to_the_flip(tmp_path):
    # All images 96x64: scale (1, 1) and ratio 1.5 make the crop the whole
    # image, so only the flip is random.
    image_folder(tmp_path / "images", [(96, 64)] * 12, "PNG", seed=9)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "images"), str(tmp_path / "s")],
                   check=True, capture_output=True)
    dataset = str(tmp_path / "s")
    pixels = decoded(dataset)
    ours = read_all(dataset, transform="train", image_size=32, scale=(1.0, 1.0),
                    ratio=(1.5, 1.5), dtype="uint8", layout="NCHW", seed=4)
    flips = 0
    for sample, image in ours.items():
        reference = F.resize(chw(pixels[sample]), [32, 32], antialias=True).numpy()
        plain = np.abs(image.astype(int) - reference.astype(int)).max()
        flipped = np.abs(image.astype(int) - reference[:, :, ::-1].astype(int)).max()
        assert min(plain, flipped) <= MAX_LEVELS
        flips += flipped < plain
    assert 0 < flips < len(ours), "the flip is a coin, not always or never"
    # float32 is the normalised uint8, within one level of rounding.
    floats = read_all(dataset, transform="train", image_size=32, scale=(1.0, 1.0),
                      ratio=(1.5, 1.5), seed=4)
    for sample, image in floats.items():
        expected = (ours[sample] / 255.0 - MEAN[:, None, None]) / STD[:, None, None]
        assert np.abs(image - expected).max() < 1e-5


def test_the_same_seed_gives_the_same_bytes_on_any_number_of_threads(dataset):
    for preset in ("train", "eval"):
        runs = []
        for threads in (1, 3):
            loader = tributary.Loader(dataset, seed=7, batch_size=8, image_size=24, transform=preset,
                                      dtype="uint8", layout="NHWC", decode_threads=threads)
            runs.append([images.tobytes() for images, _ in loader])
        assert runs[0] == runs[1], preset


def test_bad_transform_arguments_are_value_errors_naming_them(dataset):
    for kwargs, words in (
        (dict(transform="crop"), "train, eval, resize, none"),
        (dict(dtype="int16"), "dtype"),
        (dict(layout="CHW"), "layout"),
        (dict(image_size=(0, 10)), "image_size must be"),
        (dict(image_size="big"), "image_size"),
        (dict(crop_fraction=1.5), "crop_fraction"),
        (dict(scale=(0.5, 0.1)), "crop scale"),
        (dict(std=(0.1, 0.0, 0.1)), "std"),
        (dict(tail="round"), "tail"),
        (dict(tail="pad"), "shuffle=False"),
    ):
        with pytest.raises(ValueError, match=words):
            tributary.Loader(dataset, **kwargs)


def test_webp_and_a_png_stored_as_jpg_decode_by_their_bytes(tmp_path):
    import io

    from PIL import Image

    def encoded(fmt, value):
        out = io.BytesIO()
        Image.new("RGB", (20, 10), (value, 2 * value, 3 * value)).save(
            out, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
        return out.getvalue()

    samples = [
        ("s/0", {"jpg": encoded("PNG", 10), "cls": b"0"}),    # PNG bytes named .jpg
        ("s/1", {"webp": encoded("WEBP", 20), "cls": b"1"}),
        ("s/2", {"JPEG": encoded("PNG", 30), "cls": b"2"}),   # ImageNet's capital extension
    ]
    dataset = write_webdataset(tmp_path / "ds", [samples])
    images, labels = next(iter(tributary.Loader(dataset, shuffle=False, batch_size=3,
                                                transform="none", dtype="uint8", layout="NHWC")))
    assert labels.tolist() == [0, 1, 2]
    for image, value in zip(images, (10, 20, 30)):
        assert image.shape == (10, 20, 3)
        assert (image == [value, 2 * value, 3 * value]).all()


def test_eval_on_jpegs_matches_pils_decode_and_torchvision(tmp_path):
    # Large images to a small crop: a reduced-DCT decode would be 10 levels
    # off here; eval decodes at full scale, as torchvision's pipeline sees it.
    from PIL import Image

    image_folder(tmp_path / "images", [(333, 257), (500, 375), (257, 333)], "JPEG", seed=2)
    subprocess.run([tributary_bin(), "pack", str(tmp_path / "images"), str(tmp_path / "s")],
                   check=True, capture_output=True)
    files = sorted((tmp_path / "images").glob("*/*.jpg"))
    pixels = {i: np.asarray(Image.open(f).convert("RGB")) for i, f in enumerate(files)}
    for size in (32, 224):
        ours = read_all(str(tmp_path / "s"), transform="eval", image_size=size, dtype="uint8",
                        layout="NCHW")
        for sample, image in ours.items():
            reference = F.center_crop(F.resize(chw(pixels[sample]), int(size / 0.875), antialias=True),
                                      [size, size]).numpy()
            assert np.abs(image.astype(int) - reference.astype(int)).max() <= MAX_LEVELS, size
