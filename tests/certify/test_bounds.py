"""Bounds behind CERTIFY and PREDICT: golden vectors from certify_theory.md §1.2/§1.5, checked against SciPy."""

import math
import re

import numpy as np
import pytest
from scipy.stats import beta, binomtest, norm

from rsbench.certify.algorithm.bounds import (
    certified_radius,
    check_alpha,
    clopper_pearson_lower,
    min_certify_samples,
    min_predict_samples,
    radius_cap,
    top_two_p_value,
)

N = 100_000
ALPHA = 1e-3

# k -> (pA_lower, (R at sigma 0.25, 0.5, 1.0)) at n=1e5, alpha=1e-3 (certify_theory.md §1.5), printed digits only.
GOLDEN = [
    (100_000, 0.99993092, (0.95286, 1.90573, 3.81146)),
    (99_999, 0.99990767, (0.93478, 1.86956, 3.73913)),
    (99_900, 0.99865099, (0.75005, 1.5001, 3.0002)),
    (90_000, 0.89703650, (0.31621, 0.63242, 1.26484)),
    (60_000, 0.59520105, (0.06024, 0.12047, 0.24094)),
]
SIGMAS = (0.25, 0.5, 1.0)


def _printed_tolerance(printed: float) -> float:
    """Half a unit in the last printed decimal of ``printed`` (the golden numbers are rounded, not truncated)."""
    decimals = len(repr(printed).split(".")[1])
    return 0.5 * 10.0**-decimals


@pytest.mark.parametrize(("k", "p_lower", "radii"), GOLDEN)
def test_golden_lower_bound_and_radius(k, p_lower, radii):
    p = clopper_pearson_lower(k, N, ALPHA)
    assert p == pytest.approx(p_lower, abs=_printed_tolerance(p_lower))
    for sigma, radius in zip(SIGMAS, radii, strict=True):
        assert certified_radius(p, sigma) == pytest.approx(radius, abs=_printed_tolerance(radius))


def test_all_votes_gives_alpha_to_the_one_over_n():
    assert clopper_pearson_lower(N, N, ALPHA) == pytest.approx(ALPHA ** (1 / N), rel=1e-12)
    assert clopper_pearson_lower(N, N, ALPHA) == pytest.approx(0.99993092, abs=5e-9)


def test_no_votes_gives_zero():
    assert clopper_pearson_lower(0, N, ALPHA) == 0.0


def test_barely_above_half_gives_tiny_positive_radius():
    p = clopper_pearson_lower(50_500, N, ALPHA)
    assert p == pytest.approx(0.50010895, abs=5e-9)
    radius = certified_radius(p, 0.25)
    assert 0.0 < radius == pytest.approx(7e-5, rel=0.05)


def test_half_the_votes_is_below_one_half():
    """50,000 of 100,000 must abstain: the bound is below 1/2, so the Cohen radius would be negative."""
    p = clopper_pearson_lower(50_000, N, ALPHA)
    assert p == pytest.approx(0.49510904, abs=5e-9)
    assert p < 0.5
    assert certified_radius(p, 0.25) < 0


@pytest.mark.parametrize(("n", "alpha"), [(100_000, 1e-3), (1000, 0.05), (10_000, 1e-2), (137, 0.2)])
def test_matches_beta_quantile(n, alpha):
    """The one-sided Clopper-Pearson bound is the alpha quantile of Beta(k, n-k+1), for every k in a sweep."""
    ks = sorted(
        {1, 2, 3, n // 3, n // 2, n // 2 + 1, (9 * n) // 10, n - 2, n - 1, n, *range(1, n + 1, max(1, n // 97))}
    )
    for k in ks:
        expected = beta.ppf(alpha, k, n - k + 1)
        assert clopper_pearson_lower(k, n, alpha) == pytest.approx(expected, rel=1e-9, abs=0), k


def test_lower_bound_is_monotone_in_k():
    values = [clopper_pearson_lower(k, 1000, 1e-3) for k in range(1001)]
    assert np.all(np.diff(values) > 0)


def test_lower_bound_is_below_the_point_estimate():
    for k in (1, 10, 500, 999, 1000):
        assert clopper_pearson_lower(k, 1000, 1e-3) < k / 1000


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10)])
def test_lower_bound_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError, match=f"{k} of {n}"):
        clopper_pearson_lower(k, n, 0.01)


@pytest.mark.parametrize(
    ("sigma", "n", "alpha", "expected"),
    [
        (0.12, 100_000, 1e-3, 0.4574),
        (0.25, 100_000, 1e-3, 0.9529),
        (0.50, 100_000, 1e-3, 1.9057),
        (1.00, 100_000, 1e-3, 3.8115),
        (1.00, 10_000, 1e-3, 3.1986),
        (0.25, 10_000, 1e-3, 0.800),
        (1.00, 100_000, 1e-2, 3.911),
        (1.00, 1_000_000, 1e-3, 4.3468),
    ],
)
def test_radius_cap_table(sigma, n, alpha, expected):
    cap = radius_cap(sigma, n, alpha)
    assert cap == pytest.approx(sigma * norm.ppf(alpha ** (1 / n)), rel=1e-12)
    assert cap == pytest.approx(expected, abs=_printed_tolerance(expected))


