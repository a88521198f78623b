"""`device=`: batches copied to the GPU ahead of the trainer through pinned buffers.

Without a GPU the copy logic runs on a stand-in backend (`LazyCopies`): its
"device" is the CPU, and a copy out of a pinned buffer happens only when
the copy's event completes (when the pool waits for it, or when the batch
is handed to the trainer), as a real asynchronous copy may. A buffer
refilled before its event completed would put the next batch's values into
the earlier batch, which the content checks see. The tests marked `gpu`
run the real thing and skip without CUDA.
"""

import gc
import subprocess
import sys
import threading
from typing import List, Tuple

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tributary  # noqa: E402
import tributary._device as device  # noqa: E402
import tributary.torch as ttorch  # noqa: E402

SMALL = dict(batch_size=8, image_size=32, decode_threads=2)
gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                         reason="needs a CUDA GPU: torch.cuda.is_available() is False")


class FakeEvent:
    """An event whose copies run when it completes."""

    def __init__(self, copies: List[Tuple[torch.Tensor, torch.Tensor]]) -> None:
        self._copies = copies
        self._lock = threading.Lock()
        self.done = False
        self.synchronized = 0

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.synchronized += 1
        self.complete()

    def complete(self) -> None:
        with self._lock:
            if not self.done:
                for target, source in self._copies:
                    target.copy_(source)
                self.done = True


class LazyCopies:
    """A backend on the CPU whose copies wait for their event (`lazy`), or
    run at once (`lazy=False`, for work on the copied values)."""

    def __init__(self, lazy: bool = True) -> None:
        self.device = torch.device("cpu")
        self.lazy = lazy
        self.pinned_made = 0
        self.events: List[FakeEvent] = []
        self.handed: List[FakeEvent] = []
        self._pending: List[Tuple[torch.Tensor, torch.Tensor]] = []

    def pinned(self, shape, dtype):
        self.pinned_made += 1
        return torch.empty(shape, dtype=dtype)

    def side(self):
        import contextlib
        return contextlib.nullcontext()

    def to_device(self, host):
        out = torch.empty_like(host)
        if self.lazy:
            self._pending.append((out, host))
        else:
            out.copy_(host)
        return out

    def record(self):
        event = FakeEvent(self._pending)
        self._pending = []
        if not self.lazy:
            event.done = True
        self.events.append(event)
        return event

    def hand(self, event, tensors):
        # The trainer's stream waits for the copies: they are done by the
        # time it reads the tensors.
        event.complete()
        self.handed.append(event)


@pytest.fixture
def backend(monkeypatch):
    fake = LazyCopies()
    monkeypatch.setattr(device, "cuda_backend", lambda _device: fake)
    return fake


def as_numpy(batch):
    return [column.numpy() if isinstance(column, torch.Tensor) else column for column in batch]


def same_batches(got, expected):
    assert len(got) == len(expected)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert type(a) is type(b), i
        for x, y in zip(as_numpy(a), as_numpy(b)):
            np.testing.assert_array_equal(x, y, err_msg=f"batch {i}")


def device_threads(staging):
    return [t for t in threading.enumerate() if t.name.startswith(staging.thread_name)]


# -- without a GPU ---------------------------------------------------------

def test_device_cuda_without_a_gpu_names_the_argument_and_what_is_missing(dataset):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(RuntimeError, match=r"device='cuda' needs a CUDA GPU; "
                                           r"torch.cuda.is_available\(\) is False"):
        ttorch.Loader(dataset, device="cuda", **SMALL)
    with pytest.raises(RuntimeError, match=r"device='cuda:1' needs a CUDA GPU"):
        ttorch.DataLoader(ttorch.IterableDataset(dataset, **SMALL), device="cuda:1")
    with pytest.raises(ValueError, match="device='cpu': batches go to a CUDA device"):
        ttorch.Loader(dataset, device="cpu", **SMALL)
    with pytest.raises(ValueError, match="device='gpu' is not a torch device"):
        ttorch.Loader(dataset, device="gpu", **SMALL)


