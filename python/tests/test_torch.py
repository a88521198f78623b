"""`tributary.torch`: tensors sharing the Rust buffers, and the DataLoader adapter."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tributary  # noqa: E402
import tributary.torch as ttorch  # noqa: E402

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def test_tensors_share_memory_with_the_numpy_batch(dataset):
    images, labels = next(iter(tributary.Loader(dataset, seed=1, **SMALL)))
    timages, tlabels = ttorch.tensors((images, labels))
    assert timages.dtype == torch.float32 and tlabels.dtype == torch.int64
    assert timages.data_ptr() == images.ctypes.data  # no copy
    assert tlabels.data_ptr() == labels.ctypes.data


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")
def test_dataloader_with_pinned_memory_reads_every_sample_each_epoch(dataset):
    ds = ttorch.IterableDataset(dataset, seed=4, epochs=2, **SMALL)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=True)
    epochs = []
    for _ in range(2):
        labels = []
        for images, batch_labels in loader:
            assert images.shape == (8, 3, 32, 32) and images.dtype == torch.float32
            labels.append(batch_labels)
        epochs.append(torch.cat(labels))
    assert len(ds) == 5
    assert [len(e) for e in epochs] == [40, 40]
    assert sorted(epochs[0].tolist()) == sorted(epochs[1].tolist())
    # Same order as the numpy loader with the same seed.
    plain = np.concatenate([l for _, l in tributary.Loader(dataset, seed=4, **SMALL)])
    assert epochs[0].tolist() == plain.tolist()


def test_dataloader_worker_processes(dataset):
    # One forked worker runs the loader in the child.
    ds = ttorch.IterableDataset(dataset, seed=4, **SMALL)
    labels = [l for _, l in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)]
    assert sum(len(l) for l in labels) == 40
    # More would each read the whole part: refused, saying why.
    ds = ttorch.IterableDataset(dataset, seed=4, **SMALL)
    with pytest.raises(RuntimeError, match="every worker would read the rank's whole part"):
        list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2))
