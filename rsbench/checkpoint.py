"""Reading checkpoints with errors that say which file is bad and what to do, and finding a run's own checkpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

from rsbench.errors import ConfigError, DamagedFileError
from rsbench.loading import read_plain


def load_checkpoint(path: str | Path, what: str, advice: str) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` on the CPU, or one clear error naming ``what`` and ``advice``.

    Raises:
        ConfigError: there is no file at ``path``.
        UnsafeFileError: the file holds objects other than tensors and plain values (the message says how to convert).
        DamagedFileError: the file is truncated, corrupt or not a Lightning checkpoint.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{what} is not a file")
    checkpoint = read_plain(path, what, named=what, advice=advice)  # no code runs from the file
    if not isinstance(checkpoint, Mapping) or "state_dict" not in checkpoint:
        raise DamagedFileError(f"{what} is not a Lightning checkpoint (no state_dict): {advice}")
    return dict(checkpoint)


def checkpoint_file(callbacks: Sequence[pl.Callback], which: str) -> Path | None:
    """Where the run's ``best`` (monitors a metric) or ``last`` (monitors none) checkpoint callback writes.

    ``None`` when the run has no such callback (``train=false``). See ``conf/callbacks/default.yaml``.
    """
    for callback in callbacks:
        if isinstance(callback, ModelCheckpoint) and (callback.monitor is None) == (which == "last"):
            if callback.dirpath is None or callback.filename is None:
                return None
            return Path(callback.dirpath) / f"{callback.filename}{callback.FILE_EXTENSION}"
    return None


def finished_training(checkpoint: Mapping[str, Any], max_epochs: int | None) -> bool:
    """Whether an end-of-epoch checkpoint is the last epoch of a ``max_epochs`` schedule (Lightning counts from 0)."""
    return max_epochs is not None and max_epochs >= 0 and int(checkpoint.get("epoch", -1)) + 1 >= max_epochs
