from typing import Iterator, Mapping, Optional, Tuple, TypedDict

import numpy as np
import numpy.typing as npt

__version__: str

class LoaderState(TypedDict):
    epoch: int
    generation: int
    samples: int

class Loader:
    """A rank's data loader.

    Iterating yields ``(images, labels)``: float32 ``N x 3 x S x S`` images,
    normalised with the ImageNet mean and std after RandomResizedCrop(S) and a
    random flip, and int64 labels (-1 where a sample has none). Both arrays own
    the Rust buffers they were decoded into: nothing is copied. Iterating again
    after an epoch ends starts the next epoch; iteration ends at once when the
    job's epochs are done.

    Raises ``ValueError`` for bad arguments, ``FileNotFoundError`` for a
    dataset or job that does not exist, ``ConnectionError`` when the
    coordinator or object store cannot be reached.
    """

    def __init__(
        self,
        dataset: str,
        *,
        coordinator: Optional[str] = None,
        job: str = "default",
        batch_size: int = 64,
        image_size: int = 224,
        seed: int = 0,
        mode: str = "sync",
        epochs: int = 1,
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
        member_secret: Optional[str] = None,
    ) -> None:
        """``coordinator``: "host:port[,host:port...]" of the replicas, or None
        for an in-process one (one rank); "https://host:port" speaks TLS,
        trusting the CA file in ``TRIBUTARY_TLS_CA`` (else the system's roots)
        and checking every replica's certificate for the first address's host
        (or ``TRIBUTARY_TLS_DOMAIN``). ``storage_options``: object-store
        settings (``aws_endpoint``, ``aws_region``, ...) on top of the
        environment's. ``timeout_s``: how long calls retry an unreachable
        coordinator or a leader change before raising ``ConnectionError``.
        ``return_ids``: yield ``(images, labels, ids)``, ids being the
        dataset-wide uint64 sample ids (for logging what was trained).
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
        field, neither JPEG nor PNG by its bytes, over the pixel limit, a
        decoder failure): ``"raise"`` raises ``RuntimeError`` naming its
        shard, the byte offset of its chunk and its key; ``"skip"`` leaves it
        out of its batch (which comes out one sample short: every rank still
        yields the same number of batches, in the same order for the same
        seed) and logs it, until more than ``max_bad_fraction`` of the
        epoch's samples were bad, which raises ``RuntimeError``.
        ``member_secret``: 32 hex digits or more that processes sharing one
        identity (a rank's DataLoader workers) join with, so each may replace
        the others' membership; ``tributary.torch`` passes one. By default the
        coordinator chooses the secret."""
    def __iter__(self) -> Iterator[Tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]]: ...
    def __next__(self) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]: ...
    def __len__(self) -> int:
        """Batches of this rank's part of the current generation."""
    def state_dict(self) -> LoaderState:
        """Where this rank stands; save it with a checkpoint."""
    def commit(self, state: LoaderState) -> None:
        """Tells the coordinator a checkpoint holding ``state`` is durable."""
    def load_state_dict(self, state: LoaderState) -> None:
        """Checks a restored checkpoint against the job (raises ValueError if stale)."""
    def set_epoch(self, epoch: int) -> None:
        """Starts ``epoch`` over from its first batch (sync mode): the epoch of
        the rank's generation, or the next one."""
    @property
    def coordinator(self) -> str:
        """The coordinator's address; with ``coordinator=None`` the in-process
        coordinator's, on loopback."""
    @property
    def epoch(self) -> int: ...
    @property
    def generation(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def member(self) -> str: ...
