"""Batches as a named structure, and the Python side of ``map=`` / ``batch_map=``.

A :class:`Batch` is a tuple: ``images, labels = batch`` and ``batch[0]``
work as they always did. Its columns also answer to their names: the
field's (``batch["image"]``, ``batch.cls``, ``batch["cls?"]`` as written in
``fields``), ``images`` and ``labels`` for the first image and ``cls``
field, and ``ids``, ``sources`` and ``valid`` for what ``return_ids=True``,
``return_sources=True`` and ``tail="pad"`` add after the fields.
"""

from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Type, Union

import numpy as np

__all__ = ["Batch", "apply_maps", "collate"]

# Extensions (their last dot-separated part) whose field is an image; `cls`
# is a label. As the worker's `Decoder::of` (fields.rs) tells them apart.
_IMAGE = frozenset({"jpg", "jpeg", "png", "webp", "image"})
_DEFAULT_FIELDS = ("image", "cls?")
#: The fields of a token job's batches unless ``fields=`` picks others.
TOKEN_FIELDS = ("input_ids", "labels", "position_ids", "document_ids")
_EXTRAS = ("ids", "sources", "valid")


def field_names(fields: Union[None, str, Sequence[str]]) -> Tuple[str, ...]:
    """The fields a loader's batches carry, as written (``fields=``: a list,
    one comma-separated string, or None for the default)."""
    if fields is None:
        return _DEFAULT_FIELDS
    if isinstance(fields, str):
        return tuple(name.strip() for name in fields.split(","))
    return tuple(fields)


def _kind(field: str) -> str:
    """"image", "label" or "" for a field as written (`jpg;png`, `cls?`)."""
    first = field.removesuffix("?").split(";")[0]
    last = first.rsplit(".", 1)[-1].lower()
    return "image" if last in _IMAGE else "label" if last == "cls" else ""


def _describe(value: Any) -> str:
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{str(dtype).removeprefix('torch.')}{list(shape)}"
    if isinstance(value, list):
        return f"list[{len(value)}]"
    return repr(value)


class Batch(tuple):
    """One batch: a tuple of columns whose entries also answer to names.

    Its entries, in order: one column per field of ``fields`` (by default
    ``images, labels``), then ``ids`` (with ``return_ids=True``),
    ``sources`` (with ``return_sources=True``) and ``valid`` (with
    ``tail="pad"``). ``batch["image"]``, ``batch.image`` or ``batch.images``
    name the same column; ``batch._fields`` lists the names by position and
    ``batch._asdict()`` maps them to the columns.

    Each loader has its own subclass, made by :meth:`Batch.of`; like a
    namedtuple's, its constructor takes the columns as positional
    arguments (what torch's ``default_convert`` and ``pin_memory`` call).
    """

    __slots__ = ()
    _fields: Tuple[str, ...] = ()
    #: Every name a column answers to, and its position.
    _names: Dict[str, int] = {}
    #: What :meth:`of` made this class from (how a batch pickles).
    _spec: Tuple[Tuple[str, ...], Tuple[str, ...]] = ((), ())

    def __new__(cls, *columns: Any) -> "Batch":
        if len(columns) != len(cls._fields):
            raise TypeError(f"a batch of ({', '.join(cls._fields)}) takes {len(cls._fields)} "
                            f"columns, not {len(columns)}")
        return tuple.__new__(cls, columns)

    @staticmethod
    def of(fields: Sequence[str], extras: Sequence[str] = ()) -> Type["Batch"]:
        """The class of batches with these ``fields`` (as written in
        ``fields=``) followed by these ``extras`` (``"ids"``, ``"sources"``,
        ``"valid"``, in that order)."""
        return _batch_class(tuple(fields), tuple(extras))

    @classmethod
    def _make(cls, columns: Sequence[Any]) -> "Batch":
        """A batch of ``columns``, in order."""
        return cls(*columns)

    def _asdict(self) -> Dict[str, Any]:
        """The columns by name, in order."""
        return dict(zip(self._fields, self))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            index = self._names.get(key)
            if index is None:
                raise KeyError(f"the batch has no column {key!r}; it has {', '.join(self._fields)}")
            return tuple.__getitem__(self, index)
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str) -> Any:
        index = type(self)._names.get(name)
        if index is None or name.startswith("_"):
            raise AttributeError(f"the batch has no column {name!r}; it has {', '.join(self._fields)}")
        return tuple.__getitem__(self, index)

    def __reduce__(self) -> Tuple[Any, ...]:
        return _rebuild, (self._spec, tuple(self))

    def __repr__(self) -> str:
        columns = ", ".join(f"{name}={_describe(value)}" for name, value in zip(self._fields, self))
        return f"Batch({columns})"


_classes: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], Type[Batch]] = {}


def _batch_class(fields: Tuple[str, ...], extras: Tuple[str, ...]) -> Type[Batch]:
    spec = (fields, extras)
    cls = _classes.get(spec)
    if cls is not None:
        return cls
    unknown = [e for e in extras if e not in _EXTRAS]
    if unknown:
        raise ValueError(f"batch extras are {', '.join(_EXTRAS)}, not {', '.join(unknown)}")
    keys = tuple(f.removesuffix("?") for f in fields) + extras
    names: Dict[str, int] = {}
    for i, key in enumerate(keys):
        names.setdefault(key, i)
    for i, field in enumerate(fields):
        names.setdefault(field, i)
        alias = {"image": "images", "label": "labels"}.get(_kind(field))
        if alias is not None:
            names.setdefault(alias, i)
    cls = type("Batch", (Batch,), {"__slots__": (), "_fields": keys, "_names": names,
                                   "_spec": spec, "__module__": __name__})
    _classes[spec] = cls
    return cls


def _rebuild(spec: Tuple[Tuple[str, ...], Tuple[str, ...]], columns: Tuple[Any, ...]) -> Batch:
    return _batch_class(*spec)(*columns)


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
