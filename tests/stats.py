"""The statistics of the known-answer tests: the coverage protocol and its p-values, and each noise's exact law.

Coverage tests certify a known-answer classifier many times and test the failure rate with binomial tests; noise
tests compare draws with the exact CDF. Test modules import these from here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.stats import beta, binomtest, laplace, norm, uniform

# CERTIFY's protocol in the coverage tests: alpha, the selection draws n0 and the estimation draws n.
ALPHA = 0.05
N0 = 100
N = 1000
P_FLAG = 1e-3  # reject "the certifier is sound" only below this p-value: a false alarm at most 1 run in 1000

# One noise coordinate's CDF or PPF (a scipy frozen distribution's method: a float or an array in, the same out).
NoiseFunction = Callable[[Any], Any]


def lower_bounds(n: int, alpha: float) -> np.ndarray:
    """CERTIFY's Clopper-Pearson bound for every count k = 0..n (Beta(k, n-k+1) quantile; 0 at k = 0)."""
    k = np.arange(n + 1)
    with np.errstate(invalid="ignore"):
        return np.where(k == 0, 0.0, beta.ppf(alpha, np.maximum(k, 1), n - k + 1))


def soundness_p_value(failures: int, trials: int, alpha: float = ALPHA) -> float:
    """One-sided binomial test of H0 "failure probability <= alpha"; small means too many failures."""
    return float(binomtest(failures, trials, alpha, alternative="greater").pvalue)


def agreement_p_value(successes: int, trials: int, rate: float) -> float:
    """Two-sided binomial test of H0 "success probability = rate"; small means the count disagrees with it."""
    return float(binomtest(successes, trials, rate).pvalue)


def noise_laws(sigma: float) -> dict[str, Any]:
    """Each smoothing noise's one-coordinate law at standard deviation ``sigma``, as a scipy frozen distribution.

    Laplace has lambda = sigma / sqrt(2), uniform lives on [-sigma sqrt(3), sigma sqrt(3)]: matched variance sigma^2.
    """
    return {
        "gaussian": norm(scale=sigma),
        "laplace": laplace(scale=sigma / math.sqrt(2)),
        "uniform": uniform(loc=-sigma * math.sqrt(3), scale=2 * sigma * math.sqrt(3)),
    }


def noise_cdfs(sigma: float) -> dict[str, NoiseFunction]:
    """One coordinate's CDF of each smoothing noise at standard deviation ``sigma``."""
    return {name: law.cdf for name, law in noise_laws(sigma).items()}


def noise_ppfs(sigma: float) -> dict[str, NoiseFunction]:
    """The inverse of each of ``noise_cdfs(sigma)``: where one coordinate's CDF reaches a given probability."""
    return {name: law.ppf for name, law in noise_laws(sigma).items()}