def test_radius_cap_scales_with_sigma():
    assert radius_cap(0.5, 10_000, 1e-3) == pytest.approx(0.5 * 3.1986, abs=5e-5)
    assert radius_cap(2.0, N, ALPHA) == pytest.approx(2 * radius_cap(1.0, N, ALPHA), rel=1e-15)


def test_top_two_p_values_from_the_notes():
    assert top_two_p_value(520, 480) == pytest.approx(0.2174, abs=5e-5)
    assert top_two_p_value(560, 440) == pytest.approx(1.65e-4, abs=5e-7)
    assert top_two_p_value(520, 480) > 1e-3  # PREDICT abstains at alpha=1e-3
    assert top_two_p_value(560, 440) <= 1e-3  # and predicts here


@pytest.mark.parametrize(("a", "b"), [(520, 480), (560, 440), (7, 3), (1, 0), (100, 0), (30, 30)])
def test_top_two_p_value_is_the_two_sided_binomial_test(a, b):
    assert top_two_p_value(a, b) == pytest.approx(binomtest(a, a + b, 0.5).pvalue, rel=1e-12)
    assert top_two_p_value(a, b) == pytest.approx(top_two_p_value(b, a), rel=1e-12)


def test_top_two_p_value_without_votes_is_one():
    assert top_two_p_value(0, 0) == 1.0


def test_unanimous_p_value_is_two_half_to_the_n():
    for n in (1, 5, 11, 30):
        assert top_two_p_value(n, 0) == pytest.approx(min(1.0, 2 * 0.5**n), rel=1e-12)


# alpha = 2^-29 and 2^-28 are exactly on the threshold: a log-ratio formula rounds the wrong way there.
THRESHOLD_ALPHAS = [1e-3, 1e-2, 0.05, 1e-4, 1e-5, 1e-6, 0.1, 0.3, 0.5, 0.9, 2.0**-10, 2.0**-28, 2.0**-29, 2.0**-31]


# At a power-of-two alpha the threshold is an exact tie in real arithmetic (alpha^(1/n) = 1/2, 2 * 0.5^n = alpha), and
# the float64 value scipy returns may land an ulp on either side depending on the CPU's libm: the side of the tie is
# checked to 1e-12 relative. One sample below the threshold there is no tie (a factor 2^(-1/(n-1)) <= 0.978 below
# 1/2, a factor 2 above alpha), so that side is checked strictly.
AT_THE_TIE = 1e-12


@pytest.mark.parametrize("alpha", THRESHOLD_ALPHAS)
def test_min_certify_samples_is_the_exact_threshold(alpha):
    """n votes of n certify (pA_lower = alpha^(1/n) >= 1/2) at the threshold and not one sample below it."""
    n = min_certify_samples(alpha)
    assert n == max(1, math.ceil(-math.log2(alpha) - 1e-12))
    assert clopper_pearson_lower(n, n, alpha) >= 0.5 * (1 - AT_THE_TIE)
    if n > 1:
        assert clopper_pearson_lower(n - 1, n - 1, alpha) < 0.5


@pytest.mark.parametrize("alpha", THRESHOLD_ALPHAS)
def test_min_predict_samples_is_the_exact_threshold(alpha):
    """n unanimous votes reject the tie (2 * 0.5^n <= alpha) at the threshold, and n - 1 do not."""
    n = min_predict_samples(alpha)
    assert n == max(1, math.ceil(math.log2(2 / alpha) - 1e-12))
    assert top_two_p_value(n, 0) <= alpha * (1 + AT_THE_TIE)
    if n > 1:
        assert top_two_p_value(n - 1, 0) > alpha


def test_thresholds_at_the_protocol_alpha():
    assert min_certify_samples(1e-3) == 10  # 0.001^(1/10) = 0.501, 0.001^(1/9) = 0.464
    assert min_predict_samples(1e-3) == 11  # 2 * 0.5^11 = 9.8e-4, 2 * 0.5^10 = 2.0e-3


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan")])
@pytest.mark.parametrize(
    "call",
    [
        check_alpha,
        lambda a: clopper_pearson_lower(5, 10, a),
        lambda a: radius_cap(0.25, 100, a),
        min_certify_samples,
        min_predict_samples,
    ],
)
def test_bad_alpha_raises_naming_the_value(call, alpha):
    with pytest.raises(ValueError, match=rf"alpha.*{re.escape(repr(alpha))}"):
        call(alpha)
