"""The report's intervals and tests: against closed forms, by simulated coverage, and on constructed paired cases.

Tolerances: closed forms are compared to 1e-9 relative (the library and the formula round differently in the last
bits). Coverage is a Monte Carlo estimate from a fixed seed; the bands are about 3 Monte Carlo standard errors
(sqrt(0.95 * 0.05 / reps)) wide, so they hold on any machine and fail only if an interval is really off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from rsbench.report.stats import (
    mcnemar_test,
    mean_interval,
    paired_difference,
    proportion_interval,
    seed_test,
    z_distance,
)


def test_acr_standard_error_and_t_interval_are_the_closed_forms() -> None:
    scores = np.random.default_rng(0).exponential(0.5, size=200) * (np.arange(200) % 3 > 0)
    estimate = mean_interval(scores, confidence=0.9)
    se = np.std(scores, ddof=1) / math.sqrt(len(scores))
    half = stats.t.ppf(0.95, df=len(scores) - 1) * se
    assert estimate.value == pytest.approx(np.mean(scores), rel=1e-12)
    assert estimate.se == pytest.approx(se, rel=1e-9)
    assert (estimate.low, estimate.high) == pytest.approx((np.mean(scores) - half, np.mean(scores) + half), rel=1e-9)


def test_clopper_pearson_and_wilson_intervals_are_the_closed_forms() -> None:
    k, n, z = 37, 120, stats.norm.ppf(0.975)
    exact = proportion_interval(k, n, 0.95, "beta")
    assert (exact.low, exact.high) == pytest.approx(
        (stats.beta.ppf(0.025, k, n - k + 1), stats.beta.ppf(0.975, k + 1, n - k)), rel=1e-9
    )
    p = k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    wilson = proportion_interval(k, n, 0.95, "wilson")
    assert (wilson.low, wilson.high) == pytest.approx(
        ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n))
    )
    assert exact.se == pytest.approx(math.sqrt(p * (1 - p) / n))


@pytest.mark.parametrize("p", [0.05, 0.5, 0.93])
def test_clopper_pearson_covers_at_least_its_level(p: float) -> None:
    reps, n = 4000, 300
    counts = np.random.default_rng(1).binomial(n, p, size=reps)
    low, high = proportion_confint(counts, n, alpha=0.05, method="beta")  # the call proportion_interval makes
    assert proportion_interval(int(counts[0]), n).low == pytest.approx(low[0])
    coverage = np.mean((low <= p) & (p <= high))
    assert coverage >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / reps)  # exact interval: never below its level


def test_acr_interval_covers_its_level_on_certification_like_scores() -> None:
    # Scores like certify.tsv's: 30% wrong or abstained (0), the rest radii up to a cap.
    rng, reps, n = np.random.default_rng(2), 2000, 400
    true_mean = 0.7 * 0.5  # uniform radii on [0, 1] for the correct 70%
    hits = 0
    for _ in range(reps):
        scores = np.where(rng.random(n) < 0.7, rng.random(n), 0.0)
        estimate = mean_interval(scores)
        hits += estimate.low <= true_mean <= estimate.high
    assert abs(hits / reps - 0.95) <= 3 * math.sqrt(0.95 * 0.05 / reps)


def test_bootstrap_interval_agrees_with_the_t_interval_on_a_large_sample() -> None:
    scores = np.where(np.random.default_rng(3).random(1000) < 0.8, 1.0, 0.0) * 0.9
    t, boot = mean_interval(scores), mean_interval(scores, method="bootstrap")
    assert boot.low == pytest.approx(t.low, abs=0.25 * (t.high - t.low))  # same width scale, different method
    assert boot.high == pytest.approx(t.high, abs=0.25 * (t.high - t.low))
    assert mean_interval(scores, method="bootstrap") == boot  # seeded: reproducible


def test_identical_runs_differ_by_nothing() -> None:
    scores = np.random.default_rng(4).random(50)
    paired = paired_difference(scores, scores)
    assert (paired.difference, paired.low, paired.high, paired.p_value, paired.p_wilcoxon) == (0, 0, 0, 1, 1)
    certified = scores > 0.5
    assert mcnemar_test(certified, certified).p_value == 1.0
    assert seed_test([0.5, 0.6], [0.5, 0.6]) == pytest.approx(1.0)


def test_a_shifted_run_is_found_with_the_paired_t_interval() -> None:
    rng = np.random.default_rng(5)
    base = rng.random(300)
    shifted = base + np.where(rng.random(300) < 0.8, 0.1, 0.0) + rng.normal(0, 0.01, 300)
    paired = paired_difference(shifted, base)
    d = shifted - base
    half = stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
    assert (paired.low, paired.high) == pytest.approx((np.mean(d) - half, np.mean(d) + half), rel=1e-9)
    assert paired.low > 0
    assert paired.p_value < 1e-6
    assert paired.p_wilcoxon < 1e-6


def test_mcnemar_is_the_exact_binomial_test_on_the_discordant_images() -> None:
    a = np.array([True] * 30 + [True] * 10 + [False] * 20)
    b = np.array([True] * 30 + [False] * 10 + [False] * 20)
    test = mcnemar_test(a, b)
    assert (test.only_a, test.only_b) == (10, 0)
    assert test.p_value == pytest.approx(2 * 0.5**10, rel=1e-9)
    assert test.difference == pytest.approx(10 / 60)
    balanced = mcnemar_test(np.r_[a[:35], b[35:]], np.r_[b[:35], a[35:]])
    assert balanced.p_value == pytest.approx(1.0)


def test_z_distance_adds_standard_errors_in_quadrature() -> None:
    assert z_distance(0.05, 0.03, 0.04) == pytest.approx(1.0)
    assert math.isnan(z_distance(0.0, 0.0))
