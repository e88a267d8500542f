"""MACER: attack-free robust training by maximizing the certified radius (Zhai et al., ICLR 2020)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.archs.classifier import Classifier
from rsbench.methods.base import Batch, OptimizerFactory, SmoothingModule, StepOutput
from rsbench.methods.hparams import check_choice, check_float, check_int
from rsbench.noise import SigmaLike

LOG_EPSILON = 1e-10
"""The classification loss takes ``log(p_bar + 1e-10)``, as the authors' ``macer_train`` does."""

LBD_SCHEDULES = ("constant", "deferred")


def classification_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Per-image ``-log(mean_j softmax(logits[:, j])_y + 1e-10)``: the CE of the soft-smoothed classifier.

    Args:
        logits: ``[B, k, C]``, the logits of k noisy copies of each image.
        labels: ``[B]``.
    """
    mean_probs = F.softmax(logits, dim=2).mean(dim=1)
    return -torch.log(mean_probs.gather(1, labels.unsqueeze(1)).squeeze(1) + LOG_EPSILON)


def robustness_hinge(logits: Tensor, labels: Tensor, beta: float, gamma: float) -> tuple[Tensor, Tensor]:
    r"""MACER's hinge ``gamma - xi`` on the images it applies to, and which images those are.

    ``z_bar = mean_j softmax(beta * logits[:, j])`` is the temperature-beta soft-smoothed prediction and
    ``xi = Phi^-1(z_bar_(1)) - Phi^-1(z_bar_(2))`` the gap between its top two classes (twice the soft certified
    radius over sigma). An image contributes ``gamma - xi`` when

    * its top class is the label (the set G_theta of the paper),
    * ``xi`` is finite, i.e. the top-1 probability is below 1 and the runner-up above 0 (the authors drop
      NaN/inf terms), and
    * ``xi <= gamma`` (the hinge; the authors' ``|Phi^-1(p2) - Phi^-1(p1)| <= gamma``, the same since xi >= 0).

    Guards, stricter than the authors' (fp32 ``Normal.icdf``, then a filter) with the same selection at the
    published gamma = 8:

    * the images are selected first (without gradient) and ``xi`` is recomputed on the kept ones only, so no
      infinite or NaN value ever enters the backward pass (a masked ``where`` would still propagate ``0 * inf``);
    * ``z_bar_beta`` and ``Phi^-1`` (``torch.special.ndtri``) are computed in float64. A top-1 probability below 1
      then forces the runner-up above about 1.1e-16 / (C - 1), so on every kept image ``|Phi^-1|`` stays below about
      9 and its derivative ``1 / phi(Phi^-1(p))`` below e^41: loss and gradients are finite for any gamma. In fp32
      the top-1 probability rounds to exactly 1 (and the authors' ``Normal.icdf`` of the runner-up to -inf) once
      xi exceeds about 10.5, so the authors' code silently drops images with 10.5 < xi <= gamma when gamma is above
      about 10.5 (the paper sweeps gamma up to 16); this version keeps them up to xi of about 16.5.

    Args:
        logits: ``[B, k, C]``, the logits of k noisy copies of each image.
        labels: ``[B]``.
        beta: the inverse temperature of the softmax (this term only).
        gamma: the hinge margin on xi.

    Returns:
        ``(hinge, keep)``: ``gamma - xi`` for the kept images (float64, in ``[0, gamma]``) and the boolean mask
        ``[B]`` of the kept images.
    """
    soft = F.softmax(beta * logits.double(), dim=2).mean(dim=1)
    top2, index = soft.topk(2, dim=1)
    with torch.no_grad():
        xi = torch.special.ndtri(top2[:, 0]) - torch.special.ndtri(top2[:, 1])
        keep = (index[:, 0] == labels) & torch.isfinite(xi) & (xi <= gamma)
    kept = top2[keep]
    return gamma - (torch.special.ndtri(kept[:, 0]) - torch.special.ndtri(kept[:, 1])), keep


class MACER(SmoothingModule):
    r"""MACER: the cross-entropy of the soft-smoothed classifier plus a hinge on its soft certified radius.

    For each image x (label y), k noisy copies ``x + eps_j`` (``eps_j ~ N(0, sigma^2 I)`` fresh every batch, never
    clamped; one forward pass of B * k rows) give logits ``u_j``. The paper's objective (Eq. 17, Algorithm 1) is

        l = -log z_bar^y(x) + (lbd * sigma / 2) * max(0, gamma - xi(x)) * 1[x in G_theta],

    with ``z_bar = mean_j softmax(u_j)`` for the classification term, ``xi = Phi^-1(z_bar_beta^(1)) -
    Phi^-1(z_bar_beta^(2))`` computed from ``z_bar_beta = mean_j softmax(beta * u_j)`` for the robustness term, and
    ``G_theta`` the images whose ``z_bar_beta`` ranks the label first. As in the authors' ``macer.py``:

    * the classification term is ``-log(z_bar^y + 1e-10)``; beta enters only the robustness term;
    * both terms are **summed** over the batch and the total is divided by the batch size B:
      ``(sum_x l_C + lbd * sum_{x in G, xi <= gamma} (sigma/2)(gamma - xi)) / B`` (images outside G or beyond the
      hinge count in B but add nothing);
    * non-finite ``xi`` (top-1 probability exactly 1, runner-up exactly 0) drops the image from the robustness
      term (see :func:`robustness_hinge` for the stricter guards used here);
    * one optimizer step per loader batch (no chunking); the top-2 values are differentiable, nothing is detached.

    With a per-example sigma (``batch.sigma``), each image's hinge is scaled by its own sigma / 2.

    **lambda schedule.** ``lbd_schedule='deferred'`` sets lambda = 0 for the epochs before ``lbd_from_epoch``
    (0-indexed) and ``lbd`` from it on, as the Jeong-lineage ``train_macer.py --deferred`` does with
    ``epoch <= lr_step_size``: their ``scheduler.step(epoch)`` after each epoch drops the learning rate at epoch
    ``lr_step_size + 1``, so lambda switches on with the first learning-rate drop. The config default is
    ``lbd_from_epoch = scheduler.milestones[0]``, and the Jeong-lineage recipes put that milestone at
    ``lr_step_size + 1`` (e.g. 51 on CIFAR-10), which reproduces their runs exactly: lambda = 0 for epochs 0..50.
    The original MACER code has no schedule; its paper's sigma = 1.0 CIFAR-10 model "first trains with lambda = 0,
    then lambda = 12 after learning-rate decay". When lambda is 0 the robustness term is still computed and logged,
    without gradient.

    Args:
        net: the base classifier (at least 2 classes).
        sigma: the training noise level.
        optimizer: the optimizer factory.
        num_noise: k, noisy copies per image (>= 1); 16 on CIFAR-10/MNIST, 2 on ImageNet.
        lbd: lambda, the weight of the robustness term (>= 0).
        gamma: gamma, the hinge margin on xi (> 0); 8 in every published recipe.
        beta: beta, the softmax inverse temperature of the robustness term (> 0); 16 in every published recipe.
        lbd_schedule: ``constant`` or ``deferred`` (lambda = 0 before epoch ``lbd_from_epoch``).
        lbd_from_epoch: the first epoch (0-indexed) with lambda = ``lbd`` under ``deferred``; required then.
        **kwargs: the other arguments of :class:`SmoothingModule`.
    """

    method_name = "macer"
    gaussian_only = (
        "its loss maximises the Gaussian radius sigma/2 (Phi^-1(pA) - Phi^-1(pB)) "
        "(Zhai et al. 2020, eq. (16)), which no other noise certifies"
    )

    def __init__(
        self,
        net: Classifier,
        sigma: float,
        optimizer: OptimizerFactory,
        *,
        num_noise: int = 16,
        lbd: float = 12.0,
        gamma: float = 8.0,
        beta: float = 16.0,
        lbd_schedule: str = "constant",
        lbd_from_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        _check_hyperparameters(num_noise, lbd, gamma, beta, lbd_schedule, lbd_from_epoch)
        super().__init__(net, sigma, optimizer, **kwargs)
        if net.num_classes < 2:
            raise ValueError(
                f"MACER needs at least 2 classes (it ranks the top two), the network has {net.num_classes}"
            )
        self.num_noise = num_noise
        self.lbd = float(lbd)
        self.gamma = float(gamma)
        self.beta = float(beta)
        self.lbd_schedule = lbd_schedule
        self.lbd_from_epoch = lbd_from_epoch

    def lbd_at(self, epoch: int) -> float:
        """lambda in (0-indexed) ``epoch``: 0 before ``lbd_from_epoch`` under the deferred schedule, else ``lbd``."""
        if self.lbd_schedule == "deferred" and self.lbd_from_epoch is not None and epoch < self.lbd_from_epoch:
            return 0.0
        return self.lbd

    def training_loss(self, batch: Batch) -> StepOutput:
        """``(sum_x -log(z_bar^y + 1e-10) + lbd * sum_{kept} (sigma/2)(gamma - xi)) / B``."""
        k, size = self.num_noise, len(batch.x)
        logits = self(self.noisy_copies(batch.x, k, sigma=batch.sigma))  # rows grouped per image
        grouped = logits.view(size, k, -1)
        classification = classification_loss(grouped, batch.y).sum()
        lbd = self.lbd_at(self.current_epoch)
        with torch.set_grad_enabled(torch.is_grad_enabled() and lbd > 0):
            hinge, keep = robustness_hinge(grouped, batch.y, self.beta, self.gamma)
            robustness = (hinge * _half_sigma(batch.sigma, self.sigma, keep)).sum().to(classification.dtype)
        return StepOutput(
            loss=(classification + lbd * robustness) / size,
            logits=logits,
            labels=batch.y.repeat_interleave(k),
            terms={
                "classification": classification.detach() / size,
                "robustness": robustness.detach() / size,
                "robust_fraction": keep.float().mean(),
                "lbd": logits.new_tensor(lbd),
            },
        )


def _half_sigma(batch_sigma: SigmaLike | None, sigma: float, keep: Tensor) -> Tensor | float:
    """sigma / 2 for the kept images: the module's sigma, or each image's own when the batch carries one."""
    if isinstance(batch_sigma, Tensor) and batch_sigma.dim() > 0:
        return batch_sigma.to(device=keep.device, dtype=torch.float64)[keep] / 2
    return (sigma if batch_sigma is None else float(batch_sigma)) / 2


def _check_hyperparameters(
    num_noise: int, lbd: float, gamma: float, beta: float, lbd_schedule: str, lbd_from_epoch: int | None
) -> None:
    """Raise ``ValueError`` naming the first bad hyperparameter, its value and what is allowed."""
    check_int("method.num_noise (k, noisy copies per image)", num_noise, 1)
    check_float("method.lbd (lambda)", lbd)
    check_float("method.gamma (gamma, the hinge margin)", gamma, strict=True)
    check_float("method.beta (beta, the inverse temperature)", beta, strict=True)
    check_choice("method.lbd_schedule", lbd_schedule, LBD_SCHEDULES)
    if lbd_from_epoch is not None:
        check_int("method.lbd_from_epoch (the first epoch with lambda > 0)", lbd_from_epoch, 0)
    if lbd_schedule == "deferred" and lbd_from_epoch is None:
        raise ValueError(
            "method.lbd_schedule=deferred keeps lambda at 0 before epoch method.lbd_from_epoch, which defaults to "
            "the first learning-rate milestone (scheduler.milestones[0]); this scheduler has none: "
            "set method.lbd_from_epoch=<epoch>"
        )
