"""SmoothAdv's PGD on the soft smoothed classifier, in the l2 ball (Salman et al.) and in l1 and l-infinity balls.

The soft smoothed classifier is F_hat(x) = (1/m) sum_i softmax(f(x + delta_i)) over m noise samples drawn once and
held fixed across the steps, and the attack maximises J(x') = -log F_hat_y(x') over the ball ||x' - x|| <= epsilon
in [0,1]^d (:func:`rsbench.methods.attacks.smoothed_nll`). In l2 this is exactly the search the SmoothAdv training
method uses, :func:`rsbench.methods.attacks.pgd_l2_smoothed` (Salman et al.'s ``PGD_L2._attack_mutlinoise``: delta
starts at 0, T steps of size 2 epsilon / T along the normalised gradient, a random direction where the gradient is
exactly 0, then clamp to [0, 1] and renorm), reused here rather than written twice.

Salman et al. define the attack for l2 only. For the other threat models rsbench keeps its structure (delta from 0,
fixed noise, T steps of length 2 epsilon / T in the norm, clamp to [0, 1] then project onto the ball, which keeps
both constraints because each projection only shrinks delta towards 0) with the steepest-ascent direction of that
norm:

- l-infinity: sign(g) (Madry et al.'s PGD), projection = clipping delta to [-epsilon, epsilon];
- l1: SLIDE's sparse direction (Tramèr and Boneh, NeurIPS 2019): sign(g) on the coordinates where |g| reaches its
  99th percentile, scaled to unit l1 norm, leaving out (as SLIDE does) the pixels already at 0 or 1 that the step
  would push out of the image, and the exact projection onto the l1 ball (Duchi et al., ICML 2008).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rsbench.methods.attacks import Model, copies, pgd_l2_smoothed, smoothed_nll

L1_PERCENTILE = 0.99
"""SLIDE's sparsity: an l1 step moves the coordinates whose |gradient| is at or above this quantile."""


def smoothed_pgd(
    model: Model, x: Tensor, labels: Tensor, noise: Tensor, epsilon: float, num_steps: int, norm: str
) -> Tensor:
    """The adversarial images ``x'`` (``||x' - x|| <= epsilon`` in ``norm``, in [0, 1]) of the soft smoothed classifier.

    Args:
        model: the base classifier (run it inside :func:`rsbench.methods.attacks.frozen`: eval mode, no weight
            gradients).
        x: clean images ``[B, C, H, W]`` in [0, 1].
        labels: ``[B]``, the classes the attack moves away from.
        noise: ``[B * m, C, H, W]``, m noise samples per image grouped by image, fixed across the steps.
        epsilon: the radius (>= 0) in [0,1] pixel units.
        num_steps: T >= 1.
        norm: ``l1``, ``l2`` or ``linf``.
    """
    if norm == "l2":
        return pgd_l2_smoothed(model, x, labels, noise, epsilon, num_steps)
    if norm not in ("l1", "linf"):
        raise ValueError(f"the attack's norm must be l1, l2 or linf, got {norm!r}")
    x = x.detach()
    if epsilon == 0:
        return x.clone()
    m = noise.shape[0] // x.shape[0]
    step = 2 * epsilon / num_steps
    delta = torch.zeros_like(x)
    for _ in range(num_steps):
        point = delta.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = smoothed_nll(model(copies(x + point, m) + noise), labels, m).sum()
            (grad,) = torch.autograd.grad(loss, [point])
        direction = _sign_direction(grad) if norm == "linf" else _sparse_l1_direction(grad, x + delta)
        delta = delta + step * direction
        delta = (x + delta).clamp(0, 1) - x
        delta = delta.clamp(-epsilon, epsilon) if norm == "linf" else project_l1(delta, epsilon)
    return (x + delta).detach()


def _sign_direction(grad: Tensor) -> Tensor:
    """sign(g), with a random sign pattern where a row's gradient is exactly 0 (as Salman's random l2 direction)."""
    direction = grad.sign()
    zero = grad.flatten(1).abs().amax(dim=1) == 0
    if bool(zero.any()):
        direction[zero] = torch.randn_like(direction[zero]).sign()
    return direction


def _sparse_l1_direction(grad: Tensor, point: Tensor) -> Tensor:
    """SLIDE: sign(g) where |g| >= its per-row 99th percentile, scaled to unit l1 norm (random where g is 0).

    Pixels of ``point`` at 0 with g < 0 or at 1 with g > 0 are left out: the step cannot move them.
    """
    flat = grad.flatten(1)
    zero = flat.abs().amax(dim=1) == 0
    if bool(zero.any()):
        flat = flat.clone()
        flat[zero] = torch.randn_like(flat[zero])
    pixels = point.flatten(1)
    stuck = ((pixels <= 0) & (flat < 0)) | ((pixels >= 1) & (flat > 0))
    magnitude = flat.abs().masked_fill(stuck, 0.0)
    threshold = torch.quantile(magnitude, L1_PERCENTILE, dim=1, keepdim=True)
    chosen = (magnitude >= threshold) & (magnitude > 0)
    direction = flat.sign() * chosen
    direction = direction / direction.abs().sum(dim=1, keepdim=True).clamp(min=1)
    return direction.view_as(grad)


def project_l1(delta: Tensor, radius: float) -> Tensor:
    """The Euclidean projection of each row onto the l1 ball of ``radius`` (Duchi et al. 2008, Fig. 1).

    Rows already inside are returned unchanged; the others are soft-thresholded at the theta with
    sum_i max(|delta_i| - theta, 0) = radius, found by sorting.
    """
    flat = delta.flatten(1)
    magnitude = flat.abs()
    outside = magnitude.sum(dim=1) > radius
    if not bool(outside.any()):
        return delta
    rows = magnitude[outside]
    ordered, _ = rows.sort(dim=1, descending=True)
    cumulative = ordered.cumsum(dim=1)
    ranks = torch.arange(1, rows.shape[1] + 1, device=rows.device, dtype=rows.dtype)
    feasible = ordered - (cumulative - radius) / ranks > 0
    last = feasible.to(torch.int64).cumsum(dim=1).argmax(dim=1, keepdim=True)  # the largest feasible index
    theta = (cumulative.gather(1, last) - radius) / (last + 1).to(rows.dtype)
    projected = flat.clone()
    projected[outside] = flat[outside].sign() * (rows - theta).clamp(min=0)
    return projected.view_as(delta)


def distance(x: Tensor, adversarial: Tensor, norm: str) -> float:
    """||adversarial - x|| in ``norm`` for one image (what the attack actually moved)."""
    difference = (adversarial - x).flatten().double()
    order = math.inf if norm == "linf" else {"l1": 1.0, "l2": 2.0}[norm]
    return float(torch.linalg.vector_norm(difference, ord=order))
