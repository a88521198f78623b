"""Tributary: a data loader for distributed deep-learning training.

One call per rank::

    loader = tributary.Loader("s3://bucket/ds", coordinator="coord:7070", job="resnet",
                              batch_size=256, seed=42)
    for epoch in range(epochs):
        for images, labels in loader:   # numpy arrays owning Rust buffers
            ...
        # checkpoint: save loader.state_dict() with the model, then
        loader.commit(state)

    # Mixing: 70% of each epoch from one dataset, 30% from another.
    mixed = tributary.Loader([tributary.Source("s3://bucket/a", weight=0.7),
                              tributary.Source("s3://bucket/b", weight=0.3)], ...)

    # Evaluation: every sample once across the ranks, in manifest order, no coordinator.
    val = tributary.Loader("s3://bucket/val", shuffle=False, batch_size=256,
                           transform=tributary.Transform("eval", size=256))

    # A batch is a tuple that also names its columns.
    batch = next(iter(val))
    batch["image"], batch.labels   # batch.ids, batch.sources, batch.valid when asked for

Rank, world size, run id and restart count come from torchrun's environment
(RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT) unless
passed. With ``coordinator=None`` the loader runs a coordinator in-process on
the in-memory store (one rank); under torchrun rank 0 hosts one for its world
(on ``MASTER_ADDR``, port ``MASTER_PORT + 1`` or ``TRIBUTARY_COORDINATOR_PORT``).
``epochs=None`` (the default) gives as many epochs as the loop asks for;
``epochs=N`` a finite job, past which iterating raises ``RuntimeError``.
``tributary.torch`` adapts it to PyTorch.
"""

import atexit
import inspect
import weakref
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Type, Union

from . import _tributary
from ._tributary import __version__
from .batch import TOKEN_FIELDS, Batch, apply_maps, collate, field_names
from .options import Source, Transform, check_numbers, dataset_arg, expand_transform

__all__ = ["Batch", "Loader", "Source", "Transform", "__version__", "collate", "apply_maps"]


