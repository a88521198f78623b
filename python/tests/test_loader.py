"""The numpy API of `tributary.Loader`, single-node (in-process coordinator)."""

import gc
import multiprocessing
import os
import sys
import threading

import numpy as np
import pytest

import tributary

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)


def read_epoch(loader):
    images, labels = [], []
    for batch_images, batch_labels in loader:
        images.append(batch_images)
        labels.append(batch_labels)
    return images, labels


def test_batches_are_numpy_arrays_of_the_right_shape(dataset):
    loader = tributary.Loader(dataset, seed=1, **SMALL)
    assert len(loader) == 5  # 40 samples, one rank, batches of 8
    images, labels = read_epoch(loader)
    assert len(images) == 5
    for batch in images:
        assert batch.shape == (8, 3, 32, 32)
        assert batch.dtype == np.float32
        assert np.isfinite(batch).all()
    all_labels = np.concatenate(labels)
    assert all_labels.dtype == np.int64
    assert sorted(set(all_labels.tolist())) == [0, 1, 2, 3]
    assert (loader.epoch, loader.generation, loader.rank, loader.world_size) == (0, 0, 0, 1)


def test_arrays_own_the_rust_buffers_without_a_copy(dataset):
    images, labels = next(iter(tributary.Loader(dataset, seed=1, **SMALL)))
    for array, owner in ((images, "BatchImages"), (labels, "PySliceContainer")):
        # numpy did not allocate the data: a Rust-owned container holds it.
        assert not array.flags.owndata
        assert type(array.base).__name__ == owner
        assert array.flags.c_contiguous and array.flags.writeable
    images[0, 0, 0, 0] = 42.0  # the buffer is the array's alone
    assert images[0, 0, 0, 0] == 42.0


def data_address(array):
    return array.__array_interface__["data"][0]


def test_a_held_batch_is_never_decoded_over(dataset):
    # Buffers of dropped batches are reused; a batch still viewed must not be.
    loader = iter(tributary.Loader(dataset, seed=1, batch_size=2, image_size=32, decode_threads=2))
    held, _ = next(loader)
    kept = held.copy()
    view = held[1:]  # a view keeps the buffer alive as well
    del held
    batches = 0
    for images, _ in loader:
        assert data_address(images) != data_address(view.base)
        batches += 1
        del images
    assert batches == 19
    assert np.array_equal(view, kept[1:3]), "a held batch was overwritten"


def test_same_seed_same_batches_other_seed_other_batches(dataset):
    first = read_epoch(tributary.Loader(dataset, seed=5, **SMALL))
    # Other thread counts must not change a bit.
    second = read_epoch(tributary.Loader(dataset, seed=5, batch_size=8, image_size=32, decode_threads=1))
    other = read_epoch(tributary.Loader(dataset, seed=6, **SMALL))
    for a, b in zip(first[0], second[0]):
        assert np.array_equal(a, b)
    assert all(np.array_equal(a, b) for a, b in zip(first[1], second[1]))
    assert not all(np.array_equal(a, b) for a, b in zip(first[0], other[0]))


def test_epochs_iterate_in_turn_then_end(dataset):
    loader = tributary.Loader(dataset, seed=2, epochs=2, **SMALL)
    first = np.concatenate(read_epoch(loader)[1])
    assert loader.epoch == 0
    second = np.concatenate(read_epoch(loader)[1])
    assert loader.epoch == 1
    assert len(first) == len(second) == 40
    assert sorted(first.tolist()) == sorted(second.tolist())
    with pytest.raises(RuntimeError, match="epochs=2"):
        read_epoch(loader)  # the job is done: an error, not an empty epoch


