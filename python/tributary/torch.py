"""PyTorch adapters: batches as torch tensors that share Tributary's buffers.

    ds = tributary.torch.IterableDataset("s3://bucket/ds", coordinator="coord:7070", job="resnet")
    loader = tributary.torch.DataLoader(ds, pin_memory=True)   # or torch's own DataLoader
    for epoch in range(epochs):
        for step, (images, labels) in enumerate(loader):   # float32 N x 3 x S x S, int64 N
            ...
            if step % 100 == 0:
                state = loader.state_dict()   # save it with the checkpoint, then
                loader.commit(state)          # once the checkpoint is durable

Built on :class:`tributary.Loader`, it takes whatever that takes (a mix of
:class:`tributary.Source`, ``transform=tributary.Transform(...)``, ``map=``)
and yields the same :class:`tributary.Batch`, its columns as tensors
(``batch.images``, ``batch["cls"]``; a plain DataLoader turns tuples into
lists, but a ``Batch`` stays one).

`torch.from_numpy` wraps the numpy arrays, which own the Rust buffers: no
copy on the way to the trainer (pinning, when asked for, is the one copy).
With ``dtype="uint8", layout="NHWC"`` the batch is 4x smaller; turn it into
normalised float32 on the GPU with :func:`normalize`.

``device="cuda"`` (:class:`Loader`, :class:`DataLoader`) yields batches
already on the GPU: a background thread copies them ``prefetch=2`` batches
ahead through reused page-locked buffers on a side CUDA stream (what
``pin_memory=True`` saves, and the copy off the step), ``normalize=True``
turning uint8 images into normalised float32 there; ``state_dict()`` counts
the batches handed over, not those in flight (see ``tributary._device``).
Its gain on a real step is yet to be measured on a GPU machine.

``map=`` and ``batch_map=`` (see :class:`tributary.Loader`) run in the
process that reads: the trainer's with ``num_workers=0``, each worker
process otherwise (so they must pickle under the ``spawn`` start method).
Here they see tensors, and ``map``'s results are collated with torch's
``default_collate``.

Tributary batches, shuffles and decodes on its own threads, so
``num_workers=0`` is the fast default. With ``num_workers=N`` worker
processes each read the rank's part and decode every N-th batch, and the
DataLoader, taking one batch from each worker in turn, yields the very order
of ``num_workers=0``. Each pass over the DataLoader reads the epoch after the
last one read to its end. Only the main process knows what the trainer
consumed, so with worker processes take ``state_dict()`` from
:class:`DataLoader` rather than from the dataset.
"""

import copy
import functools
import inspect
import multiprocessing
import multiprocessing.context
import os
import secrets
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.utils.data

import tributary
from . import _device
from ._device import IMAGENET_MEAN, IMAGENET_STD, Device, Normalize, normalize
from .batch import Batch

__all__ = ["DataLoader", "IterableDataset", "Loader", "data_parallel", "normalize", "tensors"]

# Slots of the array shared with worker processes.
_NEXT_EPOCH = 0  # the epoch the next pass reads; -1: the generation's first
_DONE_EPOCH = 1  # the epoch whose workers are counted in _DONE
_DONE = 2  # bit w: worker w read its stripe of _DONE_EPOCH to the end
_WORKERS = 3  # 1 once worker processes have read batches


def _tensor(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, list) and value and isinstance(value[0], np.ndarray):
        return [torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in value]
    return value