class Loader:
    """A rank's data loader: ``tributary.Loader(dataset, *, ...)``.

    ``dataset`` is a URL, or a list of :class:`Source` to mix. Every other
    argument is a keyword; ``tributary/__init__.pyi`` documents each one.
    ``transform=`` takes a preset name or a :class:`Transform` grouping the
    image options. Iterating yields a :class:`Batch` per batch: a tuple of
    the ``fields`` (by default ``images, labels``: numpy arrays owning Rust
    buffers), then ids, sources and the validity mask when asked for, also
    reachable by name (``batch["image"]``, ``batch.labels``,
    ``batch.valid``).

    ``map=`` (a callable on one sample: a tuple of its fields in ``fields``
    order) and ``batch_map=`` (a callable on one batch) run here, in the
    process that iterates (or in each DataLoader worker process under
    ``tributary.torch``). They cost what Python costs: ``map`` is called once
    per sample with the GIL held, and its results are collated again, so
    prefer ``batch_map`` (once per batch) and the native transforms; without
    them a batch passes straight through.
    """

    # What the columns become before a batch is made of them (the torch
    # adapter's subclass: tensors), and how ``map=``'s results are collated.
    _column: Optional[Callable[[Any], Any]] = None
    _collate: Callable[[Sequence[Any]], Any] = staticmethod(collate)

    def __init__(self, dataset: Any, *, map: Optional[Callable[[tuple], Any]] = None,
                 batch_map: Optional[Callable[[Any], Any]] = None, **options: Any) -> None:
        for name, fn in (("map", map), ("batch_map", batch_map)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
        options = expand_transform(options)
        check_numbers(options)
        self._native = _tributary.Loader(dataset_arg(dataset), **options)
        if self._native.hosts_coordinator:
            # Rank 0 hosts its world's coordinator: at exit it waits for the
            # other ranks to be done with it (bounded), rather than take it
            # away while they report their last batches.
            atexit.register(self._native.linger)
        elif options.get("worker") is None:
            # Any other rank leaves its job as its process exits, so that
            # rank 0 (above) and a re-run of this rank need not wait its
            # lease out. Not a DataLoader worker's loader: it shares its
            # rank's membership, which the rank's own process gives up.
            atexit.register(_leave_at_exit, weakref.ref(self))
        extras = [name for name, given in (("ids", options.get("return_ids", False)),
                                           ("sources", options.get("return_sources", False)),
                                           ("valid", options.get("tail", "uneven") == "pad"))
                  if given]
        fields = options.get("fields")
        if fields is None and options.get("sequence_length") is not None:
            fields = TOKEN_FIELDS
        self._batch: Type[Batch] = Batch.of(field_names(fields), extras)
        self._map = map
        self._batch_map = batch_map

    def __iter__(self) -> "Loader":
        """Starts the next epoch when the current one was read to its end."""
        iter(self._native)
        return self

    def __next__(self) -> Any:
        columns = next(self._native)
        if self._column is not None:
            columns = [self._column(column) for column in columns]
        batch = self._batch(*columns)
        if self._map is None and self._batch_map is None:
            return batch
        return apply_maps(batch, self._map, self._batch_map, collate_fn=self._collate)

    def __len__(self) -> int:
        """Batches of this rank's part of the current generation."""
        return len(self._native)

    def __repr__(self) -> str:
        return repr(self._native)

    def set_epoch(self, epoch: int) -> None:
        """Starts ``epoch`` over from its first batch (sync mode): the epoch of
        the rank's generation, or the next one. The next epoch opens once
        every rank read its part of this one: this waits for the other
        ranks (up to 10 minutes), and raises at once when this rank has not
        read its own part to its end (skipping would lose its samples)."""
        self._native.set_epoch(epoch)

    def state_dict(self) -> Dict[str, Any]:
        """Where this rank stands (``epoch``, ``generation``, ``samples``,
        ``history``, the epoch's plan records, and ``plan``, the digest of
        the plan they belong to): save it with a checkpoint. A dict of ints and lists of ints, ``torch.save``-able."""
        return self._native.state_dict()

    def commit(self, state: Dict[str, int]) -> None:
        """Tells the coordinator that a checkpoint holding ``state`` is
        durable: a restarted group resumes right after it."""
        self._native.commit(state)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from a restored checkpoint's state, before reading: the
        loader reads on right after it, under torchrun or not (a plain
        re-run, a requeue, a pod restart, ``coordinator=None``). Raises
        saying what to do when the state is not the job's commit (an older
        checkpoint, or one some rank has not committed) or when batches
        were already read. A new process on a job whose group has committed
        must call it before reading: its first batch raises otherwise."""
        self._native.load_state_dict(state)

    def _check_resumed(self) -> None:
        """Raises when this new process must resume first (see
        :meth:`load_state_dict`); for readers sharing its membership."""
        self._native.check_resumed()

    def metrics(self) -> Dict[str, Any]:
        """The rank's counters over the loader's life: samples, bytes, reads
        in flight and their latency, time per sample, data wait, cache."""
        return self._native.metrics()

    @property
    def epoch(self) -> int:
        """The epoch being read."""
        return self._native.epoch

    @property
    def generation(self) -> int:
        """The group's generation (it grows when the group restarts or
        changes)."""
        return self._native.generation

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def world_size(self) -> int:
        return self._native.world_size

    @property
    def data_parallel(self) -> Tuple[int, int]:
        """``(dp_rank, dp_size)``: the part of the data this rank reads and
        the number of parts (its data-parallel group; without one, its rank
        and world)."""
        return self._native.data_parallel

    @property
    def member(self) -> str:
        """This loader's membership in the job."""
        return self._native.member

    @property
    def coordinator(self) -> str:
        """The coordinator's address; with ``coordinator=None`` the
        in-process coordinator's (loopback), which forked processes use, or
        under torchrun the one rank 0 hosts."""
        return self._native.coordinator

    @property
    def metrics_address(self) -> Optional[str]:
        """``"host:port"`` where ``/metrics`` is served; None when it is not."""
        return self._native.metrics_address


def _leave_at_exit(loader: "weakref.ref[Loader]") -> None:
    alive = loader()
    if alive is not None:
        alive._native.leave_at_exit()


def _with_signature(init: Callable[..., None]) -> None:
    """Gives ``init`` (``Loader.__init__``, ``IterableDataset.__init__``) the
    loader's real signature for ``help()`` and ``inspect``: the native
    loader's keywords, ``transform`` also taking a :class:`Transform`, then
    ``map`` and ``batch_map``."""
    try:
        native = inspect.signature(_tributary.Loader)
    except (TypeError, ValueError):  # no text signature: keep ``**options``
        return
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for param in native.parameters.values():
        if param.name == "transform":
            param = param.replace(annotation=Union[str, Transform])
        params.append(param)
    params.append(inspect.Parameter("map", keyword, default=None,
                                    annotation=Optional[Callable[[tuple], Any]]))
    params.append(inspect.Parameter("batch_map", keyword, default=None,
                                    annotation=Optional[Callable[[Any], Any]]))
    init.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]


_with_signature(Loader.__init__)