def test_state_dict_round_trip(dataset):
    loader = tributary.Loader(dataset, seed=3, **SMALL)
    batches = iter(loader)
    next(batches)
    next(batches)
    state = loader.state_dict()
    # The epoch's plan records travel with the state: [generation, epoch, world],
    # and the digest of the plan it belongs to.
    assert isinstance(state["plan"], int)
    assert {k: v for k, v in state.items() if k != "plan"} == {
        "epoch": 0, "generation": 0, "samples": 16, "history": [[0, 0, 1]]
    }
    loader.commit(state)
    # Never accepted and ignored: this loader already read past it.
    with pytest.raises(ValueError, match="after this loader handed out batches"):
        loader.load_state_dict(state)
    fresh = lambda: tributary.Loader(dataset, seed=3, **SMALL)
    with pytest.raises(ValueError, match="no `generation`"):
        fresh().load_state_dict({"epoch": 0, "samples": 16})
    with pytest.raises(ValueError, match="`history`: must be a list"):
        fresh().load_state_dict({**state, "history": 3})
    with pytest.raises(ValueError, match="world of 0"):
        fresh().load_state_dict({**state, "history": [[0, 0, 0]]})
    # A state of another plan (here another seed) is refused, not resumed.
    with pytest.raises(ValueError, match="saved under another plan"):
        tributary.Loader(dataset, seed=4, **SMALL).load_state_dict(state)
    # A new loader, on its own fresh in-process coordinator, resumes from
    # the state alone: the 24 samples the first one had not read.
    resumed = fresh()
    resumed.load_state_dict(state)
    assert resumed.generation == 1 and len(resumed) == 3


def test_bad_arguments_raise_the_right_exception_with_a_useful_message(dataset, tmp_path):
    missing = str(tmp_path / "no-such-dataset")
    with pytest.raises(FileNotFoundError, match="no-such-dataset"):
        tributary.Loader(missing)
    with pytest.raises(ValueError, match="batch_size must be an int from 1 to"):
        tributary.Loader(dataset, batch_size=0)
    with pytest.raises(ValueError, match="rank 2 is outside a world of 2 ranks"):
        tributary.Loader(dataset, rank=2, world_size=2)
    with pytest.raises(ValueError, match="needs a shared coordinator"):
        tributary.Loader(dataset, rank=0, world_size=2)
    with pytest.raises(ValueError, match='mode must be "sync" or "dynamic"'):
        tributary.Loader(dataset, mode="async")
    with pytest.raises(ValueError, match=r"worker=\(2, 2\): the worker id must be below"):
        tributary.Loader(dataset, worker=(2, 2))
    with pytest.raises(ValueError, match="worker processes of a dynamic job need a shared"):
        tributary.Loader(dataset, mode="dynamic", worker=(0, 2))
    with pytest.raises(ConnectionError):
        tributary.Loader(dataset, coordinator="127.0.0.1:1", timeout_s=0.5, **SMALL)


def test_tls_settings_come_from_the_environment_and_are_checked(dataset, tmp_path, monkeypatch):
    missing = str(tmp_path / "ca.pem")
    monkeypatch.setenv("TRIBUTARY_TLS_CA", missing)
    with pytest.raises(ValueError, match=f"TRIBUTARY_TLS_CA={missing}: cannot read it"):
        tributary.Loader(dataset, coordinator="https://localhost:1", timeout_s=0.5, **SMALL)
    with pytest.raises(ValueError, match="mix http:// and https://"):
        tributary.Loader(dataset, coordinator="https://a:1,http://b:2", timeout_s=0.5, **SMALL)


def test_auth_token_comes_from_the_argument_or_the_environment_and_is_checked(
    dataset, tmp_path, monkeypatch
):
    missing = str(tmp_path / "token")
    monkeypatch.setenv("TRIBUTARY_AUTH_TOKEN_FILE", missing)
    with pytest.raises(ValueError, match=f"TRIBUTARY_AUTH_TOKEN_FILE={missing}: cannot read it"):
        tributary.Loader(dataset, coordinator="127.0.0.1:1", timeout_s=0.5, **SMALL)
    empty = tmp_path / "empty"
    empty.write_text("\n")
    monkeypatch.setenv("TRIBUTARY_AUTH_TOKEN_FILE", str(empty))
    with pytest.raises(ValueError, match="the auth token is empty"):
        tributary.Loader(dataset, coordinator="127.0.0.1:1", timeout_s=0.5, **SMALL)
    monkeypatch.delenv("TRIBUTARY_AUTH_TOKEN_FILE")
    with pytest.raises(ValueError, match="auth_token: the auth token must be visible ASCII"):
        tributary.Loader(
            dataset, coordinator="127.0.0.1:1", auth_token="a b", timeout_s=0.5, **SMALL
        )
    # A good token, and nothing listening: the call is made, and fails.
    with pytest.raises(ConnectionError):
        tributary.Loader(
            dataset, coordinator="127.0.0.1:1", auth_token="t0k3n", timeout_s=0.5, **SMALL
        )
    with pytest.raises(ValueError, match='on_lease_lost must be "rejoin" or "raise"'):
        tributary.Loader(dataset, mode="dynamic", on_lease_lost="retry", **SMALL)
    with pytest.raises(ValueError, match='lookahead= is for mode="dynamic"'):
        tributary.Loader(dataset, lookahead=64, **SMALL)


