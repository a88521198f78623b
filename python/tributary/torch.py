"""PyTorch adapters: batches as torch tensors that share Tributary's buffers.

    ds = tributary.torch.IterableDataset("s3://bucket/ds", coordinator="coord:7070", job="resnet")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=True)
    for epoch in range(epochs):
        for images, labels in loader:   # float32 N x 3 x S x S, int64 N
            ...

`torch.from_numpy` wraps the numpy arrays, which own the Rust buffers: no
copy on the way to the trainer (pinning, when asked for, is the one copy).
Tributary batches, shuffles and decodes on its own threads, so use the
DataLoader with ``batch_size=None`` and ``num_workers=0`` (or 1: the loader
then runs in the forked worker, its native state rebuilt after the fork).
More workers are refused with a clear error: each would read the rank's
whole part.
"""

from typing import Any, Iterator, Optional, Tuple

import torch
import torch.utils.data

from ._tributary import Loader

__all__ = ["IterableDataset", "tensors"]


def tensors(batch: Tuple[Any, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(images, labels)`` numpy arrays to tensors sharing their memory."""
    images, labels = batch
    return torch.from_numpy(images), torch.from_numpy(labels)


class IterableDataset(torch.utils.data.IterableDataset):
    """A rank's Tributary loader as a ``torch.utils.data.IterableDataset``.

    Takes the arguments of :class:`tributary.Loader`. The loader starts on
    first iteration (so a DataLoader may pickle the dataset beforehand) and
    each iteration reads one epoch; ``len()`` is the batches of the current
    generation.
    """

    def __init__(self, dataset: str, **kwargs: Any) -> None:
        super().__init__()
        self._args = (dataset, kwargs)
        self._loader: Optional[Loader] = None

    @property
    def loader(self) -> Loader:
        if self._loader is None:
            dataset, kwargs = self._args
            self._loader = Loader(dataset, **kwargs)
        return self._loader

    def __getstate__(self):
        # The native loader is per process: a copy starts its own.
        return {"_args": self._args, "_loader": None}

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        worker = torch.utils.data.get_worker_info()
        if worker is not None and worker.num_workers > 1:
            raise RuntimeError(
                f"tributary.torch.IterableDataset under DataLoader(num_workers={worker.num_workers}): "
                "every worker would read the rank's whole part. Tributary decodes on its own "
                "threads (decode_threads=...); use num_workers=0, or 1 to keep it in a child process"
            )
        for batch in self.loader:
            yield tensors(batch)

    def __len__(self) -> int:
        return len(self.loader)

    def state_dict(self):
        return self.loader.state_dict()

    def commit(self, state) -> None:
        self.loader.commit(state)

    def load_state_dict(self, state) -> None:
        self.loader.load_state_dict(state)
