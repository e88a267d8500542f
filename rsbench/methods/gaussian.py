"""Gaussian data augmentation (Cohen, Rosenfeld and Kolter, ICML 2019, Section 3.4)."""

from __future__ import annotations

import torch.nn.functional as F

from rsbench.methods.base import Batch, SmoothingModule, StepOutput


class GaussianAugmentation(SmoothingModule):
    """Cross-entropy of the base classifier on x + eps, eps ~ N(0, sigma^2 I) drawn fresh for every batch.

    As in Cohen et al.'s ``train.py``: one noisy copy per image, no clamping of the noisy input.
    """

    method_name = "gaussian"

    def training_loss(self, batch: Batch) -> StepOutput:
        """CE(f(x + eps), y), averaged over the batch."""
        logits = self(self.add_noise(batch.x, sigma=batch.sigma))
        return StepOutput(loss=F.cross_entropy(logits, batch.y), logits=logits, labels=batch.y)
