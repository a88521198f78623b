"""Grouped arguments of :class:`tributary.Loader`: the datasets of a mix
(:class:`Source`) and what images become (:class:`Transform`)."""

import dataclasses
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
    ``"none"`` (as decoded). ``size``: an int (square) or ``(height,
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
