import os
from typing import (
    Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, SupportsIndex, Tuple, Type,
    TypedDict, Union, overload,
)

import numpy as np
import numpy.typing as npt

__version__: str

class LoaderState(TypedDict, total=False):
    epoch: int
    generation: int
    samples: int
    # The epoch's plan records up to `generation`: [generation, epoch, world]
    # or [generation, epoch, world, from_generation, from_samples]. Absent in
    # states saved by older versions.
    history: List[List[int]]
    # The digest of the job's plan (seed, batch size, shuffle buffer, mix,
    # dataset layout) the state was saved under: a state of another plan is
    # refused by load_state_dict.
    plan: int

class FetchLatency(TypedDict):
    p50: Optional[float]
    p90: Optional[float]
    p99: Optional[float]
    buckets: List[Tuple[float, int]]  # (upper bound in s, reads at or below it), last +inf
    count: int
    sum: float

class CacheMetrics(TypedDict):
    """The shard cache's counters in this process (all 0 without one)."""
    hits: int  # range reads served from the cache
    hit_bytes: int
    misses: int  # range reads sent to the object store
    miss_bytes: int
    fills: int  # whole shards written into the cache
    fill_bytes: int
    evictions: int  # entries evicted to stay within cache_limit
    corrupt: int  # cached files that did not match the manifest (deleted)
    errors: int  # fills or cache reads that failed (the store served)

class LoaderMetrics(TypedDict):
    samples: int  # handed to the trainer
    samples_per_second: float  # since the loader started
    batches: int
    bytes: int  # read by the fetch stage (object store or shard cache)
    bytes_per_second: float
    fetch_requests: int  # object-store reads completed
    requests_in_flight: int
    fetch_latency_seconds: FetchLatency  # one object-store read; pXX None before the first
    parse_seconds_per_sample: float
    decode_seconds_per_sample: float  # decode and augment, summed over threads
    data_wait: float  # 0..1: time waiting for a batch / time since the first next()
    data_wait_seconds: float
    bad_samples_skipped: int
    cache: CacheMetrics

class Source:
    """One dataset of a mix: its manifest URL and at most one of ``weight``
    (a share of the epoch proportional to it: weight every source or none),
    ``samples`` (exactly this many per epoch) and ``repeat`` (passes per epoch,
    fractions allowed); none given: one pass. Each epoch takes exactly these
    counts, drawn afresh per (seed, epoch)."""

    url: str
    weight: Optional[float]
    samples: Optional[int]
    repeat: Optional[float]

    def __init__(self, url: str, weight: Optional[float] = None,
                 samples: Optional[int] = None, repeat: Optional[float] = None) -> None: ...

class Transform:
    """What images become, as one argument of :class:`Loader`:
    ``transform=Transform("eval", size=256, dtype="uint8")`` is
    ``transform="eval", image_size=256, dtype="uint8"``. Each option is the
    loader keyword of the same name (``preset`` is ``transform=``, ``size``
    is ``image_size=``); None keeps the loader's default. An option given
    both here and as a loader keyword raises ``ValueError`` naming both."""

    preset: Optional[str]
    size: Optional[Union[int, Tuple[int, int]]]
    scale: Optional[Tuple[float, float]]
    ratio: Optional[Tuple[float, float]]
    flip: Optional[bool]
    crop_fraction: Optional[float]
    keep_aspect: Optional[bool]
    reduced_dct: Optional[bool]
    fill: Optional[int]
    dtype: Optional[str]
    layout: Optional[str]
    mean: Optional[Tuple[float, float, float]]
    std: Optional[Tuple[float, float, float]]

    def __init__(
        self,
        preset: Optional[str] = None,
        size: Optional[Union[int, Tuple[int, int]]] = None,
        scale: Optional[Tuple[float, float]] = None,
        ratio: Optional[Tuple[float, float]] = None,
        flip: Optional[bool] = None,
        crop_fraction: Optional[float] = None,
        keep_aspect: Optional[bool] = None,
        reduced_dct: Optional[bool] = None,
        fill: Optional[int] = None,
        dtype: Optional[str] = None,
        layout: Optional[str] = None,
        mean: Optional[Tuple[float, float, float]] = None,
        std: Optional[Tuple[float, float, float]] = None,
    ) -> None: ...
    def keywords(self) -> Dict[str, Any]:
        """The loader keywords this gives (those not None)."""

