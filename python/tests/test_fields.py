"""Any sample fields: every decoder round trips, a dataset without images,
and `map=` / `batch_map=` in the consuming process and in DataLoader worker
processes."""

import io
import json

import numpy as np
import pytest

import tributary
from conftest import write_webdataset


def npy(array):
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def sample(i):
    return (
        f"rec/{i:04d}",
        {
            "cls": str(i % 3).encode(),
            "txt": f"caption {i}: café, \"quoted\"\n".encode(),
            "json": json.dumps({"i": i, "tags": ["a", None, 1.5], "ok": i % 2 == 0}).encode(),
            "tokens.npy": npy(np.arange(i, i + 6, dtype=np.int32).reshape(2, 3)),
            "ragged.npy": npy(np.full(1 + i % 3, i, dtype=np.float16)),
            "wav": bytes([i % 256]) * (10 + i),
        },
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """A dataset of 23 samples with no image at all, in 3 shards."""
    samples = [sample(i) for i in range(23)]
    return write_webdataset(tmp_path_factory.mktemp("records"), [samples[:8], samples[8:16], samples[16:]])


FIELDS = ["cls", "txt", "json", "tokens.npy", "ragged.npy", "wav"]


def test_every_field_type_round_trips_in_a_dataset_without_images(records):
    loader = tributary.Loader(records, fields=FIELDS, shuffle=False, batch_size=5)
    seen = 0
    for labels, texts, records_, tokens, ragged, wavs in loader:
        n = len(labels)
        assert labels.dtype == np.int64 and tokens.dtype == np.int32
        assert tokens.shape == (n, 2, 3), "same dtype and shape: one stacked array"
        assert isinstance(ragged, list) and len(ragged) == n, "shapes differ: a list"
        for j in range(n):
            i = seen + j
            assert labels[j] == i % 3
            assert texts[j] == f"caption {i}: café, \"quoted\"\n"
            assert records_[j] == {"i": i, "tags": ["a", None, 1.5], "ok": i % 2 == 0}
            assert (tokens[j] == np.arange(i, i + 6).reshape(2, 3)).all()
            assert ragged[j].dtype == np.float16 and ragged[j].tolist() == [i] * (1 + i % 3)
            assert isinstance(wavs[j], memoryview) and wavs[j].readonly
            assert bytes(wavs[j]) == bytes([i % 256]) * (10 + i)
        seen += n
    assert seen == 23


def test_a_missing_field_is_a_bad_sample_unless_optional(records):
    loader = tributary.Loader(records, fields=["txt", "caption.txt?", "cls"], shuffle=False, batch_size=23)
    texts, captions, labels = next(iter(loader))
    assert captions == [None] * 23 and len(texts) == 23
    with pytest.raises(RuntimeError, match=r"has no `caption.txt` field.*its fields are: cls"):
        next(iter(tributary.Loader(records, fields=["caption.txt"], shuffle=False)))
    with pytest.raises(RuntimeError, match=r"has no `image` field"):
        next(iter(tributary.Loader(records)))  # the default fields want an image
    with pytest.raises(ValueError, match="mixes decoders"):
        tributary.Loader(records, fields=["jpg;txt"])


def test_a_field_that_does_not_parse_names_its_shard_and_sample(tmp_path):
    bad = [("k/0", {"json": b"{\"a\": 1}"}), ("k/1", {"json": b"{not json"})]
    dataset = write_webdataset(tmp_path / "bad", [bad])
    with pytest.raises(RuntimeError, match=r"part-0000.tar.*`k/1`.*`json` field is not JSON"):
        list(tributary.Loader(dataset, fields=["json"], shuffle=False, batch_size=2))
    skipped = list(tributary.Loader(dataset, fields=["json"], shuffle=False, batch_size=2,
                                    on_error="skip", max_bad_fraction=0.5))
    assert [batch[0] for batch in skipped] == [[{"a": 1}]]


def test_map_and_batch_map_run_on_samples_and_batches(records):
    seen = []

    def per_sample(item):
        label, text = item
        seen.append(label)
        return {"label": int(label) * 10, "words": len(text.split())}

    loader = tributary.Loader(records, fields=["cls", "txt"], shuffle=False, batch_size=10,
                              map=per_sample, batch_map=lambda b: (b["label"], b["words"]))
    batches = list(loader)
    assert len(seen) == 23
    labels, words = batches[0]
    assert labels.tolist() == [i % 3 * 10 for i in range(10)]
    assert words.tolist() == [4] * 10
    with pytest.raises(TypeError, match="map must be callable"):
        tributary.Loader(records, map=3)


def upper_texts(batch):
    labels, texts = batch
    return labels, [t.upper() for t in texts]


def with_length(item):
    label, text = item
    return label, len(text)


@pytest.mark.parametrize("workers", [0, 2])
def test_map_and_batch_map_under_torch_with_and_without_worker_processes(records, workers):
    import torch

    import tributary.torch as tt

    ds = tt.IterableDataset(records, fields=["cls", "txt"], shuffle=False, batch_size=4,
                            batch_map=upper_texts)
    out = list(tt.DataLoader(ds, num_workers=workers))
    labels = torch.cat([b[0] for b in out])
    texts = [t for b in out for t in b[1]]
    assert labels.tolist() == [i % 3 for i in range(23)]
    assert texts == [f"CAPTION {i}: CAFÉ, \"QUOTED\"\n" for i in range(23)]
    ds = tt.IterableDataset(records, fields=["cls", "txt"], shuffle=False, batch_size=4, map=with_length)
    out = list(tt.DataLoader(ds, num_workers=workers))
    assert isinstance(out[0][1], torch.Tensor), "map results collated by torch"
    assert torch.cat([b[1] for b in out]).tolist() == [len(f"caption {i}: café, \"quoted\"\n") for i in range(23)]
