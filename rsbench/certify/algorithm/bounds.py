"""Confidence bounds and radii for CERTIFY and PREDICT (Cohen et al. 2019), computed in float64 on the CPU."""

from __future__ import annotations

import math

from scipy.stats import binomtest, norm
from statsmodels.stats.proportion import proportion_confint

from rsbench.certify.algorithm.checks import check_alpha  # (also imported from here: the bounds' own check)


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided (1 - alpha) Clopper-Pearson lower confidence bound on a binomial proportion.

    This is ``proportion_confint(k, n, alpha=2*alpha, method="beta")[0]``, exactly what Cohen et al.'s
    ``_lower_confidence_bound`` computes: the ``alpha`` quantile of Beta(k, n - k + 1); 0 when k = 0 and
    alpha^(1/n) when k = n.
    """
    check_alpha(alpha)
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    return float(proportion_confint(successes, trials, alpha=2 * alpha, method="beta")[0])


def certified_radius(p_a_lower: float, sigma: float) -> float:
    """Cohen et al.'s Theorem 1 with pB = 1 - pA: R = sigma * Phi^-1(pA_lower); only meaningful for pA_lower >= 1/2."""
    return float(sigma * norm.ppf(p_a_lower))


def radius_cap(sigma: float, n: int, alpha: float) -> float:
    """The largest radius CERTIFY can return with n estimation samples: sigma * Phi^-1(alpha^(1/n)) (all n votes)."""
    return certified_radius(clopper_pearson_lower(n, n, alpha), sigma)


def min_certify_samples(alpha: float) -> int:
    """The smallest n for which n of n votes gives pA_lower >= 1/2 (alpha^(1/n) >= 1/2); smaller n always abstains."""
    check_alpha(alpha)
    # alpha^(1/n) >= 1/2 <=> alpha * 2^n >= 1; with alpha = m * 2^e (m in [1/2, 1)) that is n >= 1 - e, exactly.
    # (ceil(log(1/alpha) / log(2)) overshoots by one when alpha is a power of two and the log ratio rounds up.)
    return 1 - math.frexp(alpha)[1]


def min_predict_samples(alpha: float) -> int:
    """The smallest n for which PREDICT's two-sided test can reject (2 * 0.5^n <= alpha) when all n votes agree."""
    check_alpha(alpha)
    # 2 * 0.5^n <= alpha <=> alpha * 2^n >= 2 <=> n >= 2 - e for alpha = m * 2^e (m in [1/2, 1)), exactly.
    return 2 - math.frexp(alpha)[1]


def top_two_p_value(count_a: int, count_b: int) -> float:
    """Two-sided binomial test p-value of count_a successes in count_a + count_b trials at p = 1/2 (Hung & Fithian).

    ``scipy.stats.binom_test``, which the reference code calls, was removed in SciPy 1.12; ``binomtest`` is its
    replacement. Returns 1.0 when there are no votes at all.
    """
    trials = count_a + count_b
    if trials == 0:
        return 1.0
    return float(binomtest(count_a, trials, 0.5).pvalue)