class Batch(Tuple[Any, ...]):
    """One batch: a tuple (``images, labels = batch``, ``batch[0]``) whose
    columns also answer to names. In order: one column per field of
    ``fields``, named as written without a trailing ``?`` (``batch["image"]``,
    ``batch.cls``; ``batch["cls?"]`` too), then ``ids`` (``return_ids=True``),
    ``sources`` (``return_sources=True``) and ``valid`` (``tail="pad"``).
    ``images`` and ``labels`` name the first image and ``cls`` field.
    Each loader has its own subclass; like a namedtuple's, its constructor
    takes the columns positionally."""

    _fields: Tuple[str, ...]

    def __new__(cls, *columns: Any) -> "Batch": ...
    @staticmethod
    def of(fields: Sequence[str], extras: Sequence[str] = ()) -> Type["Batch"]:
        """The class of batches with these fields (as written in
        ``fields=``), then these extras (``"ids"``, ``"sources"``,
        ``"valid"``, in that order)."""
    @classmethod
    def _make(cls, columns: Sequence[Any]) -> "Batch": ...
    def _asdict(self) -> Dict[str, Any]: ...
    @overload
    def __getitem__(self, key: str) -> Any: ...
    @overload
    def __getitem__(self, key: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, key: slice) -> Tuple[Any, ...]: ...
    def __getattr__(self, name: str) -> Any: ...

