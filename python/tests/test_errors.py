"""Errors from Python that name the culprit and say what to do (issue 26, part 3)."""

import inspect
import os

import pytest

import tributary
from tributary import _tributary
from tributary.options import NUMERIC_KEYWORDS

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)

# A value of the right type but out of range, one too large for any Rust
# integer, and one of the wrong type, for each numeric keyword.
_OUT_OF_RANGE = {name: (-1 if kind == "int" else -1.5) for name, (kind, _, _, _) in NUMERIC_KEYWORDS.items()}
_OUT_OF_RANGE.update(max_bad_fraction=1.5, crop_fraction=2.0, scale=(0.5, 2.0), std=(1.0, 0.0, 1.0),
                     worker=(-1, 2), timeout_s=0.0, ratio=(-1.0, 1.0), mean=(float("nan"), 0.0, 0.0))


def _bad_values(name):
    kind, count, _, _ = NUMERIC_KEYWORDS[name]
    huge = 2**70 if kind == "int" else float("inf")
    wrong = "x"
    if count > 1:
        return [(_OUT_OF_RANGE[name], ValueError), ((huge,) * count, ValueError), ((wrong,) * count, TypeError),
                (1, TypeError)]
    return [(_OUT_OF_RANGE[name], ValueError), (huge, ValueError), (wrong, TypeError), (True, TypeError)]


@pytest.mark.parametrize("name", sorted(NUMERIC_KEYWORDS))
def test_batch_size_minus_one_and_every_numeric_keyword_name_themselves_in_the_error(dataset, name):
    for value, error in _bad_values(name):
        with pytest.raises(error, match=rf"^{name} must be .*, not ") as raised:
            tributary.Loader(dataset, **{**SMALL, name: value})
        assert ("int" if NUMERIC_KEYWORDS[name][0] == "int" else "finite number") in str(raised.value)


def test_batch_size_minus_one_names_batch_size_and_its_range(dataset):
    with pytest.raises(ValueError, match=r"batch_size must be an int from 1 to 4294967295, not -1"):
        tributary.Loader(dataset, batch_size=-1)
    with pytest.raises(ValueError, match=r"image_size must be an int or \(height, width\)"):
        tributary.Loader(dataset, image_size=(-1, 32))


def test_every_numeric_keyword_of_the_native_loader_is_checked():
    """A keyword added to the native loader with a numeric default is in the
    table the errors come from (or the table would miss it silently)."""
    native = inspect.signature(_tributary.Loader).parameters
    numeric = {name for name, p in native.items()
               if not isinstance(p.default, (bool, str)) and
               (isinstance(p.default, (int, float)) or
                (isinstance(p.default, tuple) and all(isinstance(v, (int, float)) for v in p.default)))}
    assert numeric - set(NUMERIC_KEYWORDS) == set(), "numeric keywords without a range"
    assert set(NUMERIC_KEYWORDS) - set(native) == set(), "ranges for keywords the loader does not take"


def test_batch_size_minus_one_names_itself_in_the_torch_adapter_too(dataset):
    torch = pytest.importorskip("torch")  # noqa: F841
    import tributary.torch as ttorch

    # Checked when the dataset is made, not when a DataLoader first iterates.
    with pytest.raises(ValueError, match="batch_size must be an int from 1"):
        ttorch.IterableDataset(dataset, coordinator="127.0.0.1:1", batch_size=-1)
    with pytest.raises(ValueError, match="shuffle_buffer must be an int from 0"):
        ttorch.IterableDataset(dataset, shuffle=False, shuffle_buffer=-5)


def test_torch_dataloader_without_batch_size_none_raises_instead_of_adding_a_dimension(dataset):
    torch = pytest.importorskip("torch")
    import tributary.torch as ttorch

    ds = ttorch.IterableDataset(dataset, seed=1, shuffle=False, **SMALL)
    for workers in (0, 1):
        loader = torch.utils.data.DataLoader(ds, num_workers=workers)  # batch_size=1 by default
        with pytest.raises(TypeError, match=r"pass batch_size=None to torch's DataLoader"):
            next(iter(loader))
    # batch_size=None (or tributary.torch.DataLoader) yields Tributary's batches.
    images, labels = next(iter(torch.utils.data.DataLoader(ds, batch_size=None)))
    assert images.shape == (8, 3, 32, 32) and labels.shape == (8,)


def test_an_unreachable_coordinator_fails_fast_naming_its_address(dataset):
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(ConnectionError) as raised:
        tributary.Loader(dataset, coordinator=address, **SMALL)  # the default timeout_s=60
    took = time.monotonic() - started
    assert took < 20, f"gave up after {took:.0f}s"
    message = str(raised.value)
    assert f"cannot reach the coordinator at {address}: connection refused" in message, message
    assert f"is `tributary coordinator` running at {address}?" in message, message


def test_a_dataset_url_ending_in_manifest_json_reads_its_directory(dataset, tmp_path):
    loader = tributary.Loader(dataset + "/manifest.json", shuffle=False, return_ids=True, **SMALL)
    ids = sorted(int(i) for batch in loader for i in batch.ids)
    assert ids == list(range(40))
    # A file that is not a manifest: not found at once, saying what to pass.
    shard = next(p for p in os.listdir(dataset) if p.endswith(".tar"))
    with pytest.raises(FileNotFoundError, match="pass the dataset's directory"):
        tributary.Loader(f"{dataset}/{shard}", **SMALL)
