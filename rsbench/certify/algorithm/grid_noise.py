"""Noise on the input grid: randomized smoothing that stays sound in floating point (Voráček and Hein, ICLR 2023).

Cohen et al.'s theorem is about x + eps with eps exactly Gaussian. A float32 sampler draws eps from a finite set of
floats and ``x + eps`` is rounded, so the law of the noisy input depends on x through its low-order bits: a base
classifier can read those bits, and Voráček and Hein ("Sound randomized smoothing in floating-point arithmetic",
ICLR 2023) forge certificates that way (a radius 1.26 certified with an adversarial example at distance 0.8, and
false certificates on CIFAR-10). ``tests/certify/test_grid_noise.py`` builds such a classifier against rsbench's float
noise. Their fix, read from vvoracek/Sound-Randomized-Smoothing (``certifier.py``) and reimplemented here: for images
on the grid {0, 1/L, ..., 1} (L = 255 for 8-bit images), draw the noise itself on the grid,

    J = round(L * eps) with eps ~ N(0, sigma^2 I), sampled exactly from uniform integers (fair coin flips),

and feed the network (k + J) / L, where k = L x are the image's integer pixel values. Since x is on the grid,
round(L (x + eps)) = k + round(L eps), so the network sees f(Q(x + eps)) with Q the rounding to the grid: the smoothed
classifier of the fixed base classifier f o Q, at every grid input, and f o Q is evaluated on exact grid values
whose float32 form depends only on the integer k + J. Cohen et al.'s Theorem 1 applies to f o Q: a certificate of
radius R at x holds for every grid image x' (every 8-bit image) with ||x' - x||_2 < R.

Exact sampling. J's law is P(J = j) = Phi((j + 1/2) / (L sigma)) - Phi((j - 1/2) / (L sigma)). Thresholds
T_j = round(2^62 Phi((j + 1/2) / (L sigma))) are computed once with mpmath at 60 digits (mpmath ships with torch,
through sympy); a uniform integer U in [0, 2^62) gives J = #{j : T_j <= U} - M. Each bin's probability is off by at
most 2^-62, and the support |j| <= M = ceil(10 L sigma) drops a tail of mass 2 Phi(-10) < 2^-64, so each coordinate's
law is within (2M + 2) 2^-62 of the discretised Gaussian in total variation: about 1e-15 at sigma = 1; over the n d
draws of CERTIFY (1e5 samples of 3,072 pixels) at most 3e-7, which the certificate's alpha absorbs many times over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import torch
from torch import Tensor

from rsbench.certify.algorithm.smooth import Precision, Smooth

SCALE_BITS = 62
TAIL_SIGMAS = 10.0


@lru_cache(maxsize=16)
def grid_thresholds(levels: int, sigma: float) -> tuple[int, tuple[int, ...]]:
    """(M, T): the integer thresholds T_j = round(2^62 Phi((j + 1/2) / (levels sigma))) for j = -M, ..., M - 1."""
    import mpmath

    if levels < 1 or sigma <= 0:
        raise ValueError(f"need levels >= 1 and sigma > 0, got {levels} and {sigma}")
    mpmath.mp.dps = 60
    support = math.ceil(TAIL_SIGMAS * levels * sigma)
    scale = mpmath.mpf(2) ** SCALE_BITS
    width = mpmath.mpf(levels) * mpmath.mpf(sigma)
    thresholds = tuple(
        int(mpmath.nint(scale * mpmath.ncdf((mpmath.mpf(j) + mpmath.mpf("0.5")) / width)))
        for j in range(-support, support)
    )
    return support, thresholds


def grid_noise(
    shape: torch.Size | tuple[int, ...],
    levels: int,
    sigma: float,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Integer noise J = round(levels * eps), eps ~ N(0, sigma^2), drawn exactly from uniform 62-bit integers."""
    support, thresholds = grid_thresholds(levels, sigma)
    table = torch.tensor(thresholds, dtype=torch.int64, device=device)
    uniform = torch.randint(0, 2**SCALE_BITS, tuple(shape), dtype=torch.int64, device=device, generator=generator)
    return torch.searchsorted(table, uniform, right=True) - support


def grid_values(x: Tensor, levels: int) -> Tensor:
    """The integer pixel values levels * x of an image on the grid; ``ValueError`` for an image off it."""
    scaled = x.double() * levels
    integers = scaled.round()
    off = (scaled - integers).abs().max().item() if x.numel() else 0.0
    if off > 1e-3:
        raise ValueError(
            f"certify.noise_grid={levels} needs images on the grid k/{levels} (8-bit images for 255); a pixel is "
            f"{off:.4f} of a step off it"
        )
    return integers.to(torch.int64)


class GridSmooth(Smooth):
    """:class:`~rsbench.certify.algorithm.smooth.Smooth` with noise on the input grid (see the module docstring).

    Args:
        base_classifier, num_classes, sigma, precision, channels_last: as for ``Smooth``.
        levels: the grid is {0, 1/levels, ..., 1}; 255 for 8-bit images.
        norm: the certified norm, as for ``Smooth`` (the noise is Gaussian: l2, or l1 / l-infinity derived from it).
    """

    def __init__(
        self,
        base_classifier: Callable[[Tensor], Tensor],
        num_classes: int,
        sigma: float,
        *,
        levels: int = 255,
        precision: Precision = "fp32",
        channels_last: bool = False,
        norm: str | None = None,
    ) -> None:
        super().__init__(
            base_classifier, num_classes, sigma, precision=precision, channels_last=channels_last, norm=norm
        )
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise ValueError(f"certify.noise_grid must be an integer >= 1 (255 for 8-bit images), got {levels!r}")
        self.levels = levels

    def fill_noisy(self, out: Tensor, x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Overwrite ``out`` with (k + J) / levels: grid image plus grid noise, exact integers until the division."""
        if out.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"noise must be drawn in float32 or float64, got a {out.dtype} buffer")
        noise = grid_noise(out.shape, self.levels, self.sigma, out.device, generator)
        total = noise.add_(grid_values(x, self.levels).to(out.device))
        return out.copy_(total.to(out.dtype).div_(self.levels))
