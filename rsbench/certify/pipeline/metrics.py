"""Certified accuracy, average certified radius (ACR) and the radius grid, from per-image certificates.

Conventions of the papers' analysis code (Cohen's ``analyze.py``, the Jeong lineage's ``acr()``): an image counts
as certified at radius r iff it is correct (prediction == label, so abstentions count as wrong) and its radius is
>= r, with the radius compared at full precision (never rounded up). ACR = mean(correct * radius) over all images,
abstentions and errors contributing 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def certified_accuracy(radii: Sequence[float], correct: Sequence[bool], radius: float) -> float:
    """Fraction of images that are correct and certified at ``radius`` or more.

    >>> certified_accuracy([0.0, 0.3, 0.5, 0.9], [False, True, True, True], 0.5)
    0.5
    """
    r, c = _arrays(radii, correct)
    return float(np.mean(c & (r >= radius))) if len(r) else 0.0


def average_certified_radius(radii: Sequence[float], correct: Sequence[bool]) -> float:
    """ACR = (1/N) * sum_i 1[correct_i] * R_i.

    >>> average_certified_radius([0.0, 0.3, 0.5, 0.9], [False, True, True, False])
    0.2
    """
    r, c = _arrays(radii, correct)
    return float(np.mean(np.where(c, r, 0.0))) if len(r) else 0.0


def radius_grid(cap: float, step: float = 0.25) -> list[float]:
    """Radii 0, step, 2*step, ... up to and including the largest multiple of ``step`` <= ``cap``.

    >>> radius_grid(0.9529, 0.25)
    [0.0, 0.25, 0.5, 0.75]
    """
    if step <= 0:
        raise ValueError(f"radius step must be > 0, got {step}")
    count = math.floor(cap / step + 1e-9) if cap > 0 else 0
    return [round(k * step, 10) for k in range(count + 1)]


def radius_key(radius: float) -> str:
    """The string key of a grid radius in ``metrics.json`` (``0.0``, ``0.25``, ``1.0``, ...)."""
    return repr(float(radius))


def certified_accuracy_curve(
    radii: Sequence[float], correct: Sequence[bool], grid: Sequence[float]
) -> dict[str, float]:
    """Certified accuracy at each grid radius, keyed by :func:`radius_key`."""
    return {radius_key(r): certified_accuracy(radii, correct, r) for r in grid}


def envelope(curves: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The per-radius best of several certified-accuracy curves, and which curve reaches it.

    ``curves`` holds one curve per row and one radius per column (a run that has no value at a radius, e.g. beyond
    its radius cap, is NaN there and takes no part). Returns ``(best, which)``: ``best[j]`` is the highest value in
    column ``j`` and ``which[j]`` the row of the first curve that reaches it; a column with no value has ``best`` NaN
    and ``which`` -1. This is the envelope over sigma of Cohen et al.'s Fig. 7 and Salman et al.'s tables, and the
    leaderboard's best entry per radius.

    >>> best, which = envelope([[0.9, 0.4, float("nan")], [0.8, 0.6, 0.3], [0.9, 0.1, float("nan")]])
    >>> best.tolist(), which.tolist()
    ([0.9, 0.6, 0.3], [0, 1, 1])
    """
    values = np.asarray(curves, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        raise ValueError(f"envelope needs a non-empty 2-d array of curves (one per row), got shape {values.shape}")
    known = ~np.isnan(values)
    which = np.where(known.any(axis=0), np.argmax(np.where(known, values, -np.inf), axis=0), -1)
    best = np.where(which >= 0, values[np.maximum(which, 0), np.arange(values.shape[1])], np.nan)
    return best, which


def _arrays(radii: Sequence[float], correct: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    r = np.asarray(radii, dtype=np.float64)
    c = np.asarray(correct, dtype=bool)
    if r.shape != c.shape:
        raise ValueError(f"radii and correct must have the same length, got {r.shape} and {c.shape}")
    return r, c
