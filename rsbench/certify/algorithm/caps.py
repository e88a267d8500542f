"""The radius cap, in one place: the largest radius a certification can report, and the grid it reports.

- :func:`fixed_n_cap`: Cohen et al.'s CERTIFY with n estimation samples can return no radius above the one n of n
  votes give, the radius at pA_lower = alpha^(1/n) (sigma * Phi^-1(alpha^(1/n)) for Gaussian noise and l2; another
  threat model's closed form otherwise, :class:`rsbench.certify.algorithm.threat.ThreatModel`).
- :func:`table_cap`: the largest radius of the grid 0, step, ... up to the papers' tables' largest radius
  (:data:`TABLE_LARGEST`, 2.5) that fixed n can reach: what sequential CERTIFY decides by default, and the radii the
  replay benchmark compares.
- :func:`reported_cap`: the cap of a run's ``metrics.json`` grid: the fixed-n cap, or in sequential mode the
  design's (the configured ``certify.radius_cap``, the one radius target, or :func:`table_cap`, lowered to what the
  design's bound can reach).

Every other module asks these (the settings, the designs, the summary, the report, the benchmarks); the closed form
of the Gaussian cap itself is :func:`rsbench.certify.algorithm.bounds.radius_cap`.
"""

from __future__ import annotations

import math
from typing import Protocol

from rsbench.certify.algorithm.bounds import clopper_pearson_lower, radius_cap


class ThreatModel(Protocol):
    """What the cap needs of a threat model (:class:`~rsbench.certify.algorithm.threat.ThreatModel` asks it here)."""

    @property
    def is_default(self) -> bool: ...  # noqa: D102

    def radius(self, p_a_lower: float, sigma: float, dim: int) -> float: ...  # noqa: D102


TABLE_LARGEST = 2.5
"""The largest radius of the papers' certified-accuracy tables (0, 0.25, ..., 2.5: CAT-RS Table 1, whose logs
rsbench ships); sequential CERTIFY decides the grid up to it by default."""


def fixed_n_cap(sigma: float, n: int, alpha: float, threat: ThreatModel | None = None, dim: int = 0) -> float:
    """The largest radius fixed-n CERTIFY can return: the radius of n votes out of n (Clopper-Pearson at alpha).

    Args:
        sigma: the noise level.
        n: estimation samples.
        alpha: the failure probability.
        threat: the threat model (Gaussian noise and l2 when ``None``).
        dim: the input dimension (C * H * W), which l-infinity radii and norm conversions need.
    """
    if threat is None or threat.is_default:
        return radius_cap(sigma, n, alpha)
    return threat.radius(clopper_pearson_lower(n, n, alpha), sigma, dim)


def table_cap(sigma: float, n: int, alpha: float, step: float = 0.25, largest: float | None = TABLE_LARGEST) -> float:
    """The largest radius of the grid 0, step, ... that is at most ``largest`` and below fixed n's cap.

    ``largest=None``: the whole grid up to the cap. Never below ``step`` (a cap below one step certifies nothing).

    >>> table_cap(0.25, 100_000, 0.001), table_cap(1.0, 100_000, 0.001), table_cap(1.0, 100_000, 0.001, largest=None)
    (0.75, 2.5, 3.75)
    """
    top = fixed_n_cap(sigma, n, alpha)
    top = top if largest is None else min(largest, top)
    return max(step, step * math.floor(top / step + 1e-9))


def table_radii(
    sigma: float, n: int, alpha: float, step: float = 0.25, largest: float | None = TABLE_LARGEST
) -> tuple[float, ...]:
    """The grid 0, step, ... up to :func:`table_cap` (the certified-accuracy table's radii).

    >>> table_radii(0.25, 100_000, 0.001)
    (0.0, 0.25, 0.5, 0.75)
    """
    top = fixed_n_cap(sigma, n, alpha) if largest is None else min(largest, fixed_n_cap(sigma, n, alpha))
    return tuple(i * step for i in range(math.floor(top / step + 1e-9) + 1))


def reported_cap(
    sigma: float,
    n: int,
    alpha: float,
    threat: ThreatModel | None = None,
    dim: int = 0,
    design_cap: float | None = None,
) -> float:
    """The largest radius of a run's ``metrics.json`` grid (and its plot).

    Args:
        sigma: the largest certification sigma of the rows.
        n: estimation samples (the most per image in sequential mode).
        alpha: the failure probability.
        threat: the threat model (Gaussian noise and l2 when ``None``).
        dim: the input dimension, for l-infinity radii and norm conversions.
        design_cap: in sequential mode, the design's cap (:attr:`rsbench.certify.algorithm.designs.Design.cap`: the
            configured ``certify.radius_cap``, the one radius target or :func:`table_cap`, lowered to what the
            design's bound reaches); ``None``: fixed-n CERTIFY.
    """
    if design_cap is None or (threat is not None and not threat.is_default):
        return fixed_n_cap(sigma, n, alpha, threat, dim)
    return design_cap