def test_device_arguments_are_checked_before_the_loader_starts(dataset, backend):
    with pytest.raises(ValueError, match="prefetch must be a number of batches"):
        ttorch.Loader(dataset, device="cuda", prefetch=0, **SMALL)
    with pytest.raises(ValueError, match="normalize= normalises batches on the device: pass device="):
        ttorch.Loader(dataset, normalize=True, **SMALL)
    with pytest.raises(ValueError, match=r"normalize= takes uint8 batches \(dtype=\"uint8\"\)"):
        ttorch.Loader(dataset, device="cuda", normalize=True, **SMALL)
    with pytest.raises(ValueError, match="three floats each"):
        ttorch.Loader(dataset, device="cuda", normalize=((0.5,), (0.5,)), dtype="uint8", **SMALL)
    with pytest.raises(ValueError, match="go to tributary.torch.DataLoader"):
        ttorch.IterableDataset(dataset, device="cuda", **SMALL)
    with pytest.raises(ValueError, match="pin_memory=True and device='cuda' both pin"):
        ttorch.DataLoader(ttorch.IterableDataset(dataset, **SMALL), device="cuda", pin_memory=True)


def test_batches_arrive_in_order_with_the_same_contents_and_buffers_are_reused(dataset, backend):
    expected = list(ttorch.Loader(dataset, seed=5, return_ids=True, **SMALL))
    loader = ttorch.Loader(dataset, seed=5, return_ids=True, device="cuda", prefetch=2, **SMALL)
    got = list(loader)
    same_batches(got, expected)  # a buffer refilled early would show here
    assert got[0]._fields == expected[0]._fields and got[0].images.shape == (8, 3, 32, 32)
    pool = loader._staging.pool
    # Three columns (images, labels, ids) of one shape each over five
    # batches: at most prefetch + 2 buffers of each, the rest reused.
    assert pool.per_shape == 4
    assert backend.pinned_made == pool.allocations <= 3 * 4
    assert pool.allocations + pool.reuses == 3 * 5 and pool.reuses > 0
    assert backend.handed == backend.events  # each batch waited for, in order
    loader.close()


def test_a_pinned_buffer_is_reused_only_after_its_copy_completed():
    backend = LazyCopies()
    pool = device.PinnedPool(backend, per_shape=2)
    first, second = pool.acquire((4,), torch.int64), pool.acquire((4,), torch.int64)
    events = [FakeEvent([]), FakeEvent([])]
    pool.release(first, events[0])
    pool.release(second, events[1])
    # Both copies in flight and two buffers made: the oldest is waited for.
    again = pool.acquire((4,), torch.int64)
    assert again is first and events[0].done and events[0].synchronized == 1
    assert not events[1].done and pool.waits == 1 and pool.allocations == 2
    # A completed one is taken without waiting, whatever its age.
    pool.release(again, FakeEvent([]))
    events[1].complete()
    assert pool.acquire((4,), torch.int64) is second and pool.waits == 1
    # Another shape has buffers of its own.
    assert pool.acquire((2,), torch.int64).shape == (2,) and pool.allocations == 3


def test_a_pool_lets_the_oldest_shape_go_once_its_copies_completed():
    backend = LazyCopies()
    pool = device.PinnedPool(backend, per_shape=1, shapes=2)
    events = []
    for n in (1, 2, 3):
        events.append(FakeEvent([]))
        pool.release(pool.acquire((n,), torch.uint8), events[-1])
    assert events[0].synchronized == 1 and not events[1].done  # shape (1,) was let go
    made = pool.allocations
    pool.acquire((1,), torch.uint8)
    assert pool.allocations == made + 1


def test_state_after_k_batches_resumes_at_the_next_with_batches_in_flight(dataset, backend):
    reference = list(tributary.Loader(dataset, seed=9, epochs=1, return_ids=True, **SMALL))
    loader = ttorch.Loader(dataset, seed=9, epochs=1, return_ids=True, device="cuda", **SMALL)
    batches = iter(loader)
    trained = sum((next(batches).ids.tolist() for _ in range(2)), [])
    assert loader._staging.ahead == 2  # two more read and copying
    state = loader.state_dict()
    assert state["samples"] == 16 and loader._native.state_dict()["samples"] == 32
    loader.commit(state)
    rest = [b.ids.tolist() for b in batches]
    assert rest == [b[2].tolist() for b in reference[2:]]  # the ones in flight came next
    assert loader.state_dict()["samples"] == 40

    # A restart from the checkpoint reads every sample the trainer had not
    # taken, those in flight included, and none it had (a new generation
    # orders them anew).
    resumed = ttorch.Loader(dataset, seed=9, epochs=1, return_ids=True, device="cuda", **SMALL)
    resumed.load_state_dict(state)
    after = sum((b.ids.tolist() for b in resumed), [])
    assert sorted(trained + after) == list(range(40))
    assert sorted(after) == sorted(sum(rest, []))


