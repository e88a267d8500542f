"""SmoothAdv: adversarial training of the soft smoothed classifier (Salman et al., NeurIPS 2019)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.methods.attacks import copies, ddn_smoothed, frozen, pgd_l2_smoothed
from rsbench.methods.base import Batch, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_choice, check_float, check_int

ATTACKS = ("pgd", "ddn")


def warmed_up_epsilon(epsilon: float, warmup: int, epoch: int) -> float:
    """Salman's linear epsilon warm-up: ``min(epsilon, (epoch + 1) * epsilon / warmup)`` (epochs from 0)."""
    return min(epsilon, (epoch + 1) * epsilon / warmup)


class SmoothAdv(SmoothingModule):
    """SmoothAdv (Salman et al. 2019): cross-entropy at the soft smoothed classifier's adversarial example.

    Implements min_theta E[CE(f(x* + delta_i), y)] with
    x* = argmax_{||x' - x||_2 <= epsilon} -log((1/m) sum_i F_y(x' + delta_i))   (the paper's eq. (S)),
    the m noise samples delta_i drawn once per chunk, held fixed across the attack steps and reused in the loss,
    as the authors' ``train_pgd.py`` does (``fresh_noise=true`` draws new noise for the loss instead).

    Follows the authors' code where it is more specific than the paper:

    * The attack runs in eval mode with frozen parameters (BatchNorm running statistics are neither used from the
      batch nor updated by it), then the model returns to its previous mode for the training forward.
    * ``attack=pgd``: delta from 0, T steps of 2 * epsilon / T along the normalised gradient, clamp then renorm
      (:func:`~rsbench.methods.attacks.pgd_l2_smoothed`). ``attack=ddn``: DDN with gamma ``ddn_gamma`` and its
      initial norm set to the current epsilon, as the training loop sets ``init_norm``
      (:func:`~rsbench.methods.attacks.ddn_smoothed`).
    * Epsilon is linearly warmed up: ``min(epsilon, (epoch + 1) * epsilon / warmup)``.
    * ``train_multi_noise=true`` (the paper's "m_train multi-train", used for every published model): each loader
      batch is cut into m chunks of B / m images, and each chunk is one optimizer step on its B / m * m noisy
      adversarial copies (the YAML sets ``steps_per_batch = num_noise``). ``train_multi_noise=false``: the attack
      still uses m noise samples (in chunks of B / m images), the loss uses the first noisy copy of each image,
      and one optimizer step is taken on the B images.
    * Epsilon is in raw l2 units of [0,1] pixel space; the authors' ``--epsilon`` is in 1/256 units (256 -> 1.0).

    Args:
        epsilon: the l2 radius of the attack (>= 0).
        num_steps: T, attack steps (>= 1).
        num_noise: m, noise samples per image (>= 1).
        attack: ``pgd`` or ``ddn``.
        warmup: epochs over which epsilon grows linearly to its value (>= 1; 1 means no warm-up).
        train_multi_noise: train on all m noisy copies with one step per chunk (see above).
        ddn_gamma: DDN's multiplicative norm step (in (0, 1)).
        fresh_noise: draw new noise for the training forward instead of reusing the attack's.
        **kwargs: :class:`~rsbench.methods.base.SmoothingModule` arguments (net, sigma, optimizer, ...).
    """

    method_name = "smoothadv"
    gaussian_only = (
        "its adversary attacks the Gaussian-smoothed soft classifier in the l2 ball, "
        "whose guarantee (Salman et al. 2019) holds for Gaussian noise only"
    )

    def __init__(
        self,
        *,
        epsilon: float,
        num_steps: int,
        num_noise: int,
        attack: str = "pgd",
        warmup: int = 1,
        train_multi_noise: bool = True,
        ddn_gamma: float = 0.05,
        fresh_noise: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.epsilon = check_float("method.epsilon", epsilon)
        self.num_steps = check_int("method.num_steps", num_steps, 1)
        self.num_noise = check_int("method.num_noise", num_noise, 1)
        self.attack = check_choice("method.attack", attack, ATTACKS)
        self.warmup = check_int("method.warmup", warmup, 1)
        self.ddn_gamma = check_float("method.ddn_gamma", ddn_gamma, 0.0, strict=True)
        if self.ddn_gamma >= 1:
            raise ValueError(f"method.ddn_gamma must be in (0, 1), got {ddn_gamma!r}")
        self.train_multi_noise = bool(train_multi_noise)
        self.fresh_noise = bool(fresh_noise)

    def current_epsilon(self) -> float:
        """The warmed-up epsilon of the current epoch."""
        return warmed_up_epsilon(self.epsilon, self.warmup, self.current_epoch)

    def adversarial(self, x: Tensor, y: Tensor, noise: Tensor) -> Tensor:
        """The attack's x* for images ``x`` with noise ``noise`` ``[B * m, ...]``, in eval mode, parameters frozen."""
        epsilon = self.current_epsilon()
        with frozen(self.net):
            if self.attack == "ddn":
                return ddn_smoothed(self.net, x, y, noise, epsilon, self.num_steps, self.ddn_gamma)
            return pgd_l2_smoothed(self.net, x, y, noise, epsilon, self.num_steps)

    def training_loss(self, batch: Batch) -> StepOutput:
        """CE(f(x* + delta_i), y) over the m copies of each image (or over the first copy, single-noise path)."""
        m = self.num_noise
        noise = self.noise_copies(batch.x, m, batch.sigma)
        if self.train_multi_noise:
            x_adv = self.adversarial(batch.x, batch.y, noise)
            if self.fresh_noise:
                noise = self.noise_copies(batch.x, m, batch.sigma)
            logits = self(copies(x_adv, m) + noise)
            labels = copies(batch.y, m)
        else:
            x_adv = self._chunked_adversarial(batch.x, batch.y, noise)
            first = noise.view(len(batch.x), m, *noise.shape[1:])[:, 0]
            if self.fresh_noise:
                first = self.sample_noise(first, batch.sigma)
            logits = self(x_adv + first)
            labels = batch.y
        loss = F.cross_entropy(logits, labels)
        return StepOutput(
            loss=loss, logits=logits, labels=labels, terms={"epsilon": torch.tensor(self.current_epsilon())}
        )

    def _chunked_adversarial(self, x: Tensor, y: Tensor, noise: Tensor) -> Tensor:
        """Attack in chunks of ceil(B / m) images, as the authors' loop does, so memory is that of B rows."""
        m = self.num_noise
        size = math.ceil(len(x) / m)
        parts = [
            self.adversarial(x[i : i + size], y[i : i + size], noise[i * m : (i + size) * m])
            for i in range(0, len(x), size)
        ]
        return torch.cat(parts)
