"""Consistency regularization (Jeong and Shin, NeurIPS 2020), as ``jh-jeong/smoothing-consistency`` implements it."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.archs.classifier import Classifier
from rsbench.methods.attacks import copies, frozen, pgd_l2_smoothed_jeong
from rsbench.methods.base import Batch, OptimizerFactory, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_float, check_int
from rsbench.methods.smoothadv import warmed_up_epsilon

ENTROPY_CLAMP = 1e-20
"""``H(p_bar)`` takes ``log(p_bar.clamp(min=1e-20))``, the authors' guard against ``log 0``."""


def consistency_terms(logits: Tensor) -> tuple[Tensor, Tensor]:
    """Per-image ``mean_i KL(p_bar || p_i)`` and ``H(p_bar)`` for m noisy copies of each image.

    ``p_i = softmax(logits[:, i])`` and ``p_bar = mean_i p_i``. ``p_bar`` is **not detached**: gradients flow through
    the target of the KL terms and through the entropy, as in the authors' ``consistency_loss``.

    Args:
        logits: ``[B, m, C]``, the logits of the m noisy copies of each of B images.

    Returns:
        ``(kl, entropy)``, each of shape ``[B]``.
    """
    log_probs = F.log_softmax(logits, dim=2)
    mean_probs = log_probs.exp().mean(dim=1)  # p_bar, [B, C]
    target = mean_probs.unsqueeze(1).expand_as(log_probs)
    # KL(p_bar || p_i) = sum_c p_bar_c (log p_bar_c - log p_i,c), with 0 log 0 = 0 (F.kl_div, as the authors)
    kl = F.kl_div(log_probs, target, reduction="none").sum(dim=2).mean(dim=1)
    entropy = -(mean_probs * torch.log(mean_probs.clamp(min=ENTROPY_CLAMP))).sum(dim=1)
    return kl, entropy


