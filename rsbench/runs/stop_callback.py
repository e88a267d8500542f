"""``StopOnRequest``: end training or testing at a batch boundary once a stop signal arrived (:mod:`rsbench.stop`)."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl

from rsbench.stop import raise_if_stop_requested


class StopOnRequest(pl.Callback):
    """Raise :class:`~rsbench.stop.StopRequested` before the next batch once a stop was requested.

    A stop in the middle of an epoch drops that epoch: its checkpoint is never written, so ``last.ckpt`` stays the
    latest complete epoch and a resumed run repeats the dropped one from its start (Lightning cannot resume the
    middle of an epoch reliably).
    """

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        """Stop before a training batch."""
        raise_if_stop_requested()

    def on_validation_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Stop before a validation batch (the epoch is not checkpointed yet)."""
        raise_if_stop_requested()

    def on_test_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        """Stop before a test batch."""
        raise_if_stop_requested()
