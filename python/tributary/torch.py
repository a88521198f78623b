"""PyTorch adapters: batches as torch tensors that share Tributary's buffers.

    ds = tributary.torch.IterableDataset("s3://bucket/ds", coordinator="coord:7070", job="resnet")
    loader = tributary.torch.DataLoader(ds, pin_memory=True)   # or torch's own DataLoader
    for epoch in range(epochs):
        for step, (images, labels) in enumerate(loader):   # float32 N x 3 x S x S, int64 N
            ...
            if step % 100 == 0:
                state = loader.state_dict()   # save it with the checkpoint, then
                loader.commit(state)          # once the checkpoint is durable

`torch.from_numpy` wraps the numpy arrays, which own the Rust buffers: no
copy on the way to the trainer (pinning, when asked for, is the one copy).

Tributary batches, shuffles and decodes on its own threads, so
``num_workers=0`` is the fast default. With ``num_workers=N`` worker
processes each read the rank's part and decode every N-th batch, and the
DataLoader, taking one batch from each worker in turn, yields the very order
of ``num_workers=0``. Each pass over the DataLoader reads the epoch after the
last one read to its end. Only the main process knows what the trainer
consumed, so with worker processes take ``state_dict()`` from
:class:`DataLoader` rather than from the dataset.
"""

import multiprocessing
import multiprocessing.context
import os
import secrets
from typing import Any, Dict, Iterator, Optional, Tuple

import torch
import torch.utils.data

from ._tributary import Loader

__all__ = ["DataLoader", "IterableDataset", "tensors"]

# Slots of the array shared with worker processes.
_NEXT_EPOCH = 0  # the epoch the next pass reads; -1: the generation's first
_DONE_EPOCH = 1  # the epoch whose workers are counted in _DONE
_DONE = 2  # bit w: worker w read its stripe of _DONE_EPOCH to the end
_WORKERS = 3  # 1 once worker processes have read batches


