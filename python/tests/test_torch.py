"""`tributary.torch`: tensors sharing the Rust buffers, and the DataLoader adapter."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tributary  # noqa: E402
import tributary.torch as ttorch  # noqa: E402

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def without_plan(state):
    """A loader state without its plan digest (an int that names the plan)."""
    assert isinstance(state["plan"], int)
    return {k: v for k, v in state.items() if k != "plan"}


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


def test_one_worker_process_reads_the_whole_part(dataset):
    # The loader inherited through fork() is abandoned; the child reads anew.
    ds = ttorch.IterableDataset(dataset, seed=4, **SMALL)
    labels = [l for _, l in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)]
    assert sum(len(l) for l in labels) == 40


def test_two_forked_workers_yield_the_in_process_batches_epoch_after_epoch(dataset):
    reference = tributary.Loader(dataset, seed=4, epochs=2, return_ids=True, **SMALL)
    expected = [list(reference) for _ in range(2)]
    assert [len(e) for e in expected] == [5, 5]
    ds = ttorch.IterableDataset(dataset, seed=4, epochs=2, return_ids=True, **SMALL)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(2):
        got = list(loader)
        # Worker 0 decoded batches 0, 2, 4 and worker 1 batches 1, 3: taken
        # in turn they are the in-process epoch, pixel for pixel.
        assert [b[2].tolist() for b in got] == [e[2].tolist() for e in expected[epoch]], epoch
        for (images, labels, _), (ref_images, ref_labels, _) in zip(got, expected[epoch]):
            assert torch.equal(images, torch.from_numpy(ref_images))
            assert torch.equal(labels, torch.from_numpy(ref_labels))
    with pytest.raises(RuntimeError, match="epochs=2"):
        list(loader)  # the job's two epochs are done: the workers say so


def test_dataloader_state_with_workers_counts_what_the_trainer_took(dataset):
    ds = ttorch.IterableDataset(dataset, seed=4, epochs=2, **SMALL)
    loader = ttorch.DataLoader(ds, num_workers=2)
    batches = iter(loader)
    for _ in range(3):
        next(batches)
    state = loader.state_dict()
    assert without_plan(state) == {
        "epoch": 0, "generation": 0, "samples": 24, "history": [[0, 0, 1]]
    }
    loader.commit(state)
    # It resumes nothing once the trainer has taken batches: refused.
    with pytest.raises(ValueError, match="handed out batches"):
        loader.load_state_dict(state)
    # The dataset alone cannot know what the trainer consumed: it refuses.
    with pytest.raises(RuntimeError, match="only the DataLoader knows"):
        ds.state_dict()
    assert len(list(batches)) == 2
    assert without_plan(loader.state_dict()) == {
        "epoch": 0, "generation": 0, "samples": 40, "history": [[0, 0, 1]]
    }
    assert sum(len(labels) for _, labels in loader) == 40
    assert without_plan(loader.state_dict()) == {
        "epoch": 1, "generation": 1, "samples": 40, "history": [[1, 1, 1]]
    }
    with pytest.raises(ValueError, match="batch_size=None"):
        ttorch.DataLoader(ds, batch_size=8)
