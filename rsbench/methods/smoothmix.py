"""SmoothMix: confidence-calibrated mixup with unrestricted adversaries of the smoothed classifier.

Jeong, Park, Kim, Lee, Kim and Shin, "SmoothMix: Training Confidence-calibrated Smoothed Classifiers for Certified
Robustness", NeurIPS 2021.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.methods.attacks import MixIterates, copies, frozen, smoothed_probs, smoothmix_adversary
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_float, check_int, check_optional_float


def warmup_factor(warmup: int, epoch: int) -> float:
    """SmoothMix's warm-up value ``min(1, (epoch + 1) / warmup)`` (epochs from 0)."""
    return min(1.0, (epoch + 1) / warmup)


def mixup(init: Tensor, adv: Tensor, clean_probs: Tensor, lam: Tensor, num_classes: int) -> tuple[Tensor, Tensor]:
    """SmoothMix's mixed pairs (eqs. (9)-(10)): x_mix = (1 - lam) init + lam adv, y_mix = (1 - lam) F_hat + lam / C.

    Args:
        init: x (or the one-step adversary) ``[B, ...]``.
        adv: the T-step adversary ``[B, ...]``.
        clean_probs: F_hat(init) ``[B, C]`` (kept differentiable, as in the authors' code).
        lam: ``[B]`` mixing weights in [0, 1/2].
        num_classes: C.
    """
    lam_x = lam.view(-1, *([1] * (init.dim() - 1)))
    lam_y = lam.view(-1, 1)
    return (1 - lam_x) * init + lam_x * adv, (1 - lam_y) * clean_probs + lam_y / num_classes


