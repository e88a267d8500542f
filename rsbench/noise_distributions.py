"""The smoothing distributions, each set by its per-coordinate standard deviation sigma (Yang et al.'s convention).

Yang, Duan, Hu, Salman, Razenshteyn and Li (ICML 2020, "Randomized smoothing of all shapes and sizes") compare
noises at matched variance, and their code (tonyduan/rs4a, ``src/noises/noises.py``) builds every noise from sigma
with ``lambd = sigma / _sigma()``, where ``_sigma()`` is the per-coordinate standard deviation at scale 1. rsbench
does the same, so ``sigma=0.5`` is the same noise power whichever noise is chosen:

- ``gaussian``: eps ~ N(0, sigma^2 I), scale lambda = sigma (Cohen et al. 2019);
- ``laplace``: i.i.d. coordinates with density exp(-|eps_i| / lambda) / (2 lambda), lambda = sigma / sqrt(2)
  (Teng et al., ICLR 2020; rs4a ``Laplace._sigma() = 2 ** 0.5``);
- ``uniform``: eps ~ U([-lambda, lambda]^d), lambda = sigma * sqrt(3) (Yang et al.; rs4a ``Uniform._sigma() =
  3 ** -0.5``).

Every draw is made in float32 (float64 for float64 inputs) on the input's device from an optional
``torch.Generator``, so certification can seed its streams per image; noise is never clamped. Which norm each noise
certifies, and with which closed form, is :mod:`rsbench.certify.algorithm.certificates`' business, not this module's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class NoiseDistribution:
    """A zero-mean product distribution with per-coordinate standard deviation sigma.

    Attributes:
        name: the config name (``noise=<name>``).
        scale_per_sigma: lambda / sigma, the distribution's own scale parameter per unit of standard deviation.
        law: the density in words, for records and messages.
    """

    name: str
    scale_per_sigma: float
    law: str

    def scale(self, sigma: float) -> float:
        """The scale parameter lambda of this noise at per-coordinate standard deviation ``sigma``."""
        return sigma * self.scale_per_sigma

    def fill_(self, out: Tensor, sigma: float, generator: torch.Generator | None = None) -> Tensor:
        """Overwrite ``out`` (float32 or float64) with a draw at standard deviation ``sigma``; return it."""
        raise NotImplementedError

    def unit(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """A fresh draw of unit variance with the shape and device of ``like`` (float32, or float64 for float64)."""
        dtype = torch.float64 if like.dtype == torch.float64 else torch.float32
        return self.fill_(torch.empty(like.shape, dtype=dtype, device=like.device), 1.0, generator)


class Gaussian(NoiseDistribution):
    """N(0, sigma^2) per coordinate."""

    def __init__(self) -> None:
        super().__init__("gaussian", 1.0, "N(0, sigma^2 I)")

    def fill_(self, out: Tensor, sigma: float, generator: torch.Generator | None = None) -> Tensor:
        """``out.normal_(0, sigma)``: the call CERTIFY has always made, so Gaussian draws are unchanged."""
        return out.normal_(0.0, sigma, generator=generator)


class Laplace(NoiseDistribution):
    """Laplace(0, lambda) per coordinate, lambda = sigma / sqrt(2) (variance 2 lambda^2 = sigma^2)."""

    def __init__(self) -> None:
        super().__init__("laplace", 1 / math.sqrt(2.0), "density prod_i exp(-|eps_i| / lambda) / (2 lambda)")

    def fill_(self, out: Tensor, sigma: float, generator: torch.Generator | None = None) -> Tensor:
        """A random sign times an Exponential(mean lambda) draw: exactly Laplace(0, lambda), never infinite.

        (An inverse-CDF draw, log of a uniform in [0, 1), would return -inf whenever the uniform is exactly 0,
        which at float32 happens about once per 2^24 coordinates: several times per image at n = 100,000.)
        """
        out.exponential_(1.0 / self.scale(sigma), generator=generator)
        signs = torch.empty_like(out).bernoulli_(0.5, generator=generator)
        return out.mul_(signs.mul_(2.0).sub_(1.0))


class Uniform(NoiseDistribution):
    """U([-lambda, lambda]) per coordinate, lambda = sigma * sqrt(3) (variance lambda^2 / 3 = sigma^2)."""

    def __init__(self) -> None:
        super().__init__("uniform", math.sqrt(3.0), "uniform on the cube [-lambda, lambda]^d")

    def fill_(self, out: Tensor, sigma: float, generator: torch.Generator | None = None) -> Tensor:
        """``out.uniform_(-lambda, lambda)``."""
        scale = self.scale(sigma)
        return out.uniform_(-scale, scale, generator=generator)


GAUSSIAN = Gaussian()
NOISES: dict[str, NoiseDistribution] = {noise.name: noise for noise in (GAUSSIAN, Laplace(), Uniform())}


def noise_distribution(name: str, key: str = "noise") -> NoiseDistribution:
    """The noise called ``name``; a ``ValueError`` naming ``key``, the value and the choices otherwise."""
    if name not in NOISES:
        raise ValueError(f"{key} must be one of {sorted(NOISES)}, got {name!r}")
    return NOISES[name]