def tensors(batch: Tuple[Any, ...]) -> Tuple[torch.Tensor, ...]:
    """``(images, labels[, ids])`` numpy arrays to tensors sharing their memory."""
    return tuple(torch.from_numpy(array) for array in batch)


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class IterableDataset(torch.utils.data.IterableDataset):
    """A rank's Tributary loader as a ``torch.utils.data.IterableDataset``.

    Takes the arguments of :class:`tributary.Loader`. The loader starts when
    first needed (so a DataLoader may pickle the dataset beforehand); each
    pass reads one epoch; ``len()`` is the batches of the current generation.
    """

    def __init__(self, dataset: str, **kwargs: Any) -> None:
        super().__init__()
        self._args = (dataset, kwargs)
        self._sync = kwargs.get("mode", "sync") == "sync"
        self._loader: Optional[Loader] = None
        self._worker: Optional[Tuple[int, Loader]] = None  # (pid, loader) in a worker
        self._shared = multiprocessing.Array("q", [-1, -1, 0, 0])
        # The rank's worker processes share one membership: they join with
        # one secret, so each may replace the others' lease.
        if self._sync:
            kwargs.setdefault("member_secret", secrets.token_hex(16))
        self._address: Optional[str] = kwargs.get("coordinator")
        if self._sync and self._address is None:
            # Worker processes must share the in-process coordinator: start
            # it here (the loader fetches nothing until iterated).
            self._address = self.loader.coordinator

    @property
    def loader(self) -> Loader:
        """This process's loader (in the main process: the rank's own)."""
        if self._loader is None:
            dataset, kwargs = self._args
            self._loader = Loader(dataset, **kwargs)
        return self._loader

    def __getstate__(self) -> Dict[str, Any]:
        # A copy starts loaders of its own; the shared array travels only to
        # spawned worker processes (forked ones inherit it).
        dataset, kwargs = self._args
        state = {"_args": (dataset, dict(kwargs, coordinator=self._address))}
        if multiprocessing.context.get_spawning_popen() is not None:
            state["_shared"] = self._shared
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["_args"][0], **state["_args"][1])
        if "_shared" in state:
            self._shared = state["_shared"]

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        worker = torch.utils.data.get_worker_info()
        if worker is None:
            for batch in self.loader:
                yield tensors(batch)
            return
        loader = self._worker_loader(worker.id, worker.num_workers)
        for batch in loader:
            yield tensors(batch)
        if self._sync:
            self._stripe_done(worker.id, worker.num_workers, loader.epoch)

    def _worker_loader(self, index: int, count: int) -> Loader:
        """The loader of worker process `index` of `count`, at the pass's epoch."""
        with self._shared.get_lock():
            self._shared[_WORKERS] = 1
            epoch = self._shared[_NEXT_EPOCH]
        if self._worker is not None and self._worker[0] == os.getpid():
            loader = self._worker[1]  # a persistent worker's next pass
            if self._sync:
                loader.set_epoch(epoch if epoch >= 0 else loader.epoch)
            return loader
        dataset, kwargs = self._args
        kwargs = dict(kwargs, coordinator=self._address, worker=(index, count))
        kwargs.setdefault("decode_threads", max(1, _cores() // count))
        if self._sync and epoch >= 0:
            kwargs["epoch"] = epoch
        loader = Loader(dataset, **kwargs)
        self._worker = (os.getpid(), loader)
        return loader

    def _stripe_done(self, index: int, count: int, epoch: int) -> None:
        """Worker `index` read its stripe of `epoch`; the last one moves the
        next pass on to the following epoch."""
        shared = self._shared
        with shared.get_lock():
            if shared[_DONE_EPOCH] != epoch:
                shared[_DONE_EPOCH], shared[_DONE] = epoch, 0
            shared[_DONE] |= 1 << index
            if shared[_DONE] == (1 << count) - 1:
                shared[_NEXT_EPOCH], shared[_DONE_EPOCH], shared[_DONE] = epoch + 1, -1, 0

    def _pass_epoch(self) -> int:
        """In the main process: the epoch worker processes read next."""
        with self._shared.get_lock():
            epoch = self._shared[_NEXT_EPOCH]
            if epoch < 0:
                epoch = self._shared[_NEXT_EPOCH] = self.loader.epoch
            self._shared[_DONE_EPOCH], self._shared[_DONE] = -1, 0
        return epoch

    def _state_at(self, epoch: int, samples: int) -> Dict[str, int]:
        loader = self.loader
        if loader.epoch != epoch:
            loader.set_epoch(epoch)
        return {"epoch": epoch, "generation": loader.generation, "samples": samples}

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self) -> Dict[str, int]:
        """Where the rank stands, when it reads in this process."""
        if self._shared[_WORKERS]:
            raise RuntimeError(
                "DataLoader worker processes read this dataset, so only the DataLoader knows "
                "what the trainer consumed: use tributary.torch.DataLoader(ds, num_workers=...) "
                "and take state_dict() from it"
            )
        return self.loader.state_dict()

    def commit(self, state: Dict[str, int]) -> None:
        self.loader.commit(state)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        self.loader.load_state_dict(state)


class DataLoader(torch.utils.data.DataLoader):
    """``torch.utils.data.DataLoader`` over an :class:`IterableDataset`, with
    ``state_dict()`` / ``commit()`` / ``load_state_dict()`` that count what it
    handed to the trainer, so checkpoints work with worker processes too.

    Takes torch's DataLoader arguments; ``batch_size`` stays ``None``
    (Tributary batches: set the batch size on the dataset).
    """

    def __init__(self, dataset: IterableDataset, **kwargs: Any) -> None:
        if not isinstance(dataset, IterableDataset):
            raise TypeError(
                f"tributary.torch.DataLoader reads a tributary.torch.IterableDataset, "
                f"not {type(dataset).__name__}"
            )
        if kwargs.setdefault("batch_size", None) is not None:
            raise ValueError(
                "Tributary batches itself: leave batch_size=None and pass batch_size= "
                "to the IterableDataset"
            )
        super().__init__(dataset, **kwargs)
        self._position: Optional[list] = None  # [epoch, samples handed to the trainer]

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        if self.num_workers == 0:
            yield from super().__iter__()
            return
        position = self._position = [self.dataset._pass_epoch(), 0]
        for batch in super().__iter__():
            position[1] += len(batch[1])
            yield batch

    def state_dict(self) -> Dict[str, int]:
        """Where the rank stands: save it with a checkpoint."""
        if self.num_workers == 0:
            return self.dataset.state_dict()
        epoch, samples = self._position or (self.dataset._pass_epoch(), 0)
        return self.dataset._state_at(epoch, samples)

    def commit(self, state: Dict[str, int]) -> None:
        """Tells the coordinator the checkpoint holding ``state`` is durable."""
        self.dataset.commit(state)

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Checks a restored checkpoint's state against the job."""
        self.dataset.load_state_dict(state)
