"""Training progress as log lines in a non-interactive run (a pipe, ``nohup``, SLURM), where a bar shows nothing.

Lightning's bar redraws one terminal line; written to a file it is nothing for minutes, then one long line. In such a
run :func:`rsbench.runs.run.run` turns the bar off and adds :class:`TrainingProgress`, which logs
``epoch 3/20, batch 120/157: train/loss 0.53, 1,230 images/s, about 10 s left in the epoch, about 4 min left in the
run`` every :func:`rsbench.certify.pipeline.progress.log_interval` seconds and one line at the end of each epoch.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytorch_lightning as pl

from rsbench.certify.pipeline.progress import duration, log_interval

log = logging.getLogger("rsbench")


class TrainingProgress(pl.Callback):
    """Log training progress: epoch, batch, loss, images per second and the time left, at an interval."""

    def __init__(self, interval: float | None = None) -> None:
        self.interval = log_interval() if interval is None else interval
        self._last = 0.0
        self._epoch_start = 0.0
        self._images = 0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Start the epoch's clock."""
        self._epoch_start = self._last = time.monotonic()
        self._images = 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Count the batch; log a line when the interval has passed."""
        self._images += _batch_size(batch)
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            log.info("%s", self.line(trainer, batch_idx + 1, now))

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """One line per epoch, with its loss and its time."""
        now = time.monotonic()
        loss = _metric(trainer, "train/loss_epoch", "train/loss")
        rate = self._images / (now - self._epoch_start) if now > self._epoch_start else 0.0
        log.info(
            "epoch %d/%s done in %s: %s%.0f images/s%s",
            trainer.current_epoch + 1,
            trainer.max_epochs,
            duration(now - self._epoch_start),
            f"train/loss {loss:.4g}, " if loss is not None else "",
            rate,
            self._run_left(trainer, now - self._epoch_start, 1.0),
        )

    def line(self, trainer: pl.Trainer, batches: int, now: float) -> str:
        """``epoch e/E, batch b/B: loss, images/s, time left``."""
        total = trainer.num_training_batches
        elapsed = now - self._epoch_start
        rate = self._images / elapsed if elapsed > 0 else 0.0
        text = f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}, batch {batches}/{total}"
        loss = _metric(trainer, "train/loss_step", "train/loss")
        text += f": train/loss {loss:.4g}" if loss is not None else ":"
        text += f", {rate:.0f} images/s"
        if isinstance(total, int) and 0 < batches < total:
            epoch_left = elapsed / batches * (total - batches)
            text += f", about {duration(epoch_left)} left in the epoch"
            text += self._run_left(trainer, elapsed, batches / total)
        return text

    @staticmethod
    def _run_left(trainer: pl.Trainer, elapsed: float, done: float) -> str:
        """``, about <time> left in the run``: the epochs still to train, at this epoch's pace.

        ``done`` is the fraction of the current epoch behind.
        """
        if trainer.max_epochs is None or trainer.max_epochs < 0 or done <= 0:
            return ""
        epochs_left = trainer.max_epochs - trainer.current_epoch - done
        return f", about {duration(elapsed / done * epochs_left)} left in the run" if epochs_left > 0 else ""


def _batch_size(batch: Any) -> int:
    first = batch[0] if isinstance(batch, list | tuple) else batch
    return int(first.shape[0]) if hasattr(first, "shape") else 0


def _metric(trainer: pl.Trainer, *names: str) -> float | None:
    for name in names:
        value = trainer.callback_metrics.get(name)
        if value is not None:
            return float(value)
    return None
