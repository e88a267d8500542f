"""The threat model a certificate is about: the norm of the adversary's ball and the noise that smooths.

``ThreatModel(noise, norm)`` turns CERTIFY's lower bound into a radius in ``norm`` for smoothing with ``noise``
(:mod:`rsbench.certify.algorithm.certificates`: the noise's own closed form, or one converted from another norm), gives
the largest radius n samples can certify, the radius grid of ``metrics.json`` in that norm, and what the records say
about it. The default, Gaussian noise and the l2 norm, is what rsbench has always certified; its records carry no
threat-model fields, and every reader takes a record without them (as every record written before them, and every
released log) to be Gaussian and l2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rsbench.certify.algorithm.caps import fixed_n_cap
from rsbench.certify.algorithm.certificates import DIRECT, NORMS, SOURCES, conversion_factor
from rsbench.noise_distributions import noise_distribution

DEFAULT_NOISE = "gaussian"
DEFAULT_NORM = "l2"


@dataclass(frozen=True)
class ThreatModel:
    """The norm certified and the smoothing noise.

    Attributes:
        noise: the smoothing distribution (``gaussian``, ``laplace``, ``uniform``), at per-coordinate standard
            deviation sigma.
        norm: ``l1``, ``l2`` or ``linf``; ``None``: the norm the noise certifies directly (l2 for Gaussian, l1 for
            Laplace and uniform noise).
    """

    noise: str = DEFAULT_NOISE
    norm: str | None = None

    def __post_init__(self) -> None:
        noise_distribution(self.noise, "certify.noise")
        if self.norm is not None and self.norm not in NORMS:
            raise ValueError(f"certify.norm must be one of {list(NORMS)} or null (the noise's own), got {self.norm!r}")

    @property
    def resolved_norm(self) -> str:
        """The norm certified: ``norm``, or the first one the noise certifies directly."""
        return self.norm if self.norm is not None else next(iter(DIRECT[self.noise]))

    @property
    def is_default(self) -> bool:
        """Gaussian noise and the l2 norm: rsbench's original threat model, whose records name none."""
        return self.noise == DEFAULT_NOISE and self.resolved_norm == DEFAULT_NORM

    @property
    def direct(self) -> bool:
        """Whether the noise certifies this norm with its own closed form (no norm conversion)."""
        return self.resolved_norm in DIRECT[self.noise]

    def radius(self, p_a_lower: float, sigma: float, dim: int) -> float:
        """The certified radius in :attr:`resolved_norm` for a lower bound ``p_a_lower >= 1/2`` on the top class.

        The noise's own closed form for this norm, else the largest of its direct certificates converted to it
        (:func:`rsbench.certify.algorithm.certificates.conversion_factor`).

        Args:
            p_a_lower: CERTIFY's one-sided lower confidence bound.
            sigma: the noise's per-coordinate standard deviation.
            dim: the input dimension d (C * H * W), which the l-infinity forms and the conversions need.
        """
        wanted = self.resolved_norm
        forms = DIRECT[self.noise]
        if wanted in forms:
            return forms[wanted](p_a_lower, sigma, dim)
        return max(form(p_a_lower, sigma, dim) / conversion_factor(norm, wanted, dim) for norm, form in forms.items())

    def cap(self, sigma: float, n: int, alpha: float, dim: int) -> float:
        """The largest radius CERTIFY can return with n samples (:func:`rsbench.certify.algorithm.caps.fixed_n_cap`)."""
        return fixed_n_cap(sigma, n, alpha, self, dim)

    def grid_step(self, radius_step: float, dim: int) -> float:
        """The step of the certified-accuracy grid in this norm, given ``certify.radius_step`` (an l2 step).

        l1 and l2 radii share a scale (||delta||_2 <= ||delta||_1), so the step is ``radius_step``. An l-infinity
        radius is about an l2 one over sqrt(d), so the step is ``radius_step / sqrt(d)`` rounded down to 1, 2 or 5
        times a power of ten: the l-infinity table has about as many radii as the l2 table it is derived from
        (d = 784: 0.25 -> 0.005; d = 3,072: 0.25 -> 0.002).
        """
        if self.resolved_norm != "linf":
            return radius_step
        return _round_down_125(radius_step / math.sqrt(dim))

    def how(self, dim: int) -> str:
        """How the radius is computed, in one line: the closed form, and the norm inequality when converted.

        >>> ThreatModel("gaussian", "linf").how(784).split(", R_l2")[0]
        'R_linf = R_l2 / 28 (d = 784: ||delta||_l2 <= 28 ||delta||_linf)'
        """
        forms = DIRECT[self.noise]
        wanted = self.resolved_norm
        if wanted in forms:
            return f"R_{wanted} = {SOURCES[forms[wanted]].removeprefix('R = ')}"
        parts = []
        for norm, form in forms.items():
            factor = conversion_factor(norm, wanted, dim)
            shown = f"{factor:g} " if factor != 1 else ""
            divided = f" / {factor:g}" if factor != 1 else ""
            parts.append(
                f"R_{wanted} = R_{norm}{divided} (d = {dim}: ||delta||_{norm} <= {shown}||delta||_{wanted}), "
                f"R_{norm} = {SOURCES[form].removeprefix('R = ')}"
            )
        return parts[0] if len(parts) == 1 else "the larger of " + "; ".join(parts)

    def record(self, sigma: float, dim: int, radius_step: float) -> dict[str, Any]:
        """What ``metrics.json`` says about the threat model: nothing for the default.

        Otherwise ``norm``, ``noise`` and ``threat_model``: the noise's law and scale, the dimension, the closed form
        (and the conversion), and the grid step of ``certified_accuracy``.
        """
        if self.is_default:
            return {}
        noise = noise_distribution(self.noise)
        return {
            "norm": self.resolved_norm,
            "noise": self.noise,
            "threat_model": {
                "norm": self.resolved_norm,
                "noise": self.noise,
                "noise_law": noise.law,
                "noise_scale": noise.scale(sigma),
                "dimension": dim,
                "direct": self.direct,
                "certificate": self.how(dim),
                "radius_step": self.grid_step(radius_step, dim),
            },
        }

    def protocol_fields(self) -> dict[str, str]:
        """The fields ``certify_protocol.json`` and the records carry: none for the default, else norm and noise."""
        return {} if self.is_default else {"norm": self.resolved_norm, "noise": self.noise}

    def describe(self) -> str:
        """``l1 (laplace noise)``, ``l2 (gaussian noise)``: for messages, titles and logs."""
        return f"{self.resolved_norm} ({self.noise} noise)"


def _round_down_125(value: float) -> float:
    """The largest 1, 2 or 5 times a power of ten that is <= ``value`` (> 0).

    >>> _round_down_125(0.0089), _round_down_125(0.0045), _round_down_125(0.25)
    (0.005, 0.002, 0.2)
    """
    exponent = math.floor(math.log10(value))
    for mantissa in (5, 2, 1):
        step = round(mantissa * 10.0**exponent, 12)
        if step <= value * (1 + 1e-12):
            return step
    return round(10.0**exponent, 12)
