"""Tributary: a data loader for distributed deep-learning training.

One call per rank::

    loader = tributary.Loader("s3://bucket/ds", coordinator="coord:7070", job="resnet",
                              batch_size=256, seed=42)
    for epoch in range(epochs):
        for images, labels in loader:   # numpy arrays owning Rust buffers
            ...
        # checkpoint: save loader.state_dict() with the model, then
        loader.commit(state)

Rank, world size, run id and restart count come from torchrun's environment
(RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT) unless
passed. With ``coordinator=None`` the loader runs a coordinator in-process on
the in-memory store (one rank). ``tributary.torch`` adapts it to PyTorch.
"""

from ._tributary import Loader, __version__

__all__ = ["Loader", "__version__"]