def test_an_evaluation_read_with_device_reads_its_split_each_pass(dataset, backend):
    # shuffle=False keeps no progress: nothing to snapshot, state_dict refuses.
    expected = [b.ids.tolist() for b in ttorch.Loader(dataset, shuffle=False, return_ids=True,
                                                       **SMALL)]
    loader = ttorch.Loader(dataset, shuffle=False, return_ids=True, device="cuda", **SMALL)
    for _ in range(2):
        assert [b.ids.tolist() for b in loader] == expected
    next(iter(loader))
    with pytest.raises(ValueError, match="state_dict\\(\\) is for shuffled training reads"):
        loader.state_dict()


def test_a_pass_left_early_goes_on_with_the_batches_read_ahead(dataset, backend):
    expected = [b[2].tolist() for b in ttorch.Loader(dataset, seed=2, return_ids=True, **SMALL)]
    loader = ttorch.Loader(dataset, seed=2, return_ids=True, device="cuda", **SMALL)
    got = []
    for batch in loader:
        got.append(batch.ids.tolist())
        if len(got) == 2:
            break
    got += [b.ids.tolist() for b in loader]  # the same epoch, nothing lost
    assert got == expected
    assert len(loader) == 5
    loader.close()


def test_epochs_and_set_epoch_with_device(dataset, backend):
    loader = ttorch.Loader(dataset, seed=3, epochs=3, return_ids=True, device="cuda", **SMALL)
    first = [b.ids.tolist() for b in loader]
    second = [b.ids.tolist() for b in loader]
    assert len(first) == len(second) == 5 and first != second
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(40))
    # set_epoch restarts epoch 2 from its first batch, dropping what was
    # read ahead of it.
    batches = iter(loader)
    head = [next(batches).ids.tolist() for _ in range(2)]
    loader.set_epoch(2)
    assert loader._staging.ahead == 0
    assert [b.ids.tolist() for b in loader][:2] == head
    loader.close()


def test_a_read_error_surfaces_after_the_batches_before_it(dataset, backend):
    def fail_on_third(batch):
        fail_on_third.calls += 1
        if fail_on_third.calls == 3:
            raise KeyError("third batch")
        return batch
    fail_on_third.calls = 0
    loader = ttorch.Loader(dataset, seed=1, batch_map=fail_on_third, device="cuda", **SMALL)
    batches = iter(loader)
    next(batches), next(batches)  # read before the error: handed over first
    with pytest.raises(KeyError, match="third batch"):
        next(batches)


def test_a_copy_error_surfaces_in_next_as_it_was_raised(dataset, backend):
    error = RuntimeError("CUDA out of memory (stand-in)")
    calls = []

    def to_device(host):
        calls.append(host.shape)
        if len(calls) == 5:  # batch 2's images (two columns a batch)
            raise error
        return LazyCopies.to_device(backend, host)

    backend.to_device = to_device
    loader = ttorch.Loader(dataset, seed=1, device="cuda", **SMALL)
    batches = iter(loader)
    next(batches), next(batches)
    with pytest.raises(RuntimeError) as raised:
        next(batches)
    assert raised.value is error
    # Its pinned buffers went back to the pool all the same.
    pool = loader._staging.pool
    loader.close()  # the batches after it are done with theirs
    assert {key: len(free) for key, free in pool._free.items() if free} == pool._made


def test_the_copy_thread_ends_when_the_loader_is_collected_or_closed(dataset, backend):
    loader = ttorch.Loader(dataset, seed=1, device="cuda", **SMALL)
    for _ in zip(range(2), loader):
        pass  # left early, batches in flight
    staging = loader._staging
    threads = device_threads(staging)
    assert len(threads) == 1 and threads[0].is_alive()
    del loader, staging
    gc.collect()
    threads[0].join(timeout=30)
    assert not threads[0].is_alive()

    closed = ttorch.Loader(dataset, seed=1, device="cuda", **SMALL)
    next(iter(closed))
    threads = device_threads(closed._staging)
    closed.close()
    assert not threads[0].is_alive()  # close() waits for it


