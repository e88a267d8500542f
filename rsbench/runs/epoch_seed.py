"""Every training epoch starts from random state derived from the run's seed and the epoch number.

A run stopped mid-epoch resumes from its last end-of-epoch checkpoint (Lightning drops the partial epoch). Lightning
saves no random state with a checkpoint, and what draws random numbers between two epochs (validation noise) is not
repeated by a resumed run; so the resumed run would shuffle, noise and attack differently from the epoch it resumes
at on, and end with another model. Seeding Python's, NumPy's and torch's generators (every device) from
``(seed, epoch)`` just before each epoch's data iterator is made (the sampler draws its order, and the first batch is
fetched, from torch's generator then) makes each epoch's stream the same whether the run was stopped or not: the data
order, augmentation, the training noise and any attack's randomness, and dataloader workers (seeded from torch's
initial seed).

Where that is differs: a fit makes its first iterator while it sets up, after ``on_fit_start`` and before the hook
``on_train_epoch_start`` of its first epoch (epoch 0, or the epoch a resumed fit continues at); every later epoch makes
its iterator after that hook.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch

from rsbench.certify.algorithm.seeding import derive_seed

EPOCH_STREAM = 2  # a key that sets the training epochs' seeds apart from other uses of the run's seed


class EpochSeed(pl.Callback):
    """Seed Python, NumPy and torch from ``(seed, epoch)`` before each training epoch draws anything.

    Args:
        seed: the run's training seed (``seed``).
    """

    def __init__(self, seed: int) -> None:
        self.seed = int(seed) % 2**63  # (derive_seed takes keys >= 0)
        self._resumed_epoch: int | None = None  # the epoch a resumed fit continues at
        self._seeded_epoch: int | None = None  # the first epoch of this fit, seeded in on_fit_start

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """Note the epoch training continues at (the checkpoint's is the last complete one)."""
        self._resumed_epoch = int(checkpoint.get("epoch", -1)) + 1

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """A fit makes its first data iterator before any epoch hook: seed for its first epoch now."""
        self._seeded_epoch = self._resumed_epoch if self._resumed_epoch is not None else trainer.current_epoch
        self.seed_epoch(self._seeded_epoch)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Seed for epoch ``trainer.current_epoch`` (the fit's first epoch was seeded in ``on_fit_start``)."""
        if trainer.current_epoch == self._seeded_epoch:
            self._seeded_epoch = None
            return
        self.seed_epoch(trainer.current_epoch)

    def seed_epoch(self, epoch: int) -> None:
        """Seed every generator for ``epoch``."""
        seed = derive_seed(EPOCH_STREAM, self.seed, epoch)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)  # every device's generator
