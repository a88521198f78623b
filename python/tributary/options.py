"""Grouped arguments of :class:`tributary.Loader`: the datasets of a mix
(:class:`Source`) and what images become (:class:`Transform`)."""

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union

__all__ = ["Source", "Transform"]


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


def dataset_arg(dataset: Any) -> Any:
    """A URL as it is; a list of :class:`Source` (or URLs) as ``(url, take)``
    pairs for the native loader."""
    if isinstance(dataset, (str, os.PathLike)):
        return os.fspath(dataset)
    try:
        sources = list(dataset)
    except TypeError:
        raise TypeError(f"dataset must be a URL or a list of tributary.Source, not {type(dataset).__name__}") from None
    pairs: List[Tuple[str, str]] = []
    for source in sources:
        if isinstance(source, str):
            source = Source(source)
        if not isinstance(source, Source):
            raise TypeError(f"dataset: a mix lists tributary.Source (or URLs), not {type(source).__name__}")
        pairs.append((source.url, source._take()))
    return pairs


@dataclass(frozen=True)
class Transform:
    """What images become, as one argument: ``Loader(url,
    transform=Transform("eval", size=256, dtype="uint8"))`` is
    ``Loader(url, transform="eval", image_size=256, dtype="uint8")``.

    Each option is the :class:`tributary.Loader` keyword of the same name
    (``preset`` is ``transform=``, ``size`` is ``image_size=``); those left
    None keep the loader's default. Giving an option both here and as the
    loader's keyword raises ``ValueError``. The loader checks the values.

    ``preset``: ``"train"`` (RandomResizedCrop with ``scale``, ``ratio``,
    then a horizontal ``flip``), ``"eval"`` (resize to ``size /
    crop_fraction``, then a centre crop), ``"resize"`` (the whole image,
    fitted inside with ``keep_aspect`` and padded with ``fill``) or
    ``"none"`` (as decoded); ``reduced_dct=True`` lets ``eval`` and
    ``resize`` decode large JPEGs at 1/2, 1/4 or 1/8 scale (faster, pixels
    slightly off torchvision's). ``size``: an int (square) or ``(height,
    width)``. ``dtype``: ``"float32"`` (normalised with ``mean``, ``std``)
    or ``"uint8"``. ``layout``: ``"NCHW"`` or ``"NHWC"``.
    """

    preset: Optional[str] = None
    size: Optional[Union[int, Tuple[int, int]]] = None
    scale: Optional[Tuple[float, float]] = None
    ratio: Optional[Tuple[float, float]] = None
    flip: Optional[bool] = None
    crop_fraction: Optional[float] = None
    keep_aspect: Optional[bool] = None
    reduced_dct: Optional[bool] = None
    fill: Optional[int] = None
    dtype: Optional[str] = None
    layout: Optional[str] = None
    mean: Optional[Tuple[float, float, float]] = None
    std: Optional[Tuple[float, float, float]] = None

    def keywords(self) -> Dict[str, Any]:
        """The loader keywords this gives (those not None)."""
        return {_KEYWORD.get(f.name, f.name): getattr(self, f.name)
                for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


# Transform's options named otherwise as loader keywords.
_KEYWORD = {"preset": "transform", "size": "image_size"}
_OPTION = {keyword: option for option, keyword in _KEYWORD.items()}


def expand_transform(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The loader's keywords with ``transform=Transform(...)`` spread out
    into the flat keywords it stands for; an option given both ways is an
    error naming both."""
    transform = kwargs.get("transform")
    if not isinstance(transform, Transform):
        return kwargs
    flat = {k: v for k, v in kwargs.items() if k != "transform"}
    for keyword, value in transform.keywords().items():
        if keyword in flat:
            option = _OPTION.get(keyword, keyword)
            raise ValueError(f"{keyword}={flat[keyword]!r} and transform=Transform({option}={value!r}) "
                             f"both set the {option}: give it once")
        flat[keyword] = value
    return flat


_U8, _U32, _U64 = 2**8 - 1, 2**32 - 1, 2**64 - 1

# Every numeric keyword of the native loader: (kind, count, low, high) where
# kind is "int" or "float", count the number of values (1: a number, n: an
# n-tuple), and a float's low bound is exclusive when ``low`` is a
# 1-tuple. None (where the native loader accepts it) is left to it.
NUMERIC_KEYWORDS: Dict[str, Tuple[str, int, Any, Any]] = {
    "batch_size": ("int", 1, 1, _U32),
    "seed": ("int", 1, 0, _U64),
    "epochs": ("int", 1, 0, _U64),
    "shuffle_buffer": ("int", 1, 0, _U32),
    "decode_threads": ("int", 1, 1, _U64),
    "rank": ("int", 1, 0, _U32),
    "world_size": ("int", 1, 1, _U32),
    "restart_count": ("int", 1, 0, _U64),
    "timeout_s": ("float", 1, (0.0,), math.inf),
    "worker": ("int", 2, 0, _U64),
    "epoch": ("int", 1, 0, _U64),
    "lookahead": ("int", 1, 0, _U64),
    "max_bad_fraction": ("float", 1, 0.0, 1.0),
    "max_batch_mib": ("int", 1, 1, 16384),
    "scale": ("float", 2, (0.0,), 1.0),
    "ratio": ("float", 2, (0.0,), math.inf),
    "crop_fraction": ("float", 1, (0.0,), 1.0),
    "fill": ("int", 1, 0, _U8),
    "mean": ("float", 3, -math.inf, math.inf),
    "std": ("float", 3, (0.0,), math.inf),
    "epoch_samples": ("int", 1, 0, _U64),
    "cache_limit": ("int", 1, 0, _U64),
    "metrics_port": ("int", 1, 0, 65535),
    "sequence_length": ("int", 1, 1, 2**20),
    "data_parallel": ("int", 2, 0, _U32),
}

# What a keyword takes, where its range alone would not say it.
_TAKES = {"metrics_port": "a port number (an int from 0 to 65535)",
          "data_parallel": f"a (dp_rank, dp_size) pair of ints from 0 to {_U32}"}


class KeywordTypeError(TypeError, ValueError):
    """A keyword argument of the wrong type: a ``TypeError``, and a
    ``ValueError`` as the native checks raised before (code that catches
    either keeps working)."""


def _describe_range(kind: str, count: int, low: Any, high: Any) -> str:
    """``"an int from 1 to 4294967295"``, ``"a tuple of 2 numbers, each
    above 0 and at most 1"``, ..."""
    fmt = (lambda v: f"{v:g}") if kind == "float" else str
    if isinstance(low, tuple):
        lower = f"above {fmt(low[0])}"
    elif low == -math.inf:
        lower = ""
    else:
        lower = f"from {fmt(low)}"
    if high == math.inf:
        upper = ""
    elif lower.startswith("from"):
        upper = f"to {fmt(high)}"
    else:
        upper = f"at most {fmt(high)}"
    bounds = (" and " if lower.startswith("above") else " ").join(b for b in (lower, upper) if b)
    noun = "int" if kind == "int" else "finite number"
    if count == 1:
        return f"{'an' if kind == 'int' else 'a'} {noun}{' ' if bounds else ''}{bounds}"
    return f"a tuple of {count} {noun}s{', each ' if bounds else ''}{bounds}"


def _in_range(value: Any, kind: str, low: Any, high: Any) -> Optional[str]:
    """Why ``value`` is not a number of ``kind`` in the range (None: it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind == "float" else int):
        return "type"
    if kind == "float" and not math.isfinite(value):
        return "range"
    if isinstance(low, tuple):
        if not value > low[0]:
            return "range"
    elif value < low:
        return "range"
    return "range" if value > high else None


def check_numbers(kwargs: Dict[str, Any]) -> None:
    """Checks every numeric keyword of :class:`tributary.Loader` in
    ``kwargs``: a :class:`KeywordTypeError` (not a number: a ``TypeError``,
    and a ``ValueError`` as before) or ``ValueError`` (out of
    range) that names the keyword and what it takes, instead of the
    ``OverflowError`` a conversion to Rust's integers raises naming nothing."""
    for name, (kind, count, low, high) in NUMERIC_KEYWORDS.items():
        value = kwargs.get(name)
        if value is None:
            continue
        takes = _TAKES.get(name) or _describe_range(kind, count, low, high)
        values: Any = (value,)
        if count > 1:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != count:
                raise KeywordTypeError(f"{name} must be {takes}, not {value!r}")
            values = tuple(value)
        problems = [_in_range(v, kind, low, high) for v in values]
        if any(problems):
            error = KeywordTypeError if "type" in problems else ValueError
            raise error(f"{name} must be {takes}, not {value!r}")
    size = kwargs.get("image_size")
    if size is not None and not isinstance(size, (str, bytes)):
        sides = (size,) if not hasattr(size, "__len__") else tuple(size)
        problems = [_in_range(v, "int", 1, _U32) for v in sides] if len(sides) in (1, 2) else ["type"]
        if any(problems):
            error = KeywordTypeError if "type" in problems else ValueError
            raise error(f"image_size must be an int or (height, width), each from 1 to {_U32}, "
                        f"not {size!r}")