def test_the_interpreter_exits_with_batches_in_flight(dataset):
    script = f"""
import sys
sys.path.insert(0, {str(__import__('pathlib').Path(__file__).parent)!r})
import test_device, tributary._device, tributary.torch
tributary._device.cuda_backend = lambda _device: test_device.LazyCopies()
loader = tributary.torch.Loader({dataset!r}, seed=1, device="cuda", **test_device.SMALL)
next(iter(loader))
print("read", loader._staging.ahead, flush=True)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["read", "2"]


def test_normalize_on_the_device_matches_normalize_on_the_host(dataset, monkeypatch):
    monkeypatch.setattr(device, "cuda_backend", lambda _device: LazyCopies(lazy=False))
    options = dict(SMALL, seed=6, dtype="uint8", layout="NHWC")
    host = list(ttorch.Loader(dataset, **options))
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    on_device = list(ttorch.Loader(dataset, device="cuda", normalize=(mean, std), **options))
    assert len(host) == len(on_device) == 5
    for (images, labels), (normalised, device_labels) in zip(host, on_device):
        assert normalised.dtype == torch.float32 and normalised.shape == (8, 3, 32, 32)
        torch.testing.assert_close(normalised, ttorch.normalize(images, mean, std, layout="NHWC"))
        assert torch.equal(device_labels, labels)


def test_dataloader_with_device_counts_what_the_trainer_took(dataset, backend):
    expected = [b[2].tolist() for b in tributary.Loader(dataset, seed=4, return_ids=True, **SMALL)]
    for workers in (0, 2):
        ds = ttorch.IterableDataset(dataset, seed=4, epochs=1, return_ids=True, **SMALL)
        loader = ttorch.DataLoader(ds, num_workers=workers, device="cuda")
        batches = iter(loader)
        got = [next(batches)[2].tolist() for _ in range(3)]
        state = loader.state_dict()
        assert state["samples"] == 24, workers  # not the batches read ahead
        got += [b[2].tolist() for b in batches]
        assert got == expected, workers


def test_non_array_columns_pass_unchanged():
    backend = LazyCopies()
    staging = device.Prefetch(backend, 1)
    Batch = tributary.Batch.of(["image", "txt"], ["ids"])
    batch = Batch(torch.arange(6, dtype=torch.uint8).view(1, 1, 2, 3), ["a text"],
                  torch.tensor([7]))
    out = staging.next(iter([batch]).__next__)
    assert type(out) is Batch and out.txt == ["a text"] and out["txt"] is batch.txt
    assert torch.equal(out.images, batch.images) and out.images is not batch.images
    with pytest.raises(StopIteration):
        staging.next(iter([]).__next__)
    staging.close()


# -- on a GPU --------------------------------------------------------------

@gpu
def test_gpu_batches_are_device_tensors_ready_on_the_current_stream(dataset):
    expected = list(ttorch.Loader(dataset, seed=5, **SMALL))
    loader = ttorch.Loader(dataset, seed=5, device="cuda", **SMALL)
    got = []
    for batch in loader:
        images, labels = batch
        assert images.is_cuda and labels.is_cuda
        got.append(type(batch)(images.cpu(), labels.cpu()))  # on the current stream
    same_batches(got, expected)
    pool = loader._staging.pool
    assert pool.allocations <= 2 * pool.per_shape and pool.reuses > 0
    buffer = next(iter(pool._free.values()))[0][0]
    assert buffer.is_pinned()
    loader.close()


@gpu
def test_gpu_normalize_matches_a_host_normalize(dataset):
    options = dict(SMALL, seed=6, dtype="uint8", layout="NHWC")
    host = list(ttorch.Loader(dataset, **options))
    loader = ttorch.Loader(dataset, device="cuda:0", normalize=True, **options)
    for (images, _), (normalised, _) in zip(host, loader):
        assert normalised.is_cuda and normalised.dtype == torch.float32
        torch.testing.assert_close(normalised.cpu(), ttorch.normalize(images, layout="NHWC"))


@gpu
def test_gpu_state_counts_the_batches_handed_over(dataset):
    loader = ttorch.Loader(dataset, seed=9, epochs=1, device=torch.device("cuda"), **SMALL)
    batches = iter(loader)
    next(batches)
    assert loader.state_dict()["samples"] == 8 and loader._staging.ahead == 2
