"""Sequential CERTIFY: stop sampling an image once its certificate is decided, at the same overall alpha.

Cohen et al.'s CERTIFY spends n = 100,000 estimation samples on every image, although most images are decided
after a few hundred: an image the base classifier always gets right is certified up to any reasonable radius long
before n, and an image it gets wrong half of the time will abstain whatever n is.

This mode draws the estimation samples in stages of growing cumulative size n_1 < n_2 < ... < n_S <= n_max (a fixed
schedule) and, after each stage t, computes the one-sided Clopper-Pearson lower bound LCB_t on pA from the votes so
far at level alpha / S. By the union bound, P(pA < LCB_t for some t) <= sum_t alpha / S = alpha, so the lower bound
at *any* stopping time is valid with probability >= 1 - alpha, whatever rule decides when to stop (Bonferroni
alpha-spending over a fixed set of looks; certify_theory.md section 3). The class is chosen beforehand from n0
independent selection samples, exactly as in CERTIFY.

Stopping rule (it only affects cost, never soundness): stop after stage t when
  - LCB_t >= Phi(radius_cap / sigma): the image is certified up to the configured cap, the most this mode reports;
  - the upper bound UCB_t (also at alpha / S) cannot reach the next target: 1/2 while not certified (then the image
    abstains), or the next multiple of ``radius_step`` above the radius certified so far; more samples would then
    almost surely not move the certificate into the next grid bin of the certified-accuracy table;
  - n_max samples are drawn.
The reported radius is min(sigma * Phi^-1(LCB_T), radius_cap), or ABSTAIN when LCB_T < 1/2.

Compared with fixed-n CERTIFY at the same alpha, each look pays a factor S in its failure budget (for all-correct
votes the bound alpha^(1/n) becomes (alpha/S)^(1/n): about 2% less radius at n = 100,000 and S = 8), and radii are
capped: use the fixed-n mode for ACR tables, this mode for certified accuracy at chosen radii.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint
from torch import Tensor

from rsbench.certify.bounds import certified_radius, check_alpha, clopper_pearson_lower
from rsbench.certify.seeding import ESTIMATION, SELECTION, make_generator
from rsbench.certify.smooth import Certificate, Smooth


@dataclass(frozen=True)
class LookSchedule:
    """Cumulative estimation sample counts after which the certificate is checked.

    Attributes:
        first: samples in the first stage.
        growth: each stage's cumulative count is the previous one times ``growth``.
        max_samples: the last look (n_max), also the most samples any image gets.
    """

    first: int = 1000
    growth: float = 2.0
    max_samples: int = 100_000

    def __post_init__(self) -> None:
        if self.first < 1 or self.max_samples < self.first:
            raise ValueError(f"need 1 <= first ({self.first}) <= max_samples ({self.max_samples})")
        if self.growth <= 1:
            raise ValueError(f"growth must be > 1, got {self.growth}")

    def looks(self) -> list[int]:
        """The cumulative counts n_1 < ... < n_S = max_samples.

        >>> LookSchedule(1000, 2.0, 10_000).looks()
        [1000, 2000, 4000, 8000, 10000]
        """
        looks = [self.first]
        while looks[-1] < self.max_samples:
            looks.append(min(self.max_samples, max(looks[-1] + 1, math.ceil(looks[-1] * self.growth))))
        return looks


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided (1 - alpha) Clopper-Pearson upper confidence bound (1 when all trials succeed)."""
    return float(proportion_confint(successes, trials, alpha=2 * alpha, method="beta")[1])


def certify_sequential(
    smooth: Smooth,
    x: Tensor,
    n0: int,
    alpha: float,
    batch_size: int,
    *,
    radius_cap: float,
    schedule: LookSchedule,
    radius_step: float = 0.25,
    seed: int | None = None,
) -> Certificate:
    """Sequential CERTIFY of one image (see the module docstring for the guarantee and the stopping rule).

    Args:
        smooth: the smoothed classifier (its sigma, base classifier and precision are used).
        x: one image ``[C, H, W]`` in [0,1] pixel space.
        n0: selection samples.
        alpha: the overall failure probability, spent as alpha / S over the S looks.
        batch_size: noisy samples per forward pass.
        radius_cap: the largest radius reported; sampling stops once it is certified.
        schedule: the looks (cumulative estimation sample counts).
        radius_step: the grid the stopping rule aims at (the certified-accuracy radii).
        seed: makes the selection and estimation streams reproducible (they stay independent).

    Returns:
        The certificate; its ``n`` is the number of estimation samples actually drawn.
    """
    check_alpha(alpha)
    if radius_cap <= 0 or radius_step <= 0:
        raise ValueError(f"radius_cap and radius_step must be > 0, got {radius_cap} and {radius_step}")
    start = time.perf_counter()
    device = smooth.device_for(x)
    selection_stream = None if seed is None else make_generator(device, seed, SELECTION)
    estimation_stream = None if seed is None else make_generator(device, seed, ESTIMATION)
    selected = int(smooth.sample_counts(x, n0, batch_size, selection_stream).argmax())
    looks = schedule.looks()
    stage_alpha = alpha / len(looks)
    cap_probability = float(norm.cdf(radius_cap / smooth.sigma))
    count, drawn, lower = 0, 0, 0.0
    for look in looks:
        count += int(smooth.sample_counts(x, look - drawn, batch_size, estimation_stream)[selected])
        drawn = look
        lower = clopper_pearson_lower(count, drawn, stage_alpha)
        if lower >= cap_probability or _cannot_improve(
            lower, clopper_pearson_upper(count, drawn, stage_alpha), smooth.sigma, radius_step
        ):
            break
    abstain = lower < 0.5
    return Certificate(
        prediction=smooth.ABSTAIN if abstain else selected,
        radius=0.0 if abstain else min(certified_radius(lower, smooth.sigma), radius_cap),
        p_a_lower=lower,
        count=count,
        selected=selected,
        n0=n0,
        n=drawn,
        alpha=alpha,
        sigma=smooth.sigma,
        seconds=time.perf_counter() - start,
    )


def _cannot_improve(lower: float, upper: float, sigma: float, radius_step: float) -> bool:
    """Whether even the upper bound misses the next target: 1/2 (abstaining), or the next grid radius."""
    if lower < 0.5:
        return upper < 0.5
    next_radius = (math.floor(certified_radius(lower, sigma) / radius_step) + 1) * radius_step
    return upper < float(norm.cdf(next_radius / sigma))
