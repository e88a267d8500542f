"""The run's training time: Lightning's ``Timer``, which a checkpoint loaded for testing can no longer change.

Lightning saves a ``Timer``'s state in every checkpoint and restores it whenever it loads one, also when it loads
``best.ckpt`` to test it: the timer then reported this session's training plus the time ``best.ckpt`` recorded, so a
run whose best epoch was not its last one counted the epochs up to the best twice (the default run: 371 s where its
``last.ckpt`` records 220 s), and a resumed one lost the epochs after its earlier best. :class:`TrainingClock` keeps
what training measured: the restore of the run's own ``last.ckpt`` when training resumes (the seconds of the epochs
before), then the session's own seconds, fixed when training ends; a checkpoint loaded after that is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Timer


class TrainingClock(Timer):
    """A ``Timer`` whose training seconds are the sum over the epochs trained, resumes included, and nothing else."""

    def __init__(self) -> None:
        super().__init__(verbose=False)
        self.trained: float | None = None

    @property
    def state_key(self) -> str:
        """``Timer``: checkpoints keep the clock where Lightning's ``Timer`` kept it (older runs resume with it)."""
        return Timer.__qualname__

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Fix the training seconds: the earlier sessions' (restored from ``last.ckpt``) plus this one's."""
        super().on_train_end(trainer, pl_module)
        self.trained = self.time_elapsed("train")

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the seconds a checkpoint recorded, unless training fixed them (then it is loaded to be tested)."""
        if self.trained is None:
            super().load_state_dict(dict(state_dict))

    def settle(self, state_dict: Mapping[str, Any]) -> None:
        """Fix the training seconds at those a finished run's ``last.ckpt`` recorded (it goes straight to testing)."""
        super().load_state_dict(dict(state_dict))
        self.trained = self.time_elapsed("train")

    def seconds(self) -> float:
        """The training seconds: fixed when training ended (or settled), else as measured so far."""
        return self.trained if self.trained is not None else self.time_elapsed("train")