class SmoothMix(SmoothingModule):
    """SmoothMix (Jeong et al. 2021): L = L_nat + eta * L_mix (eq. (12)) with the authors' masking and warm-up.

    Per chunk of images (the YAML sets ``steps_per_batch = num_noise``, one optimizer step per chunk, as the
    authors' ``_chunk_minibatch`` loop), m noise samples are drawn once and reused everywhere:

    1. In eval mode with frozen parameters, the unrestricted T-step normalised-gradient ascent of step alpha on
       J = -log F_hat_y from x (eqs. (7)-(8); :func:`~rsbench.methods.attacks.smoothmix_adversary`) gives ``adv``
       and ``init`` = x^(mix_step) projected to the ball of radius ``maxnorm_s`` (x itself when mix_step = 0).
    2. **Code, not paper:** the clean side is overwritten by ``init``, so with ``mix_step = 1``
       (``one_step=true``) L_nat is the cross-entropy on the one-step adversary, not on x.
    3. Train-mode forward of init + delta_i: L_nat = mean over the m * B rows of CE; F_hat(init) = mean_i softmax,
       **not detached** (the mixup target keeps its gradient, as in the code).
    4. lambda ~ U[0, 1/2] per image; x_mix, y_mix as eqs. (9)-(10); a second train-mode forward of
       x_mix + delta_i with the same noise; L_mix = KL(y_mix || softmax(f(x_mix + delta_i))) per row.
    5. **Code, not paper:** L_mix is masked to images whose F_hat(init) predicts y, and the masked sum is divided by
       all m * B rows (not by the correct ones); eta is multiplied by the warm-up ``min(1, (epoch + 1) / warmup)``,
       which also scales ``maxnorm_s`` (the paper mentions neither).

    Args:
        num_steps: T (>= 1).
        num_noise: m (>= 1).
        step_size: alpha, raw l2 units (> 0).
        eta: the weight of L_mix (>= 0).
        mix_step: the adversary step used on the clean side (0: x; 1: the one-step adversary; <= T).
        one_step: the paper's "+ one-step adversary"; true requires (and the YAML then sets) ``mix_step = 1``.
        maxnorm: l2 bound of every adversary iterate (``None``: unbounded, the authors' default).
        maxnorm_s: l2 bound of ``init`` (``None``: ``step_size * mix_step``, the authors' default; ImageNet: 1.0).
        warmup: epochs of the warm-up of eta and maxnorm_s (>= 1).
        fresh_noise: draw new noise for the training forwards instead of reusing the attack's.
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments (net, sigma, optimizer, ...).
    """

    method_name = "smoothmix"
    gaussian_only = "its adversary and mixup are built on the l2 geometry of Gaussian smoothing (Jeong et al. 2021)"

    def __init__(
        self,
        *,
        num_steps: int,
        num_noise: int,
        step_size: float,
        eta: float,
        mix_step: int = 0,
        one_step: bool = False,
        maxnorm: float | None = None,
        maxnorm_s: float | None = None,
        warmup: int = 10,
        fresh_noise: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.num_steps = check_int("method.num_steps", num_steps, 1)
        self.num_noise = check_int("method.num_noise", num_noise, 1)
        self.step_size = check_float("method.step_size", step_size, 0.0, strict=True)
        self.eta = check_float("method.eta", eta)
        self.mix_step = check_int("method.mix_step", mix_step, 0, self.num_steps)
        self.one_step = bool(one_step)
        if self.one_step and self.mix_step != 1:
            raise ValueError(
                f"method.one_step=true uses the one-step adversary: method.mix_step must be 1, got {mix_step}"
            )
        self.maxnorm = check_optional_float("method.maxnorm", maxnorm)
        given_s = check_optional_float("method.maxnorm_s", maxnorm_s)
        self.maxnorm_s = self.step_size * self.mix_step if given_s is None else given_s
        self.warmup = check_int("method.warmup", warmup, 1)
        self.fresh_noise = bool(fresh_noise)

    def warmup_value(self) -> float:
        """The warm-up factor of the current epoch (scales eta and maxnorm_s)."""
        return warmup_factor(self.warmup, self.current_epoch)

    def adversary(self, x: Tensor, y: Tensor, noise: Tensor) -> MixIterates:
        """``(init, adv)`` for images ``x`` with noise ``[B * m, ...]``, in eval mode, parameters frozen."""
        with frozen(self.net):
            return smoothmix_adversary(
                self.net,
                x,
                y,
                noise,
                self.num_steps,
                self.step_size,
                self.mix_step,
                self.maxnorm,
                self.warmup_value() * self.maxnorm_s,
            )

    def sample_lambda(self, like: Tensor) -> Tensor:
        """lambda ~ U[0, 1/2], one per image of ``like``."""
        return torch.rand(like.shape[0], device=like.device, dtype=like.dtype) / 2

    def training_loss(self, batch: Batch) -> StepOutput:
        """L_nat + eta * warmup * mean(mask * L_mix) on one chunk (see the class docstring)."""
        m = self.num_noise
        noise = self.noise_copies(batch.x, m, batch.sigma)
        init, adv = self.adversary(batch.x, batch.y, noise)
        if self.fresh_noise:
            noise = self.noise_copies(batch.x, m, batch.sigma)
        labels = copies(batch.y, m)
        logits = self(copies(init, m) + noise)
        loss_nat = F.cross_entropy(logits, labels)
        clean_probs = smoothed_probs(logits, m)
        num_classes = logits.shape[1]
        x_mix, y_mix = mixup(init, adv, clean_probs, self.sample_lambda(batch.x), num_classes)
        log_probs_mix = F.log_softmax(self(copies(x_mix, m) + noise), dim=1)
        loss_mix_rows = F.kl_div(log_probs_mix, copies(y_mix, m), reduction="none").sum(dim=1)
        correct = copies((clean_probs.argmax(dim=1) == batch.y).to(loss_mix_rows.dtype), m)
        loss_mix = (correct * loss_mix_rows).mean()
        weight = self.eta * self.warmup_value()
        loss = loss_nat + weight * loss_mix
        terms = {"loss_nat": loss_nat, "loss_mix": loss_mix, "mix_mask": correct.mean()}
        return StepOutput(loss=loss, logits=logits, labels=labels, terms=terms)