class Loader:
    """A rank's data loader.

    Iterating yields a :class:`Batch`: one value per field of ``fields`` (by default
    ``("image", "cls?")``, so ``(images, labels)``: float32 ``N x 3 x S x S``
    images, normalised with the ImageNet mean and std after
    RandomResizedCrop(S) and a random flip, and int64 labels, -1 where a
    sample has none), then the sample ids with ``return_ids=True``, then each
    sample's dataset (int32 positions in the mix) with
    ``return_sources=True``, then a bool validity mask with ``tail="pad"``. Arrays own the Rust buffers they
    were decoded into: nothing is copied. Iterating again after an epoch ends
    starts the next epoch. ``epochs=None`` (the default) gives as many
    epochs as the loop asks for; with ``epochs=N`` the job is finished once
    every rank read epoch N-1, and iterating again raises ``RuntimeError``
    naming ``epochs=N`` (never an empty epoch). An unshuffled loader reads
    its split again on every pass.

    Fields, by extension: images (``jpg``, ``jpeg``, ``png``, ``webp``,
    ``image`` for any of them; the format is read from the bytes) become one
    array through the transform (a list of arrays with ``transform="none"``);
    ``cls`` an int64 array; ``txt`` a list of str; ``json`` a list of parsed
    values; ``npy`` one stacked array when every dtype and shape agree, else a
    list of arrays; anything else a list of read-only ``memoryview``s sharing
    the bytes as read. ``"a;b"`` takes the first of two extensions a sample
    has; ``"name?"`` allows samples without it (None, or -1 for ``cls``).

    Raises ``ValueError`` for bad arguments, ``FileNotFoundError`` for a
    dataset or job that does not exist, ``ConnectionError`` when the
    coordinator or object store cannot be reached.
    """

    def __init__(
        self,
        dataset: Union[str, Sequence[Union[Source, str]]],
        *,
        coordinator: Optional[str] = None,
        job: str = "default",
        batch_size: int = 64,
        image_size: Union[int, Tuple[int, int]] = 224,
        seed: int = 0,
        mode: str = "sync",
        epochs: Optional[int] = None,
        shuffle_buffer: int = 1024,
        decode_threads: Optional[int] = None,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        run_id: Optional[str] = None,
        restart_count: Optional[int] = None,
        name: Optional[str] = None,
        storage_options: Optional[Mapping[str, str]] = None,
        timeout_s: float = 60.0,
        return_ids: bool = False,
        worker: Optional[Tuple[int, int]] = None,
        epoch: Optional[int] = None,
        auth_token: Optional[str] = None,
        lookahead: Optional[int] = None,
        on_lease_lost: str = "rejoin",
        on_error: str = "raise",
        max_bad_fraction: float = 0.01,
        max_batch_mib: Optional[int] = None,
        member_secret: Optional[str] = None,
        transform: Union[str, Transform] = "train",
        scale: Tuple[float, float] = (0.08, 1.0),
        ratio: Tuple[float, float] = (0.75, 4.0 / 3.0),
        flip: bool = True,
        crop_fraction: float = 0.875,
        keep_aspect: bool = False,
        reduced_dct: bool = False,
        fill: int = 0,
        dtype: str = "float32",
        layout: str = "NCHW",
        mean: Tuple[float, float, float] = (0.485, 0.456, 0.406),
        std: Tuple[float, float, float] = (0.229, 0.224, 0.225),
        fields: Optional[Union[Sequence[str], str]] = None,
        shuffle: bool = True,
        tail: str = "uneven",
        metrics_port: Optional[int] = ...,
        epoch_samples: int = 0,
        return_sources: bool = False,
        cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        cache_limit: Optional[int] = None,
        sequence_length: Optional[int] = None,
        packing: str = "concat",
        token_dtype: str = "int64",
        data_parallel: Optional[Tuple[int, int]] = None,
        map: Optional[Callable[[tuple], Any]] = None,
        batch_map: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        """``coordinator``: "host:port[,host:port...]" of the replicas, or None:
        an in-process one for one rank; under torchrun (``WORLD_SIZE`` > 1)
        the one rank 0 hosts on ``MASTER_ADDR``, port ``MASTER_PORT + 1``
        (or ``TRIBUTARY_COORDINATOR_PORT``), which the other ranks wait for
        up to ``timeout_s`` and which dies with rank 0 (a shared coordinator
        is the choice for restarts and preemption); "https://host:port" speaks TLS,
        trusting the CA file in ``TRIBUTARY_TLS_CA`` (else the system's roots)
        and checking every replica's certificate for the first address's host
        (or ``TRIBUTARY_TLS_DOMAIN``). ``storage_options``: object-store
        settings (``aws_endpoint``, ``aws_region``, ...) on top of the
        environment's. ``timeout_s``: how long calls retry an unreachable
        coordinator or a leader change before raising ``ConnectionError``.
        ``return_ids``: yield ``(images, labels, ids)`` (``batch.ids``), ids being the
        dataset-wide uint64 sample ids (for logging what was trained).
        ``sequence_length``: read a token dataset (``tributary pack CORPUS
        OUT --tokenizer T``, or Megatron ``.bin``/``.idx`` files indexed with
        ``tributary index``) as rows of this many tokens; every count of the
        job (``batch_size``, commits, dynamic units, a mix's takes) is then
        in rows. ``packing``: ``"concat"`` (pretraining: documents in a
        seeded order cut into windows of ``sequence_length + 1`` tokens
        across document boundaries), ``"bestfit"`` (fine-tuning: whole
        documents packed into rows, padding labelled -100) or ``"none"``
        (one document per row, truncated or padded, with an attention
        mask). A batch is ``(input_ids, labels, position_ids, document_ids)``
        (``B x sequence_length``, ``token_dtype`` int64 or int32); ``fields``
        may pick and order these and ``attention_mask`` (uint8) and
        ``cu_seqlens`` (int32, over the flattened batch).
        ``dataset``: a URL, or a list of :class:`Source` to mix: every epoch
        takes from each what it says (weights split ``epoch_samples``
        samples, by default all sources' together), planned by the
        coordinator like one dataset (sync resume, dynamic leases and
        exactly-once acks work alike); ids are then positions in the mix
        (unique within an epoch) and ``return_sources=True`` adds each
        sample's source (its position in the list). ``shuffle=False`` reads
        every source once, in list order.
        ``worker=(id, count)``: this is DataLoader worker process ``id`` of
        ``count``; in sync mode it decodes and yields only batches ``id``,
        ``id + count``, ... of the rank's part (``tributary.torch`` passes it).
        ``epoch``: sync mode, the epoch to read first instead of the
        generation's (the generation's epoch or the next one).
        ``auth_token``: the bearer token sent on every coordinator call
        (coordinators run with ``--auth-token-file``); by default the
        contents of the file ``TRIBUTARY_AUTH_TOKEN_FILE`` names (a mounted
        Kubernetes Secret, whitespace trimmed) or ``TRIBUTARY_AUTH_TOKEN``.
        For mutual TLS the client presents ``TRIBUTARY_TLS_CLIENT_CERT`` with
        the key ``TRIBUTARY_TLS_CLIENT_KEY`` (PEM files).
        ``lookahead``: dynamic mode, the most samples the member holds leased
        and not yet yielded (default: what its pipeline holds when full, and
        one unit); units it does not hold stay free for members that join.
        ``on_lease_lost``: dynamic mode, what a member the coordinator forgot
        (frozen past its TTL) does: ``"rejoin"`` drops what it held (others
        read it) and joins again as a new member, going on with the job's
        current epoch; ``"raise"`` raises ``RuntimeError``.
        ``on_error``: what a sample that cannot be decoded does (no image
        field, not a JPEG, PNG or WebP by its bytes, a field that does not parse, over the pixel limit, a
        decoder failure, a truncated JPEG, a chunk whose checksum fails: all
        its samples): ``"raise"`` raises ``RuntimeError`` naming its
        shard, the byte offset of its chunk and its key; ``"skip"`` leaves it
        out of its batch (which comes out one sample short: every rank still
        yields the same number of batches, in the same order for the same
        seed) and logs it, until more than ``max_bad_fraction`` of the
        epoch's samples were bad, which raises ``RuntimeError``.
        ``max_batch_mib``: the most one batch may hold, in MiB (its image
        buffer, and the bytes its samples carry into their fields): a
        loader holds several batches, so this is a budget that fits the
        machine; by default 2 GiB or an eighth of its memory, the smaller.
        A setting whose batches cannot fit raises ``ValueError`` naming it.
        ``member_secret``: 32 hex digits or more that processes sharing one
        identity (a rank's DataLoader workers) join with, so each may replace
        the others' membership; ``tributary.torch`` passes one. By default the
        coordinator chooses the secret.
        ``transform``: what images become, a preset name or a
        :class:`Transform` grouping the options below. ``"train"``: RandomResizedCrop
        (``scale``, ``ratio``) to ``image_size`` and, with ``flip``, a
        horizontal flip with probability 1/2, all seeded by (seed, epoch,
        sample id). ``"eval"``: torchvision's ``Resize(int(min(image_size) /
        crop_fraction))`` then ``CenterCrop(image_size)``, antialiased.
        ``"resize"``: the whole image to ``image_size`` (with
        ``keep_aspect``, fitted inside it and padded with ``fill``).
        ``reduced_dct``: let ``"eval"`` and ``"resize"`` decode a JPEG at
        1/2, 1/4 or 1/8 scale where the part shown is at least twice
        ``image_size`` (several times faster on large photos, pixels
        slightly off a full decode's; ``"train"`` always does).
        ``"none"``: as decoded, a list of arrays of their own sizes.
        ``image_size``: an int (square) or ``(height, width)``.
        ``dtype``: ``"float32"`` (``(v / 255 - mean) / std``) or ``"uint8"``
        (raw pixels, 4x less to copy to the GPU: normalise there with
        ``tributary.torch.normalize``). ``layout``: ``"NCHW"`` or ``"NHWC"``
        (channels last).
        ``fields``: the fields a batch carries, in order (see above).
        ``shuffle=False``: evaluation reading. The dataset is read in
        manifest order, with no shuffle buffer and no coordinator (a
        ``coordinator`` argument is not used): rank r of W (torchrun's, or
        ``rank``/``world_size``) reads the r-th contiguous part, and every
        sample is read exactly once across the ranks on every pass.
        ``tail``: how the parts even out when W does not divide the samples:
        ``"uneven"`` (default: the first N % W ranks read one sample more, so
        their last batch may differ) or ``"pad"`` (every rank reads
        ceil(N / W); the short ones repeat their last sample, and a bool mask
        after the fields marks it invalid, so equal batch counts never count a
        sample twice).
        ``map``/``batch_map``: Python callables applied to each sample (a
        tuple in field order; the results are collated) and to each batch,
        in this process. The native path does not pay for them when absent.
        ``metrics_port``: serve the rank's Prometheus metrics
        (``tributary_rank_*``, labelled ``job`` and ``rank``; see
        ``docs/METRICS.md``) at ``GET /metrics`` on this port (0: any free
        port; see ``metrics_address``) for as long as the loader lives;
        ``None``: none. Not given: the port in ``TRIBUTARY_METRICS_PORT``
        (unset or empty: none). The host bound is ``TRIBUTARY_METRICS_HOST``,
        by default ``0.0.0.0`` so that a Prometheus PodMonitor reaches it. A
        port in use raises ``OSError``; a bad value ``ValueError``. DataLoader
        worker processes (``worker=``) serve none: the process that iterates
        does, and counts what its own loader reads.

        ``cache_dir``, ``cache_limit``: keep fetched shards as whole files in
        this local directory, within ``cache_limit`` bytes (least recently
        used files evicted; a shard larger than the limit is never cached).
        The ranks and DataLoader workers of a node may share one directory
        (file locks keep it within the limit); entries survive a restart and
        are checked against the manifest's crc32c before reuse. A miss reads
        from the store at once and caches the shard in the background, so
        the epochs after the first read from local disk. Not given:
        ``TRIBUTARY_CACHE_DIR`` and ``TRIBUTARY_CACHE_LIMIT`` (which takes
        units: ``10GiB``); both or neither. A zero limit, or one without a
        directory, raises ``ValueError``; a directory that cannot be created
        ``OSError``.

        ``data_parallel=(dp_rank, dp_size)``: this rank's data-parallel group
        (``tributary.torch.data_parallel(mesh, "dp")`` reads it from a
        ``DeviceMesh``). The ranks of one group (tensor, pipeline or context
        parallel peers) receive identical batches, the ``dp_size`` groups
        disjoint parts: the coordinator plans over groups, so a restart with
        another ``dp_size`` resumes exactly like a changed world. Every rank
        of a world gives the same ``dp_size``, which divides the world size;
        a rank giving another is refused naming both. Sync mode only (also
        ``shuffle=False``: a group reads its group's part). None: every rank
        is a group of its own."""
    def __iter__(self) -> "Loader":
        """Starts the next epoch when the current one was read to its end."""
    def __next__(self) -> Batch:
        """The next batch (with ``map=``/``batch_map=``: what they return)."""
    def __len__(self) -> int:
        """Batches of this rank's part of the current generation."""
    def state_dict(self) -> LoaderState:
        """Where this rank stands; save it with a checkpoint."""
    def commit(self, state: LoaderState) -> None:
        """Tells the coordinator a checkpoint holding ``state`` is durable."""
    def load_state_dict(self, state: LoaderState) -> None:
        """Resumes from a restored checkpoint's state, before reading, under
        torchrun or not; raises ValueError saying what to do when the state is
        not the job's commit or batches were already read."""
    def set_epoch(self, epoch: int) -> None:
        """Starts ``epoch`` over from its first batch (sync mode): the epoch of
        the rank's generation, or the next one."""
    @property
    def coordinator(self) -> str:
        """The coordinator's address; with ``coordinator=None`` the in-process
        coordinator's, on loopback, or under torchrun the one rank 0 hosts."""
    @property
    def epoch(self) -> int: ...
    @property
    def generation(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def data_parallel(self) -> Tuple[int, int]:
        """``(dp_rank, dp_size)``: the part this rank reads and the number of
        parts (its data-parallel group; without one, its rank and world)."""
    @property
    def member(self) -> str: ...
    @property
    def metrics_address(self) -> Optional[str]:
        """``"host:port"`` where ``/metrics`` is served (the port chosen when
        0 was asked); None when it is not."""
    def metrics(self) -> LoaderMetrics:
        """The rank's counters over the loader's life (every epoch)."""

def collate(values: Sequence[Any]) -> Any:
    """A batch of per-sample results: tuples by position, dicts by key,
    same-shape arrays stacked, numbers into an array, else a list."""
def apply_maps(batch: tuple, map: Optional[Callable[[tuple], Any]],
               batch_map: Optional[Callable[[Any], Any]],
               collate_fn: Callable[[Sequence[Any]], Any] = ...) -> Any: ...