def test_torchrun_environment_sets_the_identity(dataset, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job42")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "3")
    loader = tributary.Loader(dataset, **SMALL)
    assert loader.member == "job42.3.0"
    monkeypatch.setenv("WORLD_SIZE", "x")
    with pytest.raises(ValueError, match='WORLD_SIZE="x" is not a number'):
        tributary.Loader(dataset, **SMALL)


def _child(loader, queue):
    images, labels = next(iter(loader))
    queue.put((os.getpid(), images.shape, len(labels)))


def test_the_native_runtime_is_recreated_after_fork(dataset):
    loader = tributary.Loader(dataset, seed=1, **SMALL)
    next(iter(loader))  # the parent's runtime is running
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(loader, queue))
    child.start()
    pid, shape, labels = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert pid != os.getpid() and shape == (8, 3, 32, 32) and labels == 8
    # The parent's loader carries on.
    assert next(loader)[0].shape == (8, 3, 32, 32)


def test_sample_ids_cover_the_epoch_once(dataset):
    loader = tributary.Loader(dataset, seed=1, return_ids=True, **SMALL)
    ids = np.concatenate([batch_ids for _, _, batch_ids in loader])
    assert ids.dtype == np.uint64
    assert sorted(ids.tolist()) == sorted(set(ids.tolist())) and len(ids) == 40


def test_a_rank_cannot_open_an_epoch_it_has_not_read_its_way_to(dataset):
    # A fresh job's rank asking for epoch 1, and one that moves to the next
    # epoch half way through this one, are refused at once: the next epoch
    # opens once every rank read its part, and skipping would lose samples.
    with pytest.raises(ValueError, match="asked for epoch 1 but has read none"):
        tributary.Loader(dataset, seed=2, epochs=3, epoch=1, **SMALL)
    loader = tributary.Loader(dataset, seed=2, epochs=3, **SMALL)
    batches = iter(loader)
    next(batches)
    with pytest.raises(ValueError, match="Read this epoch to its end first"):
        loader.set_epoch(1)
    # Read to its end, the epoch opens the next.
    rest = sum(1 for _ in batches)
    assert rest == len(loader) - 1
    loader.set_epoch(1)
    assert loader.epoch == 1


def test_a_batch_is_held_to_max_batch_mib(dataset):
    with pytest.raises(ValueError, match="max_batch_mib must be an int from 1 to 16384"):
        tributary.Loader(dataset, max_batch_mib=0)
    # 64 images of 1024 x 1024 as float32 take 768 MiB a batch.
    with pytest.raises(ValueError, match="max_batch_mib= in Python"):
        tributary.Loader(dataset, batch_size=64, image_size=1024, max_batch_mib=512)


def test_a_loader_collected_on_another_thread_is_dropped_there(dataset):
    """The cycle collector runs on whichever thread allocates: a loader in
    a reference cycle may be collected on a background thread (the device
    copy thread, a user's). It is dropped there, not leaked with an error."""
    raised = []
    hook, sys.unraisablehook = sys.unraisablehook, raised.append
    gc.disable()
    try:
        loader = tributary.Loader(dataset, seed=1, **SMALL)
        next(iter(loader))
        loader.cycle = loader  # reachable only through itself once deleted
        del loader
        collector = threading.Thread(target=gc.collect)
        collector.start()
        collector.join()
    finally:
        gc.enable()
        sys.unraisablehook = hook
    assert not raised, [str(r.exc_value) for r in raised]
