"""Batches name their columns (`tributary.Batch`), and the image options
group into `tributary.Transform`, from numpy to torch."""

import pickle

import numpy as np
import pytest

import tributary

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def test_a_batch_is_the_tuple_it_was_and_names_its_columns(dataset):
    loader = tributary.Loader(dataset, shuffle=False, return_ids=True, tail="pad", **SMALL)
    batch = next(iter(loader))
    assert isinstance(batch, tuple) and isinstance(batch, tributary.Batch)
    images, labels, ids, valid = batch
    assert batch._fields == ("image", "cls", "ids", "valid")
    assert batch["image"] is images is batch.images is batch.image is batch[0]
    assert batch.labels is labels is batch["cls?"] is batch.cls
    assert batch.ids is ids and batch["valid"] is valid and valid.dtype == np.bool_
    assert list(batch._asdict()) == list(batch._fields)
    assert "image=float32[8, 3, 32, 32]" in repr(batch)
    with pytest.raises(KeyError, match="no column 'sources'; it has image, cls, ids, valid"):
        batch["sources"]
    with pytest.raises(AttributeError, match="no column 'txt'"):
        batch.txt
    again = pickle.loads(pickle.dumps(batch))
    assert type(again) is type(batch) and again._fields == batch._fields
    assert np.array_equal(again.images, images)


def test_batches_name_the_fields_as_written():
    cls = tributary.Batch.of(["jpg;png", "seg.png", "txt?", "cls"], ["sources"])
    batch = cls("i", "s", "t", "l", "src")
    assert batch._fields == ("jpg;png", "seg.png", "txt", "cls", "sources")
    assert (batch.images, batch["seg.png"], batch.txt, batch.labels, batch.sources) == \
        ("i", "s", "t", "l", "src")
    assert tributary.Batch.of(["jpg;png", "seg.png", "txt?", "cls"], ["sources"]) is cls
    with pytest.raises(TypeError, match="takes 5 columns, not 2"):
        cls("i", "s")


def test_a_transform_groups_the_image_options(dataset):
    flat = tributary.Loader(dataset, shuffle=False, batch_size=8, decode_threads=2,
                            transform="eval", image_size=(24, 16), dtype="uint8", layout="NHWC")
    grouped = tributary.Loader(
        dataset, shuffle=False, batch_size=8, decode_threads=2,
        transform=tributary.Transform("eval", size=(24, 16), dtype="uint8", layout="NHWC"))
    for a, b in zip(flat, grouped):
        assert a.images.shape == (8, 24, 16, 3) and a.images.dtype == np.uint8
        assert np.array_equal(a.images, b.images)
    with pytest.raises(ValueError, match=r"image_size=32 and transform=Transform\(size=64\)"):
        tributary.Loader(dataset, image_size=32, transform=tributary.Transform(size=64))
    with pytest.raises(ValueError, match=r"dtype='uint8' and transform=Transform\(dtype='float32'\)"):
        tributary.Loader(dataset, dtype="uint8", transform=tributary.Transform(dtype="float32"))


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_batches_keep_the_names_with_tensors(dataset, workers):
    torch = pytest.importorskip("torch")
    import tributary.torch as tt

    ds = tt.IterableDataset(dataset, seed=1, return_ids=True,
                            transform=tributary.Transform(size=16), batch_size=8, decode_threads=1)
    batches = list(tt.DataLoader(ds, num_workers=workers))
    assert len(batches) == 5
    for batch in batches:
        assert isinstance(batch, tributary.Batch) and batch._fields == ("image", "cls", "ids")
        assert isinstance(batch.images, torch.Tensor) and batch["image"].shape == (8, 3, 16, 16)
        images, labels, ids = batch
        assert labels is batch.labels and ids.dtype == torch.uint64
