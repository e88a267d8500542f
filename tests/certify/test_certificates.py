"""Closed-form certificates of every noise and norm (certify/algorithm/certificates.py, threat.py), as for Gaussian.

The known base classifier is a coordinate classifier f(z) = [z_0 + b > 0]: at signed margin m its smoothed classifier
votes class 1 with probability F(m) (F: one noise coordinate's CDF), and its exact robust radius in every norm is
|m| (only coordinate 0 matters). Laplace's l1, uniform's l1 and Gaussian's l2 certificates are tight for it: at the
true pA they return exactly |m|. Values are compared with tolerances stated per test, never exactly, except where a
path must be the same computation (the default threat model against Cohen's formula).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rsbench import Smooth
from rsbench.certify.algorithm.bounds import certified_radius, clopper_pearson_lower, radius_cap
from rsbench.certify.algorithm.certificates import (
    conversion_factor,
    gaussian_l2,
    laplace_l1,
    uniform_l1,
    uniform_linf,
)
from rsbench.certify.algorithm.threat import ThreatModel
from tests.classifiers import Coordinate
from tests.stats import noise_cdfs

SIGMA = 0.5
LAPLACE = SIGMA / math.sqrt(2)  # lambda
UNIFORM = SIGMA * math.sqrt(3)
CDF = noise_cdfs(SIGMA)


def coordinate_problem(margin: float, dim: int = 16) -> tuple[Coordinate, torch.Tensor]:
    x = torch.full((dim,), 0.5)
    return Coordinate(margin - 0.5), x


@pytest.mark.parametrize(
    ("noise", "form"), [("gaussian", gaussian_l2), ("laplace", laplace_l1), ("uniform", uniform_l1)]
)
@pytest.mark.parametrize("margin", [0.01, 0.1, 0.3, 0.6])
def test_direct_certificates_are_tight_for_the_coordinate_classifier(noise, form, margin) -> None:
    """At the true pA = F(m) each direct certificate is exactly m (relative 1e-9: float64 CDF and inverse)."""
    if noise == "uniform" and margin >= UNIFORM:
        pytest.skip("pA = 1 beyond the cube")
    p_a = float(CDF[noise](margin))
    assert form(p_a, SIGMA, 16) == pytest.approx(margin, rel=1e-9)


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0.5, 0.0), (0.75, -LAPLACE * math.log(0.5)), (0.99, -LAPLACE * math.log(0.02)), (1 - 1e-12, None)],
)
def test_laplace_l1_formula(p, expected) -> None:
    """Teng et al.: -lambda log(2 (1 - pA)); finite and increasing up to pA -> 1, exactly 0 at 1/2."""
    radius = laplace_l1(p, SIGMA, 784)
    if expected is None:
        assert radius == pytest.approx(-LAPLACE * math.log(2e-12), rel=1e-6)
    else:
        assert radius == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert laplace_l1(1.0, SIGMA, 784) == math.inf


def test_uniform_forms_and_their_overlap_argument() -> None:
    """Uniform l1 is 2 lambda (pA - 1/2); at the l-infinity radius the shifted cubes overlap in exactly 3/2 - pA."""
    for p in (0.51, 0.7, 0.9, 0.9999):
        assert uniform_l1(p, SIGMA, 784) == pytest.approx(2 * UNIFORM * (p - 0.5), rel=1e-12)
        for dim in (1, 10, 784, 3072):
            radius = uniform_linf(p, SIGMA, dim)
            overlap = (1 - radius / (2 * UNIFORM)) ** dim
            assert overlap == pytest.approx(1.5 - p, rel=1e-9)
        assert uniform_linf(p, SIGMA, 1) == pytest.approx(uniform_l1(p, SIGMA, 1), rel=1e-12)  # d = 1: the same
        assert uniform_linf(p, SIGMA, 784) >= uniform_l1(p, SIGMA, 784) / 784  # never worse than l1 / d


def test_conversions_follow_the_norm_inequalities() -> None:
    """R / d^max(0, 1/p - 1/q): l2 -> linf / sqrt(d), l1 -> l2 / sqrt(d), l1 -> linf / d, to a larger norm: x1."""
    assert conversion_factor("l2", "linf", 784) == pytest.approx(28.0)
    assert conversion_factor("l1", "l2", 784) == pytest.approx(28.0)
    assert conversion_factor("l1", "linf", 784) == pytest.approx(784.0)
    assert conversion_factor("l2", "l1", 784) == conversion_factor("linf", "l2", 784) == 1.0
    generator = np.random.default_rng(0)
    for _ in range(200):  # the inequality itself: a vector inside the converted ball is inside the certified one
        delta = generator.normal(size=784) * generator.exponential(size=784)
        for p, q in [("l2", "linf"), ("l1", "l2"), ("l1", "linf"), ("l2", "l1")]:
            norms = {"l1": np.abs(delta).sum(), "l2": np.sqrt((delta**2).sum()), "linf": np.abs(delta).max()}
            assert norms[p] <= conversion_factor(p, q, 784) * norms[q] * (1 + 1e-12)


@pytest.mark.parametrize("p", [0.5, 0.5001, 0.6, 0.9, 0.99993092])
def test_the_default_threat_model_is_cohens_formula_bit_for_bit(p) -> None:
    threat = ThreatModel()
    assert threat.is_default
    assert threat.resolved_norm == "l2"
    assert threat.radius(p, SIGMA, 784) == certified_radius(p, SIGMA)
    assert threat.cap(SIGMA, 10_000, 0.001, 784) == radius_cap(SIGMA, 10_000, 0.001)
    assert threat.record(SIGMA, 784, 0.25) == {}
    assert threat.protocol_fields() == {}


def test_linf_from_gaussian_is_the_l2_radius_over_sqrt_d() -> None:
    """certify.norm=linf: R_l2 / sqrt(d), and the record says how; the grid step is 0.25 / 28 rounded to 0.005."""
    threat = ThreatModel("gaussian", "linf")
    for p in (0.6, 0.9, 0.999):
        assert threat.radius(p, SIGMA, 784) == pytest.approx(certified_radius(p, SIGMA) / 28, rel=1e-12)
    assert threat.grid_step(0.25, 784) == 0.005
    assert threat.grid_step(0.25, 3072) == 0.002
    record = threat.record(SIGMA, 784, 0.25)
    assert (record["norm"], record["noise"]) == ("linf", "gaussian")
    assert "R_linf = R_l2 / 28" in record["threat_model"]["certificate"]
    assert "Cohen et al. 2019, Theorem 1" in record["threat_model"]["certificate"]
    assert record["threat_model"]["direct"] is False


def test_each_noise_takes_its_own_norm_by_default_and_the_best_conversion() -> None:
    assert ThreatModel("laplace").resolved_norm == ThreatModel("uniform").resolved_norm == "l1"
    assert ThreatModel("gaussian", "l1").radius(0.9, SIGMA, 784) == pytest.approx(certified_radius(0.9, SIGMA))
    uniform_l2 = ThreatModel("uniform", "l2").radius(0.9, SIGMA, 784)  # the larger of l1 / 28 and linf / 1
    assert uniform_l2 == pytest.approx(max(uniform_l1(0.9, SIGMA, 784) / 28, uniform_linf(0.9, SIGMA, 784)))
    assert ThreatModel("laplace", "linf").radius(0.9, SIGMA, 784) == pytest.approx(laplace_l1(0.9, SIGMA, 784) / 784)


@pytest.mark.parametrize(
    ("noise", "norm_", "message"),
    [
        ("cauchy", None, r"certify.noise must be one of \['gaussian', 'laplace', 'uniform'\], got 'cauchy'"),
        ("gaussian", "l3", r"certify.norm must be one of \['l1', 'l2', 'linf'\] or null"),
    ],
)
def test_bad_threat_models_are_refused_naming_the_key(noise, norm_, message) -> None:
    with pytest.raises(ValueError, match=message):
        ThreatModel(noise, norm_)


# ------------------------------------------------------------------------- through Smooth, on a known classifier


@pytest.mark.parametrize(
    ("noise", "norm_"),
    [("laplace", None), ("uniform", None), ("uniform", "linf"), ("gaussian", "linf"), ("laplace", "l2")],
)
def test_a_constant_classifier_certifies_the_cap(noise, norm_) -> None:
    """All n votes: pA_lower = alpha^(1/n) and the radius is the threat model's cap, in its norm."""
    n, alpha, dim = 1000, 0.001, 16
    smooth = Smooth(lambda batch: torch.tensor([[0.0, 1.0]]).expand(len(batch), 2), 2, SIGMA, noise=noise, norm=norm_)
    cert = smooth.certify_with_details(torch.zeros(dim), 10, n, alpha, 1000, seed=0)
    threat = ThreatModel(noise, norm_)
    assert cert.prediction == 1
    assert cert.p_a_lower == pytest.approx(clopper_pearson_lower(n, n, alpha), rel=1e-12)
    assert cert.radius == pytest.approx(threat.cap(SIGMA, n, alpha, dim), rel=1e-12)
    assert (cert.norm, cert.noise) == (threat.resolved_norm, noise)


@pytest.mark.parametrize("noise", ["laplace", "uniform"])
@pytest.mark.parametrize("margin", [0.1, 0.4])
def test_l1_radius_of_the_coordinate_classifier_approaches_its_margin_from_below(noise, margin) -> None:
    """With n = 100,000 the certified l1 radius is below the exact radius m, by less than 0.02.

    pA_lower sits about 3.1 standard errors (alpha = 0.001) below F(m), give or take 2 more of sampling noise, with
    a standard error <= 0.0016; times dR/dpA (2 lambda = 1.73 for uniform, lambda / (1 - pA) <= 2.2 for Laplace
    here) that is at most 0.018.
    """
    classifier, x = coordinate_problem(margin)
    cert = Smooth(classifier, 2, SIGMA, noise=noise).certify_with_details(x, 100, 100_000, 0.001, 10_000, seed=1)
    assert cert.prediction == 1
    assert margin - 0.02 <= cert.radius <= margin
