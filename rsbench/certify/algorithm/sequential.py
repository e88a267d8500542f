"""Sequential CERTIFY: stop sampling an image once its certificate is decided, at the same overall alpha.

Cohen et al.'s CERTIFY spends n = 100,000 estimation samples on every image, although most images are decided
after a few thousand: an image the base classifier always gets right is certified up to the table's largest radius
long before n, and an image it gets wrong half of the time will abstain whatever n is.

The class is chosen beforehand from n0 independent selection samples, exactly as in CERTIFY. The estimation samples
are then drawn look by look, and a sequential design (:mod:`rsbench.certify.algorithm.designs`: ``informed``, the
default; ``betting``; ``looks``, rsbench's first; ``adaptive``, Horváth et al.'s) decides after each look which images
stop and which lower bound on pA each reports; the design pays for its looks (a confidence sequence, or alpha split over
the looks), so the certificate holds with probability >= 1 - alpha whatever the stopping time. The reported radius
is min(sigma * Phi^-1(pA_lower), the design's radius cap), or ABSTAIN when pA_lower < 1/2.

:func:`certify_group` certifies several images together: at each look, every image still running draws the same
number of new samples from its own estimation stream, packed into full forward passes, and the design decides for
all of them at once with :func:`rsbench.certify.algorithm.designs.run_design`, the same loop the replay benchmark runs
on simulated votes. For the usual image sizes (C*H*W a multiple of 16) an image's noise does not depend on how its
samples were split into batches, so its certificate does not depend on which other images ran beside it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from rsbench.certify.algorithm.bounds import check_alpha
from rsbench.certify.algorithm.designs import Design, Goal, LookSchedule, LooksDesign, run_design
from rsbench.certify.algorithm.seeding import ESTIMATION, make_generator
from rsbench.certify.algorithm.smooth import Certificate, Smooth

__all__ = ["LookSchedule", "certify_group", "certify_sequential"]


def certify_group(
    smooth: Smooth,
    xs: Tensor,
    n0: int,
    batch_size: int,
    design: Design,
    *,
    seeds: Sequence[int | None] | None = None,
) -> list[Certificate]:
    """Sequential CERTIFY of each image of ``xs`` with ``design`` (see the module docstring for the guarantee).

    Args:
        smooth: the smoothed classifier (its sigma must be the design's; its base classifier, precision and noise
            are used).
        xs: images ``[K, C, H, W]`` in [0,1] pixel space.
        n0: selection samples per image.
        batch_size: noisy samples per forward pass.
        design: the sequential design (its goal holds alpha, the sample budget and the targets).
        seeds: one seed per image: its selection and estimation streams (independent), as in fixed-n CERTIFY.

    Returns:
        One certificate per image; its ``n`` is the number of estimation samples the image actually drew.
    """
    if abs(design.goal.sigma - smooth.sigma) > 1e-12:
        raise ValueError(f"the design is for sigma={design.goal.sigma}, the smoothed classifier has {smooth.sigma}")
    start = time.perf_counter()
    seeds = list(seeds) if seeds is not None else [None] * len(xs)
    if len(seeds) != len(xs):
        raise ValueError(f"got {len(seeds)} seeds for {len(xs)} images")
    votes = smooth.select_votes(xs, n0, batch_size, seeds=seeds)
    selected = votes.argmax(axis=1)
    device = smooth.device_for(xs)
    streams = [None if seed is None else make_generator(device, seed, ESTIMATION) for seed in seeds]
    counts = np.zeros(len(xs), dtype=np.int64)
    drawn = 0

    def counts_at(samples: int, running: np.ndarray) -> np.ndarray:
        nonlocal drawn
        images = xs[torch.as_tensor(running, device=xs.device)]
        votes = smooth.sample_counts_batch(images, samples - drawn, batch_size, [streams[i] for i in running])
        counts[running] += votes[np.arange(len(running)), selected[running]]
        drawn = samples
        return counts[running]

    decisions = run_design(design, len(xs), counts_at, (votes[np.arange(len(xs)), selected], n0))
    seconds = (time.perf_counter() - start) / len(xs)
    return [
        Certificate(
            prediction=int(selected[i]) if decisions.certified[i] else smooth.ABSTAIN,
            radius=float(decisions.radius[i]),
            p_a_lower=float(decisions.lower[i]),
            count=int(decisions.counts[i]),
            selected=int(selected[i]),
            n0=n0,
            n=int(decisions.samples[i]),
            alpha=design.goal.alpha,
            sigma=smooth.sigma,
            seconds=seconds,
        )
        for i in range(len(xs))
    ]


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
    """Sequential CERTIFY of one image with rsbench's first design, ``looks`` (Clopper-Pearson at alpha / S).

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
    goal = Goal.grid(smooth.sigma, alpha, schedule.max_samples, radius_cap, radius_step)
    design = LooksDesign(goal, first_look=schedule.first, growth=schedule.growth)
    (certificate,) = certify_group(smooth, x.unsqueeze(0), n0, batch_size, design, seeds=[seed])
    return certificate
