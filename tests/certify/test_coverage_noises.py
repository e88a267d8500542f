"""Statistical coverage of CERTIFY with Laplace and uniform noise and derived norms, as test_coverage.py for Gaussian.

The base classifier is a coordinate classifier f(z) = [z_0 + b > 0] in d = 32 dimensions: at signed margin m its
votes for class 1 are Bernoulli(F(m)) with F one noise coordinate's CDF, and its exact robust radius is |m| in every
norm. A certificate *fails* iff it names the wrong class or a radius above |m|; a sound certifier fails with
probability <= alpha. Each test runs T seeded certifications, tests H0 "failure rate <= alpha" with a one-sided
binomial test (rejected only at p < 1e-3), and compares the failure rate with the exact one computed from the
binomial laws of the votes (two-sided, p >= 1e-3), which also catches a certifier that is too conservative, and the
pooled votes with F(m) (a wrong noise scale moves them by many standard errors).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom

from rsbench import Smooth
from rsbench.certify.algorithm import certificates
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.threat import ThreatModel
from tests.classifiers import Coordinate
from tests.stats import ALPHA, N0, P_FLAG, N, agreement_p_value, lower_bounds, noise_ppfs, soundness_p_value

SIGMA = 0.25
DIM = 32
PPF = noise_ppfs(SIGMA)


def certify_trials(noise: str, norm_: str | None, p_one: float, trials: int, key: int) -> tuple[list, float]:
    """T certificates of the coordinate classifier whose class-1 probability is ``p_one``; and its margin."""
    margin = float(PPF[noise](p_one))
    x = torch.full((DIM,), 0.5)
    smooth = Smooth(Coordinate(margin - 0.5), 2, SIGMA, noise=noise, norm=norm_)
    certs = [smooth.certify_with_details(x, N0, N, ALPHA, N, seed=derive_seed(key, trial)) for trial in range(trials)]
    return certs, margin


def exact_failure_rate(threat: ThreatModel, p_one: float) -> float:
    """P(failure) from the binomial laws: the wrong class certifies at all, or the right one above |m|."""
    p_true = max(p_one, 1 - p_one)
    margin = abs(float(PPF[threat.noise](p_one)))
    true_class = int(p_one > 0.5)
    s = binom.cdf(N0 // 2 if true_class == 1 else (N0 - 1) // 2, N0, p_true)  # selection picks the wrong class
    lower = lower_bounds(N, ALPHA)
    certifies = lower >= 0.5
    radii = np.array([threat.radius(float(p), SIGMA, DIM) if c else 0.0 for p, c in zip(lower, certifies, strict=True)])
    too_far = certifies & (radii > margin)
    k = np.arange(N + 1)
    return float(s * binom.pmf(k, N, 1 - p_true)[certifies].sum() + (1 - s) * binom.pmf(k, N, p_true)[too_far].sum())


@pytest.mark.parametrize(
    ("noise", "norm_", "p_one", "key"),
    [
        ("laplace", None, 0.9, 11),  # l1, tight: the exact failure rate is close to alpha
        ("uniform", None, 0.8, 12),  # l1, tight
        ("laplace", None, 0.1, 13),  # class 0 is right
        ("uniform", "linf", 0.9, 14),  # uniform's own l-infinity form (conservative for this classifier)
        ("gaussian", "linf", 0.9, 15),  # derived from l2: R_l2 / sqrt(32)
    ],
)
def test_certify_coverage(noise, norm_, p_one, key):
    """Failure rate <= alpha, equal to its exact value, and the votes follow F(m) (T = 1200, n = 1000, alpha 0.05).

    A sound certifier fails about 0.047 * 1200 = 56 times (sd 7) where the form is tight; the test flags >= ~82.
    """
    trials = 1200
    threat = ThreatModel(noise, norm_)
    certs, margin = certify_trials(noise, norm_, p_one, trials, key)
    true_class = int(p_one > 0.5)
    failures = sum(not c.abstained and (c.prediction != true_class or c.radius > abs(margin)) for c in certs)
    assert soundness_p_value(failures, trials) >= P_FLAG, failures / trials
    assert agreement_p_value(failures, trials, exact_failure_rate(threat, p_one)) >= P_FLAG, failures / trials
    votes = sum(c.count for c in certs if c.selected == true_class)
    drawn = N * sum(c.selected == true_class for c in certs)
    assert agreement_p_value(votes, drawn, max(p_one, 1 - p_one)) >= P_FLAG, votes / drawn


def test_the_check_has_power_against_a_wrong_scale(monkeypatch):
    """Certifying Laplace noise with lambda = sigma (not sigma / sqrt(2)) inflates radii by sqrt(2): flagged."""
    trials = 300
    original = certificates.laplace_l1

    def inflated(p_a_lower: float, sigma: float, dim: int) -> float:
        return original(p_a_lower, sigma * math.sqrt(2), dim)

    monkeypatch.setitem(certificates.DIRECT["laplace"], "l1", inflated)
    certs, margin = certify_trials("laplace", None, 0.9, trials, key=16)
    failures = sum(not c.abstained and (c.prediction != 1 or c.radius > margin) for c in certs)
    assert soundness_p_value(failures, trials) < P_FLAG, failures / trials
