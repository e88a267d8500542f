"""Certified radii in closed form: which norm each noise certifies, and how a radius carries over to other norms.

Every certificate here is a function of CERTIFY's lower bound pA_lower on the top class's probability, with the
runner-up bounded by pB <= 1 - pA_lower as in Cohen et al.; the noise is parameterised by its per-coordinate
standard deviation sigma, and lambda is its own scale (:mod:`rsbench.noise_distributions`). The closed forms and
the conversions are the ones of Yang et al.'s code (tonyduan/rs4a, ``src/noises/noises.py``), checked against it:

- Gaussian, l2: R = sigma * Phi^-1(pA_lower) (Cohen, Rosenfeld and Kolter 2019, Theorem 1; rs4a
  ``Gaussian.certify_l2``).
- Laplace, l1: R = -lambda * log(2 (1 - pA_lower)), lambda = sigma / sqrt(2) (Teng, Lee, Yuan 2020, Theorem 1, whose
  radius max{lambda/2 log(pA/pB), -lambda log(1 - pA + pB)} is this at pB = 1 - pA; rs4a ``Laplace.certify_l1``).
- Uniform on [-lambda, lambda]^d, l1: R = 2 lambda (pA_lower - 1/2), lambda = sigma * sqrt(3) (Yang et al. 2020;
  rs4a ``Uniform.certify_l1``). The two cubes around x and x + delta overlap in a fraction prod_i (1 - |delta_i| /
  (2 lambda)) >= 1 - ||delta||_1 / (2 lambda) of their volume, and the top class keeps its lead while the
  non-overlapping mass 1 - overlap stays below pA - 1/2.
- Uniform on [-lambda, lambda]^d, l-infinity: R = 2 lambda (1 - (3/2 - pA_lower)^(1/d)) (Yang et al. 2020; rs4a
  ``Uniform.certify_linf``): the same argument with the worst shift, |delta_i| = ||delta||_inf in every coordinate,
  overlap (1 - r / (2 lambda))^d > 3/2 - pA.

A norm the noise does not certify directly comes from the norm inequalities in R^d, as rs4a's
``_certify_lp_convert`` does: an l_p ball of radius R contains the l_q ball of radius R / d^max(0, 1/p - 1/q)
(||delta||_2 <= ||delta||_1, ||delta||_2 <= sqrt(d) ||delta||_inf, ||delta||_1 <= sqrt(d) ||delta||_2, ...), and of
several direct certificates the largest converted radius is taken. So l-infinity from Gaussian noise is
R_l2 / sqrt(d), which Yang et al. show (with Banach space cotypes) is within a constant of what any noise
can certify in high dimension, and l1 from Gaussian noise is R_l2 itself.

Where rsbench and rs4a differ (rs4a is followed in every closed form): rs4a bounds pA with the two-sided
Clopper-Pearson interval at level alpha (``proportion_confint(..., alpha=alpha)``, a one-sided alpha/2 bound) and
never abstains, reporting negative radii below pA = 1/2; rsbench keeps Cohen et al.'s one-sided bound at alpha and
abstains below 1/2 for every noise. rs4a's l-infinity radius for Laplace noise is an approximation in its default
``approx`` mode (lambda * Phi^-1(pA) / sqrt(d), not a guaranteed bound) and a numerical table otherwise; rsbench
derives it from the l1 certificate instead (R_l1 / d), which is guaranteed.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rsbench.certify.algorithm.bounds import certified_radius

NORMS: tuple[str, ...] = ("l1", "l2", "linf")
_INVERSE_P = {"l1": 1.0, "l2": 0.5, "linf": 0.0}  # 1/p of each norm

Radius = Callable[[float, float, int], float]
"""A closed form R(pA_lower, sigma, d) in [0,1] pixel units; only meaningful for pA_lower >= 1/2."""


def gaussian_l2(p_a_lower: float, sigma: float, dim: int) -> float:
    """R = sigma * Phi^-1(pA_lower) (Cohen et al. 2019, Theorem 1 with pB = 1 - pA)."""
    return certified_radius(p_a_lower, sigma)


def laplace_l1(p_a_lower: float, sigma: float, dim: int) -> float:
    """R = -lambda * log(2 (1 - pA_lower)), lambda = sigma / sqrt(2) (Teng et al. 2020, Theorem 1, pB = 1 - pA).

    ``log1p`` keeps the radius exact when pA_lower is close to 1/2; pA_lower = 1 gives an infinite radius (CERTIFY's
    bound never reaches 1: all n of n votes give alpha^(1/n)).
    """
    scale = sigma / math.sqrt(2.0)
    if p_a_lower >= 1.0:
        return math.inf
    return -scale * math.log1p(1.0 - 2.0 * p_a_lower)


def uniform_l1(p_a_lower: float, sigma: float, dim: int) -> float:
    """R = 2 lambda (pA_lower - 1/2), lambda = sigma * sqrt(3) (Yang et al. 2020; rs4a ``Uniform.certify_l1``)."""
    return 2.0 * sigma * math.sqrt(3.0) * (p_a_lower - 0.5)


def uniform_linf(p_a_lower: float, sigma: float, dim: int) -> float:
    """R = 2 lambda (1 - (3/2 - pA_lower)^(1/d)), lambda = sigma * sqrt(3) (Yang et al. 2020; rs4a).

    Written with ``expm1``/``log`` so that the tiny radii of large d keep their digits.
    """
    return -2.0 * sigma * math.sqrt(3.0) * math.expm1(math.log(1.5 - p_a_lower) / dim)


DIRECT: dict[str, dict[str, Radius]] = {
    "gaussian": {"l2": gaussian_l2},
    "laplace": {"l1": laplace_l1},
    "uniform": {"l1": uniform_l1, "linf": uniform_linf},
}
"""The norms each noise certifies directly, with their closed forms (rs4a's ``__adv__`` lists)."""

SOURCES: dict[Radius, str] = {
    gaussian_l2: "R = sigma * Phi^-1(pA_lower) (Cohen et al. 2019, Theorem 1)",
    laplace_l1: "R = -lambda * log(2 (1 - pA_lower)), lambda = sigma / sqrt(2) (Teng et al. 2020, Theorem 1)",
    uniform_l1: "R = 2 lambda (pA_lower - 1/2), lambda = sigma * sqrt(3) (Yang et al. 2020, uniform noise)",
    uniform_linf: "R = 2 lambda (1 - (3/2 - pA_lower)^(1/d)), lambda = sigma * sqrt(3) (Yang et al. 2020)",
}


def conversion_factor(certified: str, wanted: str, dim: int) -> float:
    """The c with B_wanted(R / c) inside B_certified(R) in R^d: d^max(0, 1/p - 1/q), p certified, q wanted.

    >>> conversion_factor("l2", "linf", 784), conversion_factor("l2", "l1", 784), conversion_factor("l1", "l2", 4)
    (28.0, 1.0, 2.0)
    """
    exponent = max(0.0, _INVERSE_P[certified] - _INVERSE_P[wanted])
    return float(dim**exponent) if exponent else 1.0
