"""Mixing datasets from Python: `dataset=[tributary.Source(...), ...]`.

Two datasets told apart by their labels (one has classes 0-3, the other
only class 0 of one class): every epoch takes exactly the counts the mix
asks, each sample's source says where it came from, and bad mixes raise
`ValueError` naming the source."""

import numpy as np
import pytest

import tributary
from conftest import synth_dataset


@pytest.fixture(scope="module")
def second(tmp_path_factory) -> str:
    """24 images in one class, packed into shards of 8."""
    return synth_dataset(tmp_path_factory.mktemp("second"), 24, 1, 5, 8)




def test_weighted_sources_take_exact_counts_and_say_where_each_sample_came_from(dataset, second):
    loader = tributary.Loader(
        [tributary.Source(dataset, weight=3), tributary.Source(second, weight=1)],
        epoch_samples=32, batch_size=8, image_size=16, epochs=2, seed=4,
        return_ids=True, return_sources=True, decode_threads=1)
    seen = []
    for _ in range(2):
        ids, sources = [], []
        for images, labels, batch_ids, batch_sources in loader:
            assert batch_sources.dtype == np.uint32
            assert len(batch_sources) == len(labels) == len(batch_ids)
            ids.extend(batch_ids.tolist())
            sources.extend(batch_sources.tolist())
        assert sorted(set(sources)) == [0, 1]
        assert sources.count(0) == 24 and sources.count(1) == 8
        assert len(set(ids)) == len(ids) == 32
        seen.append(sorted(ids))
    assert seen[0] != seen[1], "a different subset of the first dataset each epoch"
    assert "Source" in tributary.__all__


def test_repeat_and_samples_mix_and_labels_match_the_sources(dataset, second):
    loader = tributary.Loader(
        [tributary.Source(dataset, samples=10), tributary.Source(second, repeat=1.5)],
        batch_size=4, image_size=16, seed=1, return_sources=True, decode_threads=1)
    labels_by_source = {0: [], 1: []}
    for _, labels, sources in loader:
        for label, source in zip(labels.tolist(), sources.tolist()):
            labels_by_source[source].append(label)
    assert len(labels_by_source[0]) == 10
    assert len(labels_by_source[1]) == 36  # 24 and half of them again
    assert set(labels_by_source[1]) == {0}  # the one-class dataset


def test_bad_mixes_raise_value_errors_naming_the_source(dataset, second):
    cases = [
        ([tributary.Source(dataset, weight=1), tributary.Source(second, samples=3)],
         "weight every dataset, or none"),
        ([tributary.Source(dataset, weight=-1)], "weight -1"),
        ([tributary.Source(dataset, repeat=float("nan"))], "repeat NaN"),
        ([tributary.Source(dataset, weight=1, samples=2)], "not weight and samples"),
        ([], "list of sources to mix is empty"),
    ]
    for sources, says in cases:
        with pytest.raises(ValueError, match=says):
            tributary.Loader(sources, batch_size=4, image_size=16)
    with pytest.raises(TypeError, match="samples must be an int"):
        tributary.Loader([tributary.Source(dataset, samples=2.5)])
    with pytest.raises(TypeError, match="tributary.Source"):
        tributary.Loader([42])


@pytest.mark.parametrize("workers", [0, 2])
def test_a_mix_reads_through_the_torch_dataset_and_dataloader(dataset, second, workers):
    torch = pytest.importorskip("torch")
    import tributary.torch as tt

    mix = [tributary.Source(dataset, samples=10), tributary.Source(second, repeat=1.5)]
    options = dict(batch_size=4, image_size=16, seed=1, return_ids=True, return_sources=True,
                   decode_threads=1)
    reference = [(b.ids.tolist(), b.sources.tolist()) for b in tributary.Loader(mix, **options)]
    ds = tt.IterableDataset(mix, **options)
    got = list(tt.DataLoader(ds, num_workers=workers))
    assert [(b.ids.tolist(), b.sources.tolist()) for b in got] == reference
    sources = torch.cat([b.sources for b in got]).tolist()
    assert sources.count(0) == 10 and sources.count(1) == 36
    assert all(b["image"].shape[1:] == (3, 16, 16) for b in got)