def tensors(batch: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """A batch's numpy arrays (and lists of arrays) as tensors sharing their
    memory; strings, JSON values and bytes stay as they are. A
    :class:`tributary.Batch` stays one, with the same names."""
    columns = [_tensor(column) for column in batch]
    if isinstance(batch, Batch):
        return type(batch)(*columns)
    return tuple(columns)


class Loader(tributary.Loader):
    """A :class:`tributary.Loader` whose batches hold tensors sharing the
    numpy arrays' memory; ``map=``'s results are collated with torch's
    ``default_collate``. Takes the arguments of :class:`tributary.Loader`,
    and:

    ``device``: ``"cuda"`` (the current CUDA device when the loader is
    made), ``"cuda:1"`` or a ``torch.device``: the batches' tensors arrive
    there, ready to use on the trainer's current stream. They are copied
    ``prefetch`` batches ahead (default 2) by a background thread, through
    page-locked buffers made once and reused, on a CUDA stream of its own,
    so the copy overlaps the trainer's step. Other columns (strings, JSON,
    bytes) pass unchanged; ``map=`` and ``batch_map=`` run before the copy.
    ``state_dict()`` counts the batches handed to the trainer, not those
    read ahead.

    ``normalize``: with ``device=`` and ``dtype="uint8"`` batches, True
    (ImageNet's mean and std) or ``(mean, std)`` normalises the images on
    the device as :func:`normalize` does: float32 ``N x 3 x H x W``.
    """

    _column = staticmethod(_tensor)
    _collate = staticmethod(torch.utils.data.default_collate)

    def __init__(self, dataset: Any, *, device: Optional[Device] = None, prefetch: int = 2,
                 normalize: Normalize = False, **options: Any) -> None:
        # Checked before the native loader starts (and its coordinator).
        staging = _device.staging(device, prefetch, normalize, options)
        super().__init__(dataset, **options)
        self._staging = staging
        # Where state_dict() keeps progress: sync, shuffled reads.
        self._progress = (options.get("mode", "sync") == "sync"
                          and options.get("shuffle", True) is not False)

    def __iter__(self) -> "Loader":
        """Starts the next epoch when the current one was handed over to its end."""
        if self._staging is None or not self._staging.resume():
            super().__iter__()
        return self

    def __next__(self) -> Any:
        if self._staging is None:
            return super().__next__()
        # The native loader reads here, in the caller's thread; the copy
        # thread only copies.
        return self._staging.next(super().__next__,
                                  self._native.state_dict if self._progress else None)

    def state_dict(self) -> Dict[str, Any]:
        """Where this rank stands, after the last batch handed to the
        trainer (batches copied ahead are read again after a restart)."""
        if self._progress and self._staging is not None and self._staging.ahead:
            return copy.deepcopy(self._staging.handed)
        return super().state_dict()

    def set_epoch(self, epoch: int) -> None:
        if self._staging is not None:
            self._staging.discard()
        super().set_epoch(epoch)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if self._staging is not None:
            self._staging.discard()
        super().load_state_dict(state)

    def close(self) -> None:
        """Ends the copy thread of ``device=`` (it also ends when the loader
        is collected); batches in flight are dropped."""
        if self._staging is not None:
            self._staging.close()

    @property
    def device(self) -> Optional[torch.device]:
        """Where batches arrive: the CUDA device of ``device=``, or None."""
        return None if self._staging is None else self._staging.backend.device


def _with_device_signature(init: Callable[..., None]) -> None:
    """Gives ``init`` :class:`tributary.Loader`'s signature (for ``help()``)
    with ``device``, ``prefetch`` and ``normalize`` added."""
    base = inspect.signature(tributary.Loader.__init__)
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [inspect.Parameter("device", keyword, default=None, annotation=Optional[Device]),
             inspect.Parameter("prefetch", keyword, default=2, annotation=int),
             inspect.Parameter("normalize", keyword, default=False, annotation=Normalize)]
    params = list(base.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind == p.VAR_KEYWORD), len(params))
    init.__signature__ = base.replace(parameters=params[:at] + added + params[at:])  # type: ignore[attr-defined]


_with_device_signature(Loader.__init__)


def data_parallel(mesh: Any, dim: Union[str, int] = "dp") -> Tuple[int, int]:
    """``(dp_rank, dp_size)`` of this process on ``mesh``'s data-parallel
    dimension ``dim`` (a name or an index), for ``Loader(...,
    data_parallel=...)``: the ranks that share a coordinate on ``dim`` (its
    tensor, pipeline and context-parallel peers) read identical batches, and
    the ``dp_size`` coordinates disjoint parts::

        mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
        loader = tributary.torch.Loader(url, data_parallel=tributary.torch.data_parallel(mesh, "dp"))

    A data-parallel dimension made of several mesh dimensions (HSDP's
    ``("dp_replicate", "dp_shard")``) is one flattened dimension:
    ``mesh["dp_replicate", "dp_shard"]._flatten("dp")``, then ``"dp"``."""
    names = tuple(getattr(mesh, "mesh_dim_names", None) or ())
    if isinstance(dim, str):
        if dim not in names:
            raise ValueError(f"data_parallel: the mesh has no dimension {dim!r} "
                             f"(its dimensions: {names or 'unnamed'})")
        index = names.index(dim)
    elif isinstance(dim, int) and not isinstance(dim, bool):
        if not 0 <= dim < mesh.ndim:
            raise ValueError(f"data_parallel: dimension {dim} is outside the mesh's {mesh.ndim}")
        index = dim
    else:
        raise TypeError(f"data_parallel: dim must be a dimension's name or index, not {dim!r}")
    # By index: some torch versions size a dimension by index only.
    return int(mesh.get_local_rank(mesh_dim=index)), int(mesh.size(index))


