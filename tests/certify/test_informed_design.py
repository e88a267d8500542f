"""The ``informed`` sequential design (issue 41): its prior from the selection votes, its proof, its coverage.

Soundness rests on one fact (Robbins' method of mixtures with Ville's inequality): for any prior fixed before the
first estimation vote, W_n(m) = M(k, n) / (m^k (1 - m)^(n - k)) is a nonnegative martingale with W_0 = 1 under
pA = m. The selection votes are drawn before and independently of the estimation votes, so the prior updated by them
is such a prior; they must not count as evidence (selection picks the most voted class: its count is biased up).
The tests check the identity behind the martingale, that the coverage test (pA just below a target) catches a
design that does not pay for its looks, and that ``informed`` saves samples where ``betting`` spends them; every
design's coverage, ``informed``'s included, is ``tests/certify/test_designs.py``'s (selection votes biased as selection
makes them) and ``tests/certify/test_certify_scale.py``'s (real noise through the pipeline).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import betaln
from scipy.stats import binomtest, norm

from rsbench.certify.algorithm.confidence import BetaMixture, betting_lower, cp_lower
from rsbench.certify.algorithm.designs import BettingDesign, Goal, InformedDesign, LooksDesign, make_design, run_design
from tests.certify.test_designs import P_FLAG, VotePath, selected_votes, simulate

PRIOR = BetaMixture(a=(0.5, 1.0), b=(0.5, 0.05), weights=(0.5, 0.5))


def test_the_prior_updated_by_the_selection_votes_is_the_posterior_mixture() -> None:
    """M(k, n | k0, n0) is the marginal of the posterior mixture: components Beta(a + k0, b + n0 - k0), reweighted."""
    k0, n0, k, n = 93.0, 100.0, 870.0, 1000.0
    weights = [w * math.exp(betaln(a + k0, b + n0 - k0) - betaln(a, b)) for a, b, w in zip(*_parts(PRIOR), strict=True)]
    total = sum(weights)
    expected = math.log(
        sum(
            w / total * math.exp(betaln(a + k0 + k, b + n0 - k0 + n - k) - betaln(a + k0, b + n0 - k0))
            for a, b, w in zip(PRIOR.a, PRIOR.b, weights, strict=True)
        )
    )
    assert float(PRIOR.log_predictive(np.array(k), np.array(n), (np.array(k0), np.array(n0)))) == pytest.approx(
        expected, rel=1e-10
    )
    assert float(PRIOR.log_predictive(np.array(k), np.array(n))) == float(PRIOR.log_marginal(np.array(k), np.array(n)))


@pytest.mark.parametrize("m", [0.3, 0.8413, 0.99])
def test_the_wealth_is_a_martingale_under_pa_equal_m(m: float) -> None:
    """E[W_{n+1}(m) | first n votes] = W_n(m) when pA = m: one vote's two outcomes, weighted by m and 1 - m."""
    prior_votes = (np.array(71.0), np.array(100.0))
    for k, n in [(0, 0), (5, 10), (400, 500)]:
        k_, n_ = np.array(float(k)), np.array(float(n))
        wealth = PRIOR.log_predictive(k_, n_, prior_votes) - _log_likelihood(k, n, m)
        up = PRIOR.log_predictive(k_ + 1, n_ + 1, prior_votes) - _log_likelihood(k + 1, n + 1, m)
        down = PRIOR.log_predictive(k_, n_ + 1, prior_votes) - _log_likelihood(k, n + 1, m)
        assert m * math.exp(up) + (1 - m) * math.exp(down) == pytest.approx(math.exp(wealth), rel=1e-9)


class Peeking(LooksDesign):
    """A broken design: Clopper-Pearson at the full alpha at every look (no price for looking)."""

    name = "peeking"

    def __init__(self, goal: Goal) -> None:
        super().__init__(goal, first_look=50, growth=2.0)
        self.look_alpha = goal.alpha


@pytest.mark.parametrize("p", [0.8413447, 0.9331927])
def test_the_coverage_test_catches_a_design_that_does_not_pay_for_its_looks(p: float) -> None:
    """pA just below a target (r = sigma, 1.5 sigma): optional stopping makes peeking certify it falsely too often."""
    goal = Goal.grid(sigma=0.5, alpha=0.05, n_max=2000, cap=1.0)
    trials = 4000
    for design, flagged in ((Peeking(goal), True), (InformedDesign(goal), False)):
        decisions = simulate(design, p, trials, seed=3)
        failures = int((decisions.certified & (decisions.lower > p)).sum())
        assert (binomtest(failures, trials, 0.05, alternative="greater").pvalue < P_FLAG) == flagged, failures


def test_informed_stops_an_always_right_image_sooner_than_betting() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=0.75)
    floor = math.log(1000) / -math.log(norm.cdf(3.0))  # 5,113 votes: P(all right | pA = Phi(3)) <= alpha
    informed = simulate(make_design("informed", goal), 1.0, 50, seed=0)
    betting = simulate(make_design("betting", goal), 1.0, 50, seed=0)
    assert np.all(informed.radius == pytest.approx(0.75))
    assert np.all(informed.samples <= 1.25 * floor)  # the sequence's price and one look's overshoot
    assert informed.samples.mean() < betting.samples.mean()


def test_predictive_futility_stops_an_image_between_targets_far_earlier() -> None:
    """pA = 0.95 at sigma 0.25: radius 0.41; it certifies 0.25, and 0.5 (pA 0.977) is out of reach."""
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=0.75)
    informed = simulate(make_design("informed", goal), 0.95, 300, seed=1)
    betting = simulate(make_design("betting", goal), 0.95, 300, seed=1)
    assert np.mean(informed.radius >= 0.25) > 0.95
    assert np.all(informed.radius < 0.5)
    assert np.median(informed.samples) < 0.6 * np.median(betting.samples)


def test_without_selection_votes_informed_bets_with_its_prior_alone() -> None:
    """No selection votes recorded (zero of zero): the prior is not updated, and the bound is betting's."""
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=10_000, cap=0.5)
    path = VotePath(np.full(20, 0.99), make_design("informed", goal).looks(), np.random.default_rng(2))
    design = InformedDesign(goal, futility=1e-9)  # (futility off: both run to the same looks)
    decisions = run_design(design, 20, lambda samples, running: path.at(samples, running))
    final = cp_lower(decisions.counts, decisions.samples, design.final_alpha)
    betting = betting_lower(design.prior, decisions.counts.astype(float), decisions.samples.astype(float), 0.00075)
    assert np.all(decisions.lower >= np.maximum(betting, np.where(decisions.samples >= 10_000, final, 0.0)) - 1e-15)
    assert isinstance(design, BettingDesign)


def test_selection_votes_must_be_counts_of_the_selection() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=1000, cap=0.5)
    with pytest.raises(ValueError, match=r"one selection vote count in \[0, 100\] per image"):
        run_design(InformedDesign(goal), 2, lambda samples, running: np.zeros(len(running)), (np.array([101, 3]), 100))
    assert selected_votes(0.5, 10, np.random.default_rng(0)).min() >= 50


def _parts(prior: BetaMixture) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    return prior.a, prior.b, prior.weights


def _log_likelihood(k: int, n: int, m: float) -> float:
    return k * math.log(m) + (n - k) * math.log1p(-m)
