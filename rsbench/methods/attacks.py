"""The adversarial searches of SmoothAdv, SmoothMix and CAT-RS, with each reference implementation's semantics.

All searches take the base classifier ``model`` (images in [0,1] -> logits), a batch ``x`` ``[B, C, H, W]`` in
[0,1] and ``m`` Gaussian noise samples per image, ``noise`` ``[B * m, C, H, W]`` grouped by image (rows
``i*m .. i*m + m-1`` belong to image ``i``, the layout of :meth:`rsbench.noise.NoiseMixin.noisy_copies`). The noise
is held fixed across every step of a search, and the callers reuse it in their training loss (Salman et al. 2019,
Jeong et al. 2021 and 2023 all do; pitfall 1 in the reference notes). Gradients are taken with
``torch.autograd.grad`` with respect to the perturbation only, so no parameter gradient ever accumulates; run the
searches inside :func:`frozen` to also use BatchNorm's running statistics (eval mode), as every reference does.

The soft smoothed classifier of Salman et al. is F_hat(x) = (1/m) sum_i softmax(f(x + delta_i)); its loss is
``J(x) = -log F_hat_y(x)`` with F_hat clamped at 1e-20 (:func:`smoothed_nll`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Model = Callable[[Tensor], Tensor]

DDN_LEVELS = 256
"""DDN quantises images to 8 bits (fast_adversarial's ``levels=256``)."""


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[nn.Module]:
    """Run the body with ``module`` in eval mode and its parameters frozen, then restore both exactly.

    Eval mode makes BatchNorm use (and not update) its running statistics and turns dropout off; frozen
    parameters (``requires_grad=False``) keep the search from building a graph through the weights. On exit every
    submodule gets back its own previous mode and every parameter its own ``requires_grad``, not a blanket
    ``train()`` / ``requires_grad_(True)``.
    """
    modes = [(sub, sub.training) for sub in module.modules()]
    flags = [(param, param.requires_grad) for param in module.parameters()]
    module.eval()
    for param, _ in flags:
        param.requires_grad_(False)
    try:
        yield module
    finally:
        for sub, training in modes:
            sub.training = training
        for param, requires_grad in flags:
            param.requires_grad_(requires_grad)


def copies(x: Tensor, m: int) -> Tensor:
    """``x`` with each row repeated ``m`` times in place (``[B, ...] -> [B * m, ...]``, grouped by image)."""
    return x.repeat_interleave(m, dim=0)


def smoothed_probs(logits: Tensor, m: int) -> Tensor:
    """F_hat = the mean over each image's ``m`` rows of softmax(logits): ``[B * m, C] -> [B, C]``."""
    return F.softmax(logits, dim=1).view(-1, m, logits.shape[1]).mean(dim=1)


def smoothed_nll(logits: Tensor, labels: Tensor, m: int) -> Tensor:
    """Per image, J = -log F_hat_y with F_hat clamped at 1e-20 (Salman et al. eq. (S); ``[B]``)."""
    log_probs = smoothed_probs(logits, m).clamp(min=1e-20).log()
    return F.nll_loss(log_probs, labels, reduction="none")


def row_norms(t: Tensor) -> Tensor:
    """The l2 norm of each row of ``t`` (``[B, ...] -> [B]``)."""
    return t.flatten(1).norm(p=2, dim=1)


def _per_row(values: Tensor, like: Tensor) -> Tensor:
    """``values`` ``[B]`` shaped to broadcast over the rows of ``like`` ``[B, ...]``."""
    return values.view(-1, *([1] * (like.dim() - 1)))


def project_l2(delta: Tensor, radius: float) -> Tensor:
    """Scale each row of ``delta`` whose l2 norm exceeds ``radius`` back onto the ball (``Tensor.renorm``)."""
    return delta.renorm(p=2, dim=0, maxnorm=radius)


def unit_or_random(grad: Tensor) -> Tensor:
    """Salman et al.'s step direction: g / ||g|| per row, and a standard normal draw where g is exactly zero."""
    norms = row_norms(grad)
    direction = grad / _per_row(norms, grad)
    zero = norms == 0
    if bool(zero.any()):
        direction[zero] = torch.randn_like(direction[zero])
    return direction


def unit_eps(grad: Tensor) -> Tensor:
    """Jeong et al.'s step direction: g / (||g|| + 1e-8) per row (a zero gradient gives a zero step)."""
    return grad / (_per_row(row_norms(grad), grad) + 1e-8)


def _input_grad(loss_fn: Callable[[Tensor], Tensor], point: Tensor) -> Tensor:
    """d loss_fn(point) / d point, leaving no graph behind and touching no parameter's ``.grad``."""
    point = point.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = loss_fn(point)
        (grad,) = torch.autograd.grad(loss, [point])
    return grad


def pgd_l2_smoothed(model: Model, x: Tensor, labels: Tensor, noise: Tensor, epsilon: float, num_steps: int) -> Tensor:
    """SmoothAdv's L2 PGD on the soft smoothed classifier (Salman et al. 2019, eq. (S), ``attacks.PGD_L2``).

    Maximises J(x') = -log((1/m) sum_i F_y(x' + delta_i)) over ||x' - x||_2 <= epsilon with the m noise samples
    fixed: delta starts at 0; each of the ``num_steps`` steps moves delta by ``2 * epsilon / num_steps`` along the
    per-example l2-normalised gradient (a standard normal direction where the gradient is exactly 0), then clamps
    x + delta to [0, 1] and only then renorms delta to ``epsilon`` (Salman's order: the result is inside both sets).

    Args:
        model: the base classifier.
        x: clean images ``[B, C, H, W]`` in [0, 1].
        labels: ``[B]``.
        noise: ``[B * m, C, H, W]``, grouped by image.
        epsilon: the l2 radius in [0,1] pixel units (>= 0).
        num_steps: T >= 1.

    Returns:
        x + delta ``[B, C, H, W]``, detached.
    """
    m = noise.shape[0] // x.shape[0]
    delta = torch.zeros_like(x)
    if epsilon == 0 or num_steps == 0:
        return x.detach().clone()
    step = 2 * epsilon / num_steps
    for _ in range(num_steps):
        grad = _input_grad(lambda d: smoothed_nll(model(copies(x + d, m) + noise), labels, m).sum(), delta)
        delta = delta + step * unit_or_random(grad)
        delta = (x + delta).clamp(0, 1) - x
        delta = project_l2(delta, epsilon)
    return (x + delta).detach()


def pgd_l2_smoothed_jeong(
    model: Model, x: Tensor, labels: Tensor, noise: Tensor, epsilon: float, num_steps: int
) -> Tensor:
    """The SmoothAdv attack of Consistency training (Jeong and Shin 2020, ``train_consistency.py::SmoothAdv_PGD``).

    Used by ``--adv-training``. The objective of :func:`pgd_l2_smoothed` (J = -log F_hat_y with the m noise samples
    fixed) with Jeong's iteration: x' starts at x; each of the ``num_steps`` steps moves x' by
    ``2 * epsilon / num_steps`` along g / (||g|| + 1e-8), where g is the gradient of the **batch mean** of J (so the
    guard acts on a gradient 1/B the size of each image's own); then x' - x is renormed to ``epsilon`` and only then
    x' is clamped to [0, 1] (the reverse of Salman's order). A zero gradient gives a zero step (no random direction).
    The arguments are :func:`pgd_l2_smoothed`'s; returns x' ``[B, C, H, W]``, detached.
    """
    m = noise.shape[0] // x.shape[0]
    x = x.detach()
    if epsilon == 0:
        return x.clone()
    step = 2 * epsilon / num_steps
    adv = x
    for _ in range(num_steps):
        grad = _input_grad(lambda point: smoothed_nll(model(copies(point, m) + noise), labels, m).mean(), adv)
        adv = _project_then_clamp(adv + step * unit_eps(grad), x, epsilon)
    return adv


def ddn_smoothed(
    model: Model, x: Tensor, labels: Tensor, noise: Tensor, epsilon: float, num_steps: int, gamma: float = 0.05
) -> Tensor:
    """SmoothAdv's DDN attack on the soft smoothed classifier (Rony et al. 2019 as in Salman's ``attacks.DDN``).

    Decoupled direction and norm: delta starts at 0 with a per-example norm budget ``epsilon`` (Salman's training
    loop sets DDN's ``init_norm`` to the current, warmed-up epsilon); each step takes a normalised-gradient step
    on J (step size cosine-annealed from 1 to 0.01 over ``num_steps``, as ``CosineAnnealingLR`` stepped before
    each step), multiplies the budget by (1 - gamma) where the majority vote of the m noisy predictions is already
    wrong and by (1 + gamma) where it is right (capped at the largest possible perturbation ||max(x, 1-x)||),
    rescales delta to the budget, quantises x + delta to 8 bits and clamps it to [0, 1]. The smallest delta whose
    majority vote was wrong is kept; it is renormed to ``epsilon`` and quantised at the end. Where no adversarial
    point was found, delta stays 0, as in the reference.

    Deviation: the result is clamped to [0, 1] once more after the final quantisation of delta (a no-op for images
    on the 8-bit grid, i.e. MNIST, CIFAR, SVHN); quantising delta can leave ||delta|| up to sqrt(d)/510 above
    epsilon, as in the reference.

    Args:
        model: the base classifier.
        x: clean images ``[B, C, H, W]`` in [0, 1].
        labels: ``[B]``.
        noise: ``[B * m, C, H, W]``, grouped by image.
        epsilon: the l2 radius of the returned perturbation and the initial norm budget (>= 0).
        num_steps: T >= 1.
        gamma: the budget's multiplicative step.

    Returns:
        x + delta ``[B, C, H, W]``, detached.
    """
    batch = x.shape[0]
    levels = DDN_LEVELS - 1
    if epsilon == 0 or num_steps == 0:
        return x.detach().clone()
    delta = torch.zeros_like(x)
    budget = torch.full((batch,), float(epsilon), device=x.device, dtype=x.dtype)
    worst = row_norms(torch.maximum(x, 1 - x))
    best_norm = worst.clone()
    best_delta = torch.zeros_like(x)
    for step in range(num_steps):
        lr = 0.01 + (1 - 0.01) * (1 + math.cos(math.pi * (step + 1) / num_steps)) / 2
        norm = row_norms(delta)
        grad, is_adv = _ddn_gradient(model, x, labels, noise, delta)
        better = is_adv & (norm < best_norm)
        best_norm = torch.where(better, norm, best_norm)
        best_delta[better] = delta[better]
        delta = delta + lr * unit_or_random(grad)
        budget = torch.minimum(budget * (1 - (2 * is_adv.to(x.dtype) - 1) * gamma), worst)
        delta = delta * _per_row(budget / row_norms(delta), delta)
        delta = ((x + delta) * levels).round() / levels
        delta = delta.clamp(0, 1) - x
    best_delta = (project_l2(best_delta, epsilon) * levels).round() / levels
    return (x + best_delta).clamp(0, 1).detach()


def _ddn_gradient(model: Model, x: Tensor, labels: Tensor, noise: Tensor, delta: Tensor) -> tuple[Tensor, Tensor]:
    """DDN's gradient of J (the summed smoothed NLL) at ``x + delta``, and per image whether its vote is wrong.

    One forward pass of the m noisy copies per image gives both: the majority vote of their predictions.
    """
    batch = x.shape[0]
    m = noise.shape[0] // batch
    outputs: dict[str, Tensor] = {}

    def loss_fn(d: Tensor, outputs: dict[str, Tensor] = outputs) -> Tensor:
        logits = model(copies(x + d, m) + noise)
        outputs["votes"] = logits.detach().argmax(dim=1).view(batch, m)
        return smoothed_nll(logits, labels, m).sum()

    grad = _input_grad(loss_fn, delta)
    return grad, outputs["votes"].mode(dim=1).values != labels


class MixIterates(NamedTuple):
    """SmoothMix's two points: ``init`` (x, or the ``mix_step``-step adversary) and ``adv`` (the T-step one)."""

    init: Tensor
    adv: Tensor


def smoothmix_adversary(
    model: Model,
    x: Tensor,
    labels: Tensor,
    noise: Tensor,
    num_steps: int,
    step_size: float,
    mix_step: int = 0,
    maxnorm: float | None = None,
    maxnorm_s: float | None = None,
) -> MixIterates:
    """SmoothMix's unrestricted adversary (Jeong et al. 2021, eq. (7)-(8), ``SmoothMix_PGD`` in ``train.py``).

    x^(0) = x, x^(t+1) = x^(t) + alpha * g / (||g|| + 1e-8) with g = grad J(x^(t)), J = -log F_hat_y and the m
    noise samples fixed across the T steps; after each step x^(t+1) is renormed to the l2 ball of radius
    ``maxnorm`` around x (only when ``maxnorm`` is set: by default the search is unbounded) and then clamped to
    [0, 1] (Jeong's order). ``init`` is x^(mix_step), finally projected onto the ball of radius ``maxnorm_s``
    around x (and clamped): with ``mix_step = 0`` and ``maxnorm_s = alpha * mix_step = 0`` it is x itself.

    Deviation: the reference captures ``init`` at the start of iteration ``mix_step``, so ``mix_step = T`` gives
    x there (e.g. its ImageNet setting T = 1 with the one-step adversary); here it gives x^(T), which is what
    the paper describes. For ``mix_step < T`` the two agree.

    Args:
        model: the base classifier.
        x: clean images ``[B, C, H, W]`` in [0, 1].
        labels: ``[B]``.
        noise: ``[B * m, C, H, W]``, grouped by image.
        num_steps: T >= 1.
        step_size: alpha, in raw l2 units.
        mix_step: which iterate is ``init`` (0 <= mix_step <= T).
        maxnorm: the l2 bound of every iterate (``None``: unbounded).
        maxnorm_s: the l2 bound of ``init`` (``None``: unbounded).

    Returns:
        ``MixIterates(init, adv)``, both detached.
    """
    m = noise.shape[0] // x.shape[0]
    x = x.detach()
    adv = x
    init = x
    for step in range(num_steps):
        if step == mix_step:
            init = adv
        grad = _input_grad(lambda point: smoothed_nll(model(copies(point, m) + noise), labels, m).sum(), adv)
        adv = _project_then_clamp(adv + step_size * unit_eps(grad), x, maxnorm)
    if mix_step >= num_steps:
        init = adv
    return MixIterates(init=_project_then_clamp(init, x, maxnorm_s), adv=adv)


def _project_then_clamp(point: Tensor, center: Tensor, radius: float | None) -> Tensor:
    """Renorm ``point - center`` to ``radius`` (when given), then clamp to [0, 1] (Jeong's ``_project``)."""
    if radius is not None:
        point = center + project_l2(point - center, radius)
    return point.clamp(0, 1).detach()


def restandardize(noise: Tensor, reference: Tensor) -> Tensor:
    """CAT-RS's re-standardisation: ``(noise - mean) / rms * rms_ref + mean_ref``, per row.

    ``mean`` is the row mean and ``rms = sqrt(mean(noise ** 2))`` the *uncentred* root mean square, not a centred
    standard deviation, exactly as the authors' ``KL_PGD``. The result has the reference row's mean; its spread
    matches the reference's only approximately (exactly when both means are 0), which for Gaussian noise in
    high dimension is the case up to O(1/sqrt(d)).
    """
    mean = _per_row(noise.flatten(1).mean(dim=1), noise)
    rms = _per_row(noise.flatten(1).pow(2).mean(dim=1).sqrt(), noise)
    mean_ref = _per_row(reference.flatten(1).mean(dim=1), reference)
    rms_ref = _per_row(reference.flatten(1).pow(2).mean(dim=1).sqrt(), reference)
    return (noise - mean) / rms * rms_ref + mean_ref


def noise_kl_pgd(model: Model, x: Tensor, targets: Tensor, noise: Tensor, epsilon: float, num_steps: int) -> Tensor:
    """CAT-RS's worst-case noise search (Jeong, Kim and Shin 2023, eq. (7); ``KL_PGD`` in ``train_catrs.py``).

    Each of the m noise samples delta_i of each image is moved to maximise KL(y_hat || softmax(f(x + delta_i)))
    within an l2 ball of radius ``epsilon`` around itself: T steps of size 2 * epsilon / T along the per-row
    gradient normalised with (||g|| + 1e-8), each followed by the projection onto the ball around the original
    noise and the re-standardisation of every row to the original row's mean and (uncentred) RMS
    (:func:`restandardize`). The re-standardised noise can leave the ball slightly; the search starts from the
    given noise (no random start), as in the reference.

    Args:
        model: the base classifier.
        x: clean images ``[B, C, H, W]`` in [0, 1].
        targets: the soft labels y_hat ``[B, num_classes]`` (rows sum to 1; constants).
        noise: the starting noise ``[B * m, C, H, W]``, grouped by image.
        epsilon: the l2 radius around each starting noise sample (>= 0).
        num_steps: T >= 1.

    Returns:
        The adversarial noise ``[B * m, C, H, W]``, detached, in the same layout.
    """
    m = noise.shape[0] // x.shape[0]
    inputs = copies(x.detach(), m)
    target_rows = copies(targets.detach(), m)
    start = noise.detach()
    if epsilon == 0 or num_steps == 0:
        return start.clone()
    step = 2 * epsilon / num_steps

    def kl_sum(point: Tensor) -> Tensor:
        log_probs = F.log_softmax(model(inputs + point), dim=1)
        return F.kl_div(log_probs, target_rows, reduction="none").sum() / m

    current = start
    for _ in range(num_steps):
        grad = _input_grad(kl_sum, current)
        moved = current + step * unit_eps(grad)
        moved = start + project_l2(moved - start, epsilon)
        current = restandardize(moved, start).detach()
    return current


RADIUS_PGD_NORMS = ("l2", "linf")


def radius_pgd_noise(
    model: Model, x: Tensor, labels: Tensor, noise: Tensor, step_size: float, num_steps: int, norm: str = "l2"
) -> Tensor:
    """Sun et al.'s adaptive attack on the noise itself (ICML 2025, ``radius_PGD`` in acr-weakness ``train.py``).

    Each noise sample delta_j of each image is moved to raise the cross-entropy of f(x + delta_j) while keeping its
    own l2 norm: each of the ``num_steps`` steps adds ``step_size`` times the per-row direction g / (||g|| + 1e-8)
    (``norm="l2"``; ``"linf"``: sign(g) / sqrt(d)), g the gradient of the summed cross-entropy, then rescales every
    row to its starting norm, delta * ||delta_0|| / (||delta|| + 1e-8). There is no epsilon-ball: the authors'
    ``--epsilon`` is the step size. The row kept is the first iterate the base classifier already gets wrong (the
    starting noise itself if f(x + delta_0) is wrong), else the iterate after the last step, which is never
    evaluated; each row is judged on its own hard prediction.

    Args:
        model: the base classifier (run it inside :func:`frozen`, as the reference runs in eval mode).
        x: clean images ``[B, C, H, W]`` in [0, 1].
        labels: ``[B]``.
        noise: ``[B * m, C, H, W]``, grouped by image.
        step_size: the authors' ``--epsilon`` (>= 0).
        num_steps: the authors' ``--attack_steps`` (>= 1).
        norm: ``l2`` (``--attacker pgd_radius_l2``) or ``linf`` (``pgd_radius_linf``).

    Returns:
        The attacked noise ``[B * m, C, H, W]``, detached, in the same layout.
    """
    if norm not in RADIUS_PGD_NORMS:
        raise ValueError(f"norm must be one of {list(RADIUS_PGD_NORMS)}, got {norm!r}")
    m = noise.shape[0] // x.shape[0]
    inputs = copies(x.detach(), m)
    rows = copies(labels, m)
    start = noise.detach()
    start_norms = _per_row(row_norms(start), start)
    dim = start[0].numel()
    current = start
    best = torch.zeros_like(start)
    found = torch.zeros(len(start), dtype=torch.bool, device=start.device)
    for _ in range(num_steps):
        outputs: dict[str, Tensor] = {}

        def loss_fn(point: Tensor, outputs: dict[str, Tensor] = outputs) -> Tensor:
            logits = model(inputs + point)
            outputs["wrong"] = logits.detach().argmax(dim=1) != rows
            return F.cross_entropy(logits, rows, reduction="sum") / m

        grad = _input_grad(loss_fn, current)
        first = outputs["wrong"] & ~found
        best[first] = current[first]
        found |= first
        if norm == "l2":
            current = current + step_size * unit_eps(grad)
        else:
            current = current + step_size * grad.sign() / math.sqrt(dim)
        current = (current / (_per_row(row_norms(current), current) + 1e-8) * start_norms).detach()
    best[~found] = current[~found]
    return best
