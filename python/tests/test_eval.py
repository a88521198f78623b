"""Evaluation reading: shuffle=False reads every sample exactly once across
1, 2 and 3 ranks, in manifest order, with an uneven or a padded tail; and an
eval loader beside a train loader in one process."""

import numpy as np
import pytest

import tributary

SMALL = dict(batch_size=8, image_size=16, decode_threads=1, return_ids=True)


def read_rank(dataset, rank, world, tail):
    loader = tributary.Loader(dataset, shuffle=False, transform="eval", rank=rank,
                              world_size=world, tail=tail, **SMALL)
    ids, valid, batches = [], [], 0
    for batch in loader:
        batches += 1
        ids.extend(batch[2].tolist())
        valid.extend(batch[3].tolist() if tail == "pad" else [True] * len(batch[2]))
    return ids, valid, batches, len(loader)


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("tail", ["uneven", "pad"])
def test_every_sample_once_across_the_ranks(dataset, world, tail):
    # 40 samples in shards of 16: 3 ranks split 14, 13, 13.
    parts = [read_rank(dataset, rank, world, tail) for rank in range(world)]
    real = [i for ids, valid, _, _ in parts for i, ok in zip(ids, valid) if ok]
    assert sorted(real) == list(range(40)), "every sample exactly once"
    for ids, valid, batches, length in parts:
        assert batches == length, "len() is the batches a pass yields"
        real_ids = [i for i, ok in zip(ids, valid) if ok]
        assert real_ids == sorted(real_ids), "manifest order"
        assert all(valid[: len(real_ids)]) and not any(valid[len(real_ids):]), "padding comes last"
    counts = [len(ids) for ids, _, _, _ in parts]
    if tail == "pad":
        assert counts == [-(-40 // world)] * world, "equal counts, padded"
        assert len({batches for _, _, batches, _ in parts}) == 1
    else:
        assert sum(counts) == 40 and max(counts) - min(counts) <= 1


def test_each_pass_reads_the_same_split_again(dataset):
    loader = tributary.Loader(dataset, shuffle=False, transform="eval", rank=1, world_size=2, **SMALL)
    first = [batch[2].tolist() for batch in loader]
    second = [batch[2].tolist() for batch in loader]
    assert first == second and sum(map(len, first)) == 20
    assert loader.epoch == 1
    with pytest.raises(ValueError, match="shuffle=False loader"):
        loader.state_dict()


def test_more_ranks_than_samples_pad_with_masked_samples(tmp_path):
    from conftest import write_webdataset

    dataset = write_webdataset(tmp_path / "tiny", [[(f"k/{i}", {"cls": str(i).encode()}) for i in range(2)]])
    seen = []
    for rank in range(3):
        loader = tributary.Loader(dataset, fields=["cls"], shuffle=False, rank=rank, world_size=3,
                                  tail="pad", batch_size=4)
        batches = list(loader)
        assert len(batches) == 1 and len(batches[0][0]) == 1
        labels, valid = batches[0]
        seen += labels[valid].tolist()
    assert sorted(seen) == [0, 1]


def test_an_eval_loader_runs_beside_a_train_loader(dataset):
    train = tributary.Loader(dataset, seed=3, epochs=2, batch_size=8, image_size=16, decode_threads=1)
    val = tributary.Loader(dataset, shuffle=False, transform="eval", batch_size=16, image_size=16,
                           decode_threads=1)
    for epoch in range(2):
        trained = sum(len(labels) for _, labels in train)
        evaluated = sum(len(labels) for _, labels in val)
        assert (trained, evaluated) == (40, 40), epoch
    with pytest.raises(RuntimeError, match="epochs=2"):
        list(train)  # the job's 2 epochs are done; the eval loader goes on
    assert sum(len(labels) for _, labels in val) == 40


def test_shuffle_false_refuses_dynamic_mode(dataset):
    with pytest.raises(ValueError, match="fixed split by rank"):
        tributary.Loader(dataset, shuffle=False, mode="dynamic")
