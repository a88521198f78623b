"""`cache_dir=` / `cache_limit=`: shards kept on local disk, shared by
loaders (processes) on one directory, and the arguments' checks."""

import os
import time

import numpy as np
import pytest

import tributary

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def labels(loader):
    return np.concatenate([batch_labels for _, batch_labels in loader]).tolist()


def entries(cache):
    path = os.path.join(cache, "entries")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def shard_count(dataset):
    import json

    with open(os.path.join(dataset, "manifest.json")) as f:
        return len(json.load(f)["shards"])


def indexes(dataset):
    """The dataset's shard index objects (a version 2 manifest's)."""
    return [os.path.join(dataset, n) for n in os.listdir(dataset) if n.endswith(".idx")]


def wait_for(what, condition, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_cache_fills_in_the_background_and_a_new_loader_reuses_it(dataset, tmp_path):
    cache = str(tmp_path / "cache")
    plain = labels(tributary.Loader(dataset, seed=4, epochs=2, **SMALL))
    first = tributary.Loader(dataset, seed=4, cache_dir=cache, cache_limit=1 << 30, **SMALL)
    labels(first)
    # Every shard and its index, filled in the background after the reads
    # that missed.
    files = shard_count(dataset) + len(indexes(dataset))
    assert len(indexes(dataset)) == shard_count(dataset)
    wait_for("every shard cached", lambda: len(entries(cache)) == files)
    assert not os.listdir(os.path.join(cache, "tmp"))
    del first
    # A new loader (as after a restart) checks the files and reads them.
    second = tributary.Loader(dataset, seed=4, epochs=2, cache_dir=cache,
                              cache_limit=1 << 30, **SMALL)
    assert labels(second) == plain
    assert len(entries(cache)) == files
    stats = second.metrics()["cache"]
    assert stats["hits"] > 0 and stats["misses"] == 0 and stats["corrupt"] == 0, stats
    # The shard bytes the loader read, and the indexes it loaded first.
    index_bytes = sum(os.path.getsize(path) for path in indexes(dataset))
    assert stats["hit_bytes"] == second.metrics()["bytes"] + index_bytes


def test_the_environment_gives_the_cache_and_the_arguments_win(dataset, tmp_path, monkeypatch):
    from_env = str(tmp_path / "from-env")
    monkeypatch.setenv("TRIBUTARY_CACHE_DIR", from_env)
    monkeypatch.setenv("TRIBUTARY_CACHE_LIMIT", "1GiB")
    labels(tributary.Loader(dataset, seed=1, **SMALL))
    assert os.path.isdir(os.path.join(from_env, "entries"))
    given = str(tmp_path / "given")
    labels(tributary.Loader(dataset, seed=1, cache_dir=given, **SMALL))
    assert os.path.isdir(os.path.join(given, "entries"))
    monkeypatch.setenv("TRIBUTARY_CACHE_LIMIT", "lots")
    with pytest.raises(ValueError, match="TRIBUTARY_CACHE_LIMIT: \"lots\" is not a byte count"):
        tributary.Loader(dataset, **SMALL)


def test_bad_cache_arguments_are_refused_by_name(dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("TRIBUTARY_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRIBUTARY_CACHE_LIMIT", raising=False)
    with pytest.raises(ValueError, match="cache_limit must be at least 1 byte"):
        tributary.Loader(dataset, cache_dir=str(tmp_path), cache_limit=0, **SMALL)
    with pytest.raises(ValueError, match="needs cache_limit="):
        tributary.Loader(dataset, cache_dir=str(tmp_path), **SMALL)
    with pytest.raises(ValueError, match="cache_limit= needs cache_dir="):
        tributary.Loader(dataset, cache_limit=100, **SMALL)
    with pytest.raises(ValueError, match="cache_limit must be an int from 0"):
        tributary.Loader(dataset, cache_dir=str(tmp_path), cache_limit=-1, **SMALL)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(OSError, match="a-file/cache"):
        tributary.Loader(dataset, cache_dir=str(a_file / "cache"), cache_limit=100, **SMALL)
