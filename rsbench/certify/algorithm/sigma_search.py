"""Per-input sigma search of data-dependent smoothing (Alfarra, Bibi, Torr and Ghanem; the paper's Algorithm 1).

For each input x, K steps of gradient ascent on the differentiable radius proxy (the paper's eq. 3)

    R(sigma) = sigma / 2 * (Phi^-1(E_A) - Phi^-1(E_B)),   E = (1/n) sum_i softmax(f(x + sigma * eps_i)),

with E_A, E_B the top two mean softmax scores and eps_i ~ N(0, I) drawn afresh at every step (the
reparameterisation trick: the gradient flows through sigma * eps_i). As in the authors' code, the scores are
clamped to [0.02, 0.98] before Phi^-1 and the step is plain ``sigma += lr * dR/dsigma``. Two differences, both
documented: the network's logits go through a softmax here (the authors' networks end in one; ours return
logits, and feeding logits to Phi^-1 would give meaningless sigmas), and sigma is kept >= ``min_sigma`` (their
code has no positivity constraint; a negative sigma would flip the radius' sign).

The ascent maximises the proxy itself (``objective="radius"``: ``OptimzeSigma``, DS-Cohen, DS-MACER and the
ImageNet scripts) or, as the authors' CIFAR-10 DS-SmoothAdv script (``CIFAR10/train_smooth_adv.py::get_sigma``)
does, ``relu(R(sigma))`` (``objective="relu_radius"``). The two agree wherever R > 0; relu gives a zero gradient
where R <= 0, i.e. where the clamped top two scores tie exactly (R = 0; the tie's own gradient is dropped) or sigma
is negative (their code has no floor; here ``min_sigma`` rules it out). The paper's n and objective for each training
method are in that method's config (``conf/method/ddrs.yaml`` per base method, ``certify_defaults`` of the others).

Sigma and the noise draws are kept in the inputs' noise dtype (float32, float64 for float64 inputs;
:func:`rsbench.noise.noise_dtype`). Until the golden tests (``tests/golden``) compared the search with the authors'
``OptimzeSigma`` in float64 they were always float32, which moved a float64 search by up to 7.4e-8 relative.

A radius certified with the sigma found here is NOT a sound certificate for the input-dependent classifier
(certify_theory.md section 2): rsbench labels every such certificate ``sound = false``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch.distributions import Normal

from rsbench.noise import check_sigma, noise_dtype

DEFAULT_CLAMP = (0.02, 0.98)
OBJECTIVES = ("radius", "relu_radius")


def radius_proxy(probabilities: Tensor, sigma: Tensor, clamp: tuple[float, float] = DEFAULT_CLAMP) -> Tensor:
    """sigma/2 * (Phi^-1(p1) - Phi^-1(p2)) per row of mean class probabilities ``[B, C]``, scores clamped.

    >>> radius_proxy(torch.tensor([[0.8, 0.15, 0.05]]), torch.tensor([0.5])).round(decimals=4)
    tensor([0.4695])
    """
    top_two = probabilities.topk(2, dim=1).values.clamp(*clamp)
    normal = Normal(torch.zeros((), device=probabilities.device), torch.ones((), device=probabilities.device))
    return sigma / 2 * (normal.icdf(top_two[:, 0]) - normal.icdf(top_two[:, 1]))


def optimize_sigma(
    classifier: Callable[[Tensor], Tensor],
    x: Tensor,
    sigma_init: Tensor | float,
    *,
    iterations: int,
    lr: float,
    samples: int,
    clamp: tuple[float, float] = DEFAULT_CLAMP,
    min_sigma: float = 1e-3,
    generator: torch.Generator | None = None,
    objective: str = "radius",
) -> Tensor:
    """Algorithm 1: per-input sigma after ``iterations`` gradient-ascent steps on :func:`radius_proxy`.

    Batched over the inputs, on the classifier's device; the classifier's parameters receive no gradient.
    The caller chooses the classifier's mode (rsbench uses eval mode at certification; the authors' training
    loop runs it in train mode).

    Args:
        classifier: maps a batch in [0,1] pixel space to logits.
        x: inputs ``[B, C, H, W]``.
        sigma_init: the starting sigma, a float or one per input ``[B]`` (sigma_0).
        iterations: K (0 returns ``sigma_init``).
        lr: the ascent step alpha.
        samples: n, noise draws per input and step.
        clamp: the score clamp before Phi^-1.
        min_sigma: sigma never goes below this.
        generator: the random stream of the noise draws.
        objective: ``radius`` (ascend R) or ``relu_radius`` (ascend relu(R), the authors' DS-SmoothAdv).

    Returns:
        The optimised sigma per input, ``[B]``, detached, in float32 (float64 for float64 inputs).
    """
    if iterations < 0 or samples < 1 or lr < 0:
        raise ValueError(f"need iterations >= 0, samples >= 1, lr >= 0; got {iterations}, {samples}, {lr}")
    if objective not in OBJECTIVES:
        raise ValueError(f"the sigma-search objective must be one of {list(OBJECTIVES)}, got {objective!r}")
    batch = x.shape[0]
    # Gradients are needed even when called from an inference-mode context (Lightning's test loop).
    with torch.inference_mode(False), torch.enable_grad():
        dtype = noise_dtype(x.dtype)
        sigma = torch.as_tensor(sigma_init, dtype=dtype, device=x.device).expand(batch).clone()
        check_sigma(sigma, "sigma_init")
        repeated = x.clone().repeat_interleave(samples, dim=0)
        for _ in range(iterations):
            sigma.requires_grad_(True)
            eps = torch.randn(repeated.shape, dtype=dtype, device=x.device, generator=generator)
            noisy = repeated + sigma.repeat_interleave(samples).view(-1, *([1] * (x.dim() - 1))) * eps
            probabilities = classifier(noisy).softmax(dim=1).view(batch, samples, -1).mean(dim=1)
            radius = radius_proxy(probabilities, sigma, clamp)
            if objective == "relu_radius":
                radius = torch.relu(radius)
            (gradient,) = torch.autograd.grad(radius.sum(), sigma)
            sigma = (sigma.detach() + lr * gradient).clamp(min=min_sigma)
    return sigma.detach()
