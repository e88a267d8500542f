"""Standard (noise-free) training: the off-the-shelf classifier that denoised smoothing puts a denoiser in front of."""

from __future__ import annotations

import torch.nn.functional as F

from rsbench.methods.base import Batch, SmoothingModule, StepOutput


class StandardTraining(SmoothingModule):
    """Cross-entropy of the base classifier on the clean images, ``CE(f(x), y)``: no noise during training.

    Salman et al. (2020) certify classifiers trained this way, directly and through a denoiser. ``sigma`` is not
    used by the loss; it is the noise level the model is validated (``val/acc_noisy``) and certified at.
    """

    method_name = "standard"

    def training_loss(self, batch: Batch) -> StepOutput:
        """CE(f(x), y), averaged over the batch."""
        logits = self(batch.x)
        return StepOutput(loss=F.cross_entropy(logits, batch.y), logits=logits, labels=batch.y)