def _batch_len(batch: Any) -> int:
    """Samples in a batch as the DataLoader hands it on (its first column)."""
    first = batch[0] if isinstance(batch, (tuple, list)) and batch else batch
    try:
        return len(first)
    except TypeError:
        return 0


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _refuse_to_collate_batches(batch: Sequence[Any], *, collate_fn_map: Any = None) -> Any:
    """What torch's ``default_collate`` does with a list of Tributary batches:
    refuse. Such a list means a DataLoader batched batches (its default
    ``batch_size=1``), which would stack them into a new leading dimension."""
    raise TypeError(
        f"a torch DataLoader is collating {len(batch)} Tributary batch(es) into one, which "
        "adds a dimension: tributary.torch.IterableDataset yields whole batches, so pass "
        "batch_size=None to torch's DataLoader (DataLoader(ds, batch_size=None)), or use "
        "tributary.torch.DataLoader(ds); set the batch size on the dataset (batch_size=...)"
    )


# torch's documented extension point of ``default_collate``: a type's entry
# decides how a list of its values is collated.
torch.utils.data._utils.collate.default_collate_fn_map[Batch] = _refuse_to_collate_batches


class IterableDataset(torch.utils.data.IterableDataset):
    """A rank's Tributary loader as a ``torch.utils.data.IterableDataset``.

    Takes the arguments of :class:`tributary.Loader` (a URL or a mix of
    :class:`tributary.Source`, ``transform=tributary.Transform(...)``,
    ``map=``, ``batch_map=``, ...) and yields its batches with tensors
    (:class:`Loader`). The loader starts when first needed (so a DataLoader
    may pickle the dataset beforehand); each pass reads one epoch; ``len()``
    is the batches of the current generation.
    """

    def __init__(self, dataset: Any, **kwargs: Any) -> None:
        super().__init__()
        given = [name for name in ("device", "prefetch", "normalize") if name in kwargs]
        if given:
            # DataLoader worker processes must not touch CUDA: the copy to
            # the device happens in the trainer's process.
            raise ValueError(
                f"{'=, '.join(given)}= go to tributary.torch.DataLoader(ds, device=...), which "
                f"copies batches to the device in the trainer's process, not to the dataset "
                f"(its DataLoader worker processes must not use CUDA)")
        # Wrong numbers fail here, not when a DataLoader first iterates.
        tributary.options.check_numbers(tributary.options.expand_transform(kwargs))
        self._args = (dataset, kwargs)
        self._sync = kwargs.get("mode", "sync") == "sync"
        # shuffle=False reads a fixed split with no coordinator at all.
        self._ordered = kwargs.get("shuffle", True) is False
        self._loader: Optional[Loader] = None
        self._worker: Optional[Tuple[int, Loader]] = None  # (pid, loader) in a worker
        self._shared = multiprocessing.Array("q", [-1, -1, 0, 0])
        # The rank's worker processes share one membership: they join with
        # one secret, so each may replace the others' lease.
        if self._sync:
            kwargs.setdefault("member_secret", secrets.token_hex(16))
        self._address: Optional[str] = kwargs.get("coordinator")
        if self._sync and self._address is None and not self._ordered:
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
        kwargs = dict(kwargs, coordinator=self._address)
        state = {"_args": (dataset, kwargs)}
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
            yield from self.loader
            return
        loader = self._worker_loader(worker.id, worker.num_workers)
        yield from loader
        if self._sync and self._stripe_done(worker.id, worker.num_workers, loader.epoch):
            if not self._ordered:
                # Every stripe of the pass is read, so the rank's part is,
                # and the next epoch opens once every rank's is. A plain
                # DataLoader's main process reports nothing: the last
                # worker does, before the main process sees the pass end.
                loader._native.report_end()

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
        kwargs.pop("metrics_port", None)  # one port per rank: the main process's
        kwargs.setdefault("decode_threads", max(1, _cores() // count))
        if self._sync and epoch >= 0:
            kwargs["epoch"] = epoch
        loader = Loader(dataset, **kwargs)
        self._worker = (os.getpid(), loader)
        return loader

    def _stripe_done(self, index: int, count: int, epoch: int) -> bool:
        """Worker `index` read its stripe of `epoch`; the last one moves the
        next pass on to the following epoch, and is told so (True)."""
        shared = self._shared
        with shared.get_lock():
            if shared[_DONE_EPOCH] != epoch:
                shared[_DONE_EPOCH], shared[_DONE] = epoch, 0
            shared[_DONE] |= 1 << index
            if shared[_DONE] == (1 << count) - 1:
                shared[_NEXT_EPOCH], shared[_DONE_EPOCH], shared[_DONE] = epoch + 1, -1, 0
                return True
        return False

    def _pass_epoch(self) -> int:
        """In the main process: the epoch worker processes read next."""
        with self._shared.get_lock():
            epoch = self._shared[_NEXT_EPOCH]
            if epoch < 0:
                epoch = self._shared[_NEXT_EPOCH] = self.loader.epoch
            self._shared[_DONE_EPOCH], self._shared[_DONE] = -1, 0
        return epoch

    def _state_at(self, epoch: int, samples: int) -> Dict[str, Any]:
        loader = self.loader
        if loader.epoch != epoch:
            loader.set_epoch(epoch)
        # The main process's loader reads nothing: its state is the
        # generation's (with its plan history), at the workers' count.
        return dict(loader.state_dict(), samples=samples)

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

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.loader.load_state_dict(state)


tributary._with_signature(IterableDataset.__init__)


class DataLoader(torch.utils.data.DataLoader):
    """``torch.utils.data.DataLoader`` over an :class:`IterableDataset`, with
    ``state_dict()`` / ``commit()`` / ``load_state_dict()`` that count what it
    handed to the trainer, so checkpoints work with worker processes too.

    Takes torch's DataLoader arguments; ``batch_size`` stays ``None``
    (Tributary batches: set the batch size on the dataset). ``device``,
    ``prefetch`` and ``normalize`` are :class:`Loader`'s: the batches'
    tensors arrive on the CUDA device, copied ahead in this (the trainer's)
    process whatever ``num_workers`` is, through page-locked buffers of
    their own (so not with ``pin_memory=True``).
    """

    def __init__(self, dataset: IterableDataset, *, device: Optional[Device] = None,
                 prefetch: int = 2, normalize: Normalize = False, **kwargs: Any) -> None:
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
        if device is not None and kwargs.get("pin_memory"):
            raise ValueError(
                f"pin_memory=True and device={device!r} both pin batches: pass device= alone "
                f"(it copies through page-locked buffers of its own, ahead of the trainer)"
            )
        staging = _device.staging(device, prefetch, normalize, dataset._args[1])
        super().__init__(dataset, **kwargs)
        self._position: Optional[list] = None  # [epoch, samples handed to the trainer]
        self._staging = staging

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, ...]]:
        if self.num_workers == 0:
            # The dataset's loader counts what the trainer took, less what
            # was read ahead (see state_dict).
            progress = self.dataset._sync and not self.dataset._ordered
            mark = self.dataset.state_dict if progress else None
            yield from self._staged(super().__iter__(), mark)
            return
        # Worker processes share this rank's membership: the replay guard
        # (a new process on a job whose group committed) is checked here.
        self.dataset.loader._check_resumed()
        position = self._position = [self.dataset._pass_epoch(), 0]
        for batch in self._staged(super().__iter__(), None):
            position[1] += _batch_len(batch)
            yield batch
        if self.dataset._sync and not self.dataset._ordered:
            # The workers read stripes and report nothing: the pass's end
            # reaches the coordinator from here (a finite job finishes on it).
            self.dataset.loader._native.report(self.dataset._state_at(*position))

    def _staged(self, batches: Iterator[Any], mark: Optional[Callable[[], Any]]) -> Iterator[Any]:
        """``batches`` as they are, or on ``device=`` (copied ahead)."""
        staging = self._staging
        if staging is None:
            yield from batches
            return
        if self.num_workers > 0:
            staging.discard()  # a new pass starts new worker processes
        else:
            # Batches read ahead by a pass left early come first: the
            # dataset's loader goes on after them (or its epoch ended).
            staging.resume()
        pull = functools.partial(next, batches)
        while True:
            try:
                batch = staging.next(pull, mark)
            except StopIteration:
                return
            yield batch

    def state_dict(self) -> Dict[str, int]:
        """Where the rank stands: save it with a checkpoint."""
        if self.num_workers == 0:
            progress = self.dataset._sync and not self.dataset._ordered
            if progress and self._staging is not None and self._staging.ahead:
                return copy.deepcopy(self._staging.handed)
            return self.dataset.state_dict()
        epoch, samples = self._position or (self.dataset._pass_epoch(), 0)
        return self.dataset._state_at(epoch, samples)

    def commit(self, state: Dict[str, int]) -> None:
        """Tells the coordinator the checkpoint holding ``state`` is durable."""
        self.dataset.commit(state)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from a restored checkpoint's state (before iterating)."""
        if self._position is not None and self._position[1] > 0:
            raise ValueError(
                f"load_state_dict() after this DataLoader handed out batches (epoch "
                f"{self._position[0]}, {self._position[1]} samples): restore the checkpoint "
                f"before iterating"
            )
        if self._staging is not None:
            self._staging.discard()
        self.dataset.load_state_dict(state)
