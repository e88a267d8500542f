"""Stability training (Li, Chen, Wang and Carin, NeurIPS 2019), as the Jeong-lineage baseline implements it.

Li et al. add a stability term between the prediction on the clean input and on a noisy copy (Zheng et al.'s
stability training) to the classification loss. The baseline every later table reports is ``train_stab.py`` of
``jh-jeong/smoothing-consistency`` (copied unchanged into SmoothMix and CAT-RS); this module reproduces it.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor

from rsbench.archs.classifier import Classifier
from rsbench.methods.base import Batch, OptimizerFactory, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_float


def soft_cross_entropy(logits: Tensor, target_logits: Tensor) -> Tensor:
    """Per-row cross-entropy ``-sum_c softmax(target_logits)_c * log_softmax(logits)_c`` (no detach).

    Args:
        logits: the predicted logits ``[B, C]``.
        target_logits: the logits whose softmax is the soft target ``[B, C]``; gradients flow into them too.
    """
    return -(F.softmax(target_logits, dim=1) * F.log_softmax(logits, dim=1)).sum(dim=1)


class StabilityTraining(SmoothingModule):
    r"""Stability training: ``CE(f(x), y) + lbd * CE_soft(softmax(f(x)), f(x + eps))``, batch means.

    With logits ``z = f(x)`` of the clean images and ``z~ = f(x + eps)`` of one noisy copy per image
    (``eps ~ N(0, sigma^2 I)``, fresh every batch, never clamped), the loss is

        L = mean_i [ CE(z_i, y_i) + lbd * H(softmax(z_i), softmax(z~_i)) ],
        H(p, q) = -sum_c p_c log q_c = KL(p || q) + H(p),

    exactly as ``train_stab.py`` computes it. The clean and the noisy batch go through the network in two
    separate forward passes (so BatchNorm sees each batch on its own), and training accuracy is measured on the
    noisy logits, as there. One optimizer step per loader batch.

    Where the code differs from the papers' text (the code is followed):

    * the cross-entropy term uses the **clean** input ``x``, not ``x + eps`` (the issue text and some summaries say
      noisy);
    * the stability term is the soft cross-entropy ``H(p_clean, p_noisy)``, not the KL divergence
      ``KL(p_clean || p_noisy)`` of Zheng et al.: it equals the KL plus the entropy of the clean prediction;
    * the soft target ``softmax(f(x))`` is **not detached**, so the stability term also trains the clean branch
      (including through that entropy term).

    Args:
        net: the base classifier.
        sigma: the training noise level.
        optimizer: the optimizer factory.
        lbd: lambda, the weight of the stability term (>= 0); the baselines use 2 (1 for CIFAR-10 at sigma 1.0).
        **kwargs: the other arguments of :class:`SmoothingModule` (scheduler, steps_per_batch, ...).
    """

    method_name = "stability"

    def __init__(
        self, net: Classifier, sigma: float, optimizer: OptimizerFactory, *, lbd: float = 2.0, **kwargs: Any
    ) -> None:
        lbd = check_float("method.lbd (lambda, the stability weight)", lbd)
        super().__init__(net, sigma, optimizer, **kwargs)
        self.lbd = lbd

    def training_loss(self, batch: Batch) -> StepOutput:
        """``CE(f(x), y) + lbd * H(softmax(f(x)), softmax(f(x + eps)))`` over the batch."""
        clean_logits = self(batch.x)
        noisy_logits = self(self.add_noise(batch.x, sigma=batch.sigma))
        cross_entropy = F.cross_entropy(clean_logits, batch.y)
        stability = soft_cross_entropy(noisy_logits, clean_logits).mean()
        return StepOutput(
            loss=cross_entropy + self.lbd * stability,
            logits=noisy_logits,
            labels=batch.y,
            terms={"cross_entropy": cross_entropy, "stability": stability},
        )
