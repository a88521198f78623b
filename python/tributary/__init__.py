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
    val = tributary.Loader("s3://bucket/val", shuffle=False, transform="eval", batch_size=256)

Rank, world size, run id and restart count come from torchrun's environment
(RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT) unless
passed. With ``coordinator=None`` the loader runs a coordinator in-process on
the in-memory store (one rank). ``tributary.torch`` adapts it to PyTorch.
"""

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence

import numpy as np

from . import _tributary
from ._tributary import __version__

__all__ = ["Loader", "Source", "__version__", "collate", "apply_maps"]


def collate(values: Sequence[Any]) -> Any:
    """A batch of the per-sample results of ``map=``: tuples and lists
    position by position, dicts key by key, numpy arrays of one shape and
    dtype stacked, numbers into an array; anything else stays a list."""
    first = values[0] if len(values) else None
    if isinstance(first, tuple):
        return tuple(collate([v[i] for v in values]) for i in range(len(first)))
    if isinstance(first, dict):
        return {key: collate([v[key] for v in values]) for key in first}
    if isinstance(first, np.ndarray):
        if all(isinstance(v, np.ndarray) and v.shape == first.shape and v.dtype == first.dtype
               for v in values):
            return np.stack(values)
        return list(values)
    if isinstance(first, (bool, int, float, np.generic)) and not isinstance(first, str):
        try:
            return np.asarray(values)
        except (TypeError, ValueError):
            return list(values)
    return list(values)


def _rows(batch: tuple) -> Iterator[tuple]:
    """The samples of a batch of columns, one tuple each."""
    count = len(batch[0]) if batch else 0
    for i in range(count):
        yield tuple(column[i] for column in batch)


def apply_maps(batch: tuple, map: Optional[Callable[[tuple], Any]],
               batch_map: Optional[Callable[[Any], Any]],
               collate_fn: Callable[[Sequence[Any]], Any] = collate) -> Any:
    """``map`` on each sample (a tuple in field order), the results collated;
    then ``batch_map`` on the batch."""
    if map is not None:
        batch = collate_fn([map(sample) for sample in _rows(batch)])
    if batch_map is not None:
        batch = batch_map(batch)
    return batch


@dataclass(frozen=True)
class Source:
    """One dataset of a mix: ``Loader([Source(url_a, weight=3), Source(url_b,
    weight=1)])``. Give at most one of ``weight`` (a share of the epoch,
    proportional; weight every source or none), ``samples`` (exactly this many
    per epoch) and ``repeat`` (passes per epoch; 1.5 reads every sample once
    and half of them twice); none is one pass. Weighted epochs hold
    ``epoch_samples`` samples (default: all sources' together)."""

    url: str
    weight: Optional[float] = None
    samples: Optional[int] = None
    repeat: Optional[float] = None

    def _take(self) -> str:
        given = [(k, v) for k, v in (("weight", self.weight), ("samples", self.samples),
                                     ("repeat", self.repeat)) if v is not None]
        if len(given) > 1:
            raise ValueError(f"Source({self.url!r}): give one of weight, samples and repeat, "
                             f"not {' and '.join(k for k, _ in given)}")
        if not given:
            return "repeat:1"
        kind, value = given[0]
        if kind == "samples" and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"Source({self.url!r}): samples must be an int, not {value!r}")
        return f"{kind}:{value!r}"


def _dataset_arg(dataset: Any) -> Any:
    """A URL as it is; a list of :class:`Source` (or URLs) as ``(url, take)``
    pairs for the native loader."""
    if isinstance(dataset, (str, os.PathLike)):
        return os.fspath(dataset)
    try:
        sources = list(dataset)
    except TypeError:
        raise TypeError(f"dataset must be a URL or a list of tributary.Source, not {type(dataset).__name__}") from None
    pairs = []
    for source in sources:
        if isinstance(source, str):
            source = Source(source)
        if not isinstance(source, Source):
            raise TypeError(f"dataset: a mix lists tributary.Source (or URLs), not {type(source).__name__}")
        pairs.append((source.url, source._take()))
    return pairs


class Loader:
    """A rank's data loader; see ``tributary/__init__.pyi`` for every argument.

    ``map=`` (a callable on one sample: a tuple of its fields in ``fields``
    order) and ``batch_map=`` (a callable on one batch) run here, in the
    process that iterates (or in each DataLoader worker process under
    ``tributary.torch``). They cost what Python costs: ``map`` is called once
    per sample with the GIL held, and its results are collated again, so
    prefer ``batch_map`` (once per batch) and the native transforms; without
    them a batch passes straight through.
    """

    def __init__(self, dataset: Any, *, map: Optional[Callable[[tuple], Any]] = None,
                 batch_map: Optional[Callable[[Any], Any]] = None, **kwargs: Any) -> None:
        for name, fn in (("map", map), ("batch_map", batch_map)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable, not {type(fn).__name__}")
        self._native = _tributary.Loader(_dataset_arg(dataset), **kwargs)
        self._map = map
        self._batch_map = batch_map

    def __iter__(self) -> "Loader":
        iter(self._native)
        return self

    def __next__(self) -> Any:
        batch = next(self._native)
        if self._map is None and self._batch_map is None:
            return batch
        return apply_maps(batch, self._map, self._batch_map)

    def __len__(self) -> int:
        return len(self._native)

    def __repr__(self) -> str:
        return repr(self._native)

    def __getattr__(self, name: str) -> Any:
        # state_dict, commit, load_state_dict, set_epoch, epoch, rank,
        # metrics, metrics_address, ...
        if name == "_native":
            raise AttributeError(name)
        return getattr(self._native, name)