class ConsistencyRegularization(SmoothingModule):
    r"""Gaussian augmentation with m noisy copies plus the consistency and entropy terms of Jeong and Shin (2020).

    For each image x with label y, m noisy copies ``x + eps_i`` (``eps_i ~ N(0, sigma^2 I)`` fresh, never clamped)
    give logits ``z_i``, predictions ``p_i = softmax(z_i)`` and their mean ``p_bar``. The loss (paper Eq. 7 with the
    cross-entropy of every copy) is

        L = mean_{i, x} CE(z_i, y) + mean_x [ lbd * (1/m) sum_i KL(p_bar || p_i) + eta * H(p_bar) ],

    with the cross-entropy averaged over all m * B noisy rows, and the consistency part over the B images. As in the
    authors' ``train_consistency.py`` (``loss='default'``):

    * ``p_bar`` is **not detached**, so the KL target and the entropy carry gradients;
    * the entropy uses ``log(p_bar.clamp(min=1e-20))``; the KL uses ``F.kl_div`` (``0 log 0 = 0``);
    * all m copies go through the network in one forward pass (one BatchNorm batch of m * B rows);
    * each loader batch is cut into m chunks of B // m images with one optimizer step per chunk
      (``steps_per_batch = m``, the default here and in ``conf/method/consistency.yaml``), so the images per step
      stay B and an epoch takes m times as many steps.

    ``adversarial=true`` is the authors' SmoothAdv + Consistency (``--adv-training``): in each chunk the m noise
    samples are drawn first, the SmoothAdv adversary x* of the soft smoothed classifier is found with them held
    fixed (:func:`~rsbench.methods.attacks.pgd_l2_smoothed_jeong`: T steps from x, renorm then clamp, in eval mode
    with frozen parameters), and the same loss as above is computed on ``x* + delta_i`` with the **same** noise. The
    attack radius is warmed up like SmoothAdv's, ``min(epsilon, (epoch + 1) * epsilon / warmup)``.

    The authors' other loss forms (``xent``, ``kl``, ``mse``) are not implemented. With ``num_noise = 1`` the KL term
    is 0 (the authors allow it; their script's default is m = 1).

    Args:
        net: the base classifier.
        sigma: the training noise level.
        optimizer: the optimizer factory.
        num_noise: m, noisy copies per image (>= 1); the published recipes use 2.
        lbd: lambda, the weight of the KL (consistency) term (>= 0).
        eta: eta, the weight of the entropy term (>= 0); 0.5 in every published CIFAR-10/MNIST recipe.
        adversarial: train on the SmoothAdv adversary of each image (SmoothAdv + Consistency).
        epsilon: the attack's l2 radius in [0,1] pixel units (>= 0; the authors' ``--epsilon`` / 256).
        num_steps: T, attack steps (>= 1).
        warmup: epochs over which epsilon grows linearly to its value (>= 1; 1 means no warm-up).
        **kwargs: the other arguments of :class:`SmoothingModule`; ``steps_per_batch`` defaults to ``num_noise``.
    """

    method_name = "consistency"

    def __init__(
        self,
        net: Classifier,
        sigma: float,
        optimizer: OptimizerFactory,
        *,
        num_noise: int = 2,
        lbd: float = 10.0,
        eta: float = 0.5,
        adversarial: bool = False,
        epsilon: float | None = 1.0,
        num_steps: int = 10,
        warmup: int = 10,
        **kwargs: Any,
    ) -> None:
        if adversarial and None in (epsilon, num_noise, lbd):
            raise ValueError(
                "method.adversarial=true: the authors published no SmoothAdv + Consistency recipe for this dataset "
                f"and sigma (epsilon={epsilon}, num_noise={num_noise}, lbd={lbd}); set method.epsilon, "
                "method.num_noise and method.lbd"
            )
        num_noise = check_int("method.num_noise (m, noisy copies per image)", num_noise, 1)
        lbd = check_float("method.lbd (lambda)", lbd)
        eta = check_float("method.eta (eta)", eta)
        kwargs.setdefault("steps_per_batch", num_noise)
        super().__init__(net, sigma, optimizer, **kwargs)
        self.num_noise = num_noise
        self.lbd = lbd
        self.eta = eta
        self.adversarial = bool(adversarial)
        self.epsilon = None if epsilon is None else check_float("method.epsilon", epsilon)
        self.num_steps = check_int("method.num_steps", num_steps, 1)
        self.warmup = check_int("method.warmup", warmup, 1)

    def noise_refusal(self) -> str | None:
        """Plain Consistency trains with any noise; ``adversarial=true`` (SmoothAdv's attack) only with Gaussian."""
        if self.adversarial:
            return "method.adversarial=true trains at SmoothAdv's l2 adversary of the Gaussian-smoothed classifier"
        return None

    def current_epsilon(self) -> float:
        """The warmed-up attack radius of the current epoch (``adversarial=true``)."""
        assert self.epsilon is not None
        return warmed_up_epsilon(self.epsilon, self.warmup, self.current_epoch)

    def training_loss(self, batch: Batch) -> StepOutput:
        """Mean CE over the m * B noisy rows + mean over images of ``lbd * KL + eta * H(p_bar)``.

        The rows are ``x + delta_i``, or ``x* + delta_i`` with the attack's own noise when ``adversarial``.
        """
        m = self.num_noise
        terms: dict[str, Tensor] = {}
        if self.adversarial:
            noise = self.noise_copies(batch.x, m, batch.sigma)
            epsilon = self.current_epsilon()
            with frozen(self.net):
                x_adv = pgd_l2_smoothed_jeong(self.net, batch.x, batch.y, noise, epsilon, self.num_steps)
            inputs = copies(x_adv, m) + noise
            terms["epsilon"] = torch.tensor(epsilon)
        else:
            inputs = self.noisy_copies(batch.x, m, sigma=batch.sigma)
        logits = self(inputs)  # rows grouped per image
        labels = batch.y.repeat_interleave(m)
        cross_entropy = F.cross_entropy(logits, labels)
        kl, entropy = consistency_terms(logits.view(len(batch.x), m, -1))
        kl, entropy = kl.mean(), entropy.mean()
        return StepOutput(
            loss=cross_entropy + self.lbd * kl + self.eta * entropy,
            logits=logits,
            labels=labels,
            terms={"cross_entropy": cross_entropy, "consistency_kl": kl, "entropy": entropy, **terms},
        )
