"""Sequential designs and their bounds: exact values, coverage (statistical), stopping, and the shared decision loop.

Coverage tests follow certify_theory.md §4: T independent replicates of a Bernoulli vote stream with a known pA,
a failure is a reported bound above pA (a certified radius above sigma * Phi^-1(pA)), and H0 "failure rate <= alpha"
is rejected only at p < 1e-3 (one-sided binomial test), so a sound design fails the test at most once in 1000 runs.
Votes are simulated as binomial increments between the looks (the replay benchmark's shortcut), seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from rsbench.certify.algorithm.bounds import clopper_pearson_lower
from rsbench.certify.algorithm.confidence import (
    BetaMixture,
    betting_lower,
    betting_upper,
    cp_lower,
    cp_upper,
    log_wealth,
)
from rsbench.certify.algorithm.designs import (
    AdaptiveDesign,
    BettingDesign,
    Goal,
    InformedDesign,
    LooksDesign,
    make_design,
    run_design,
)
from rsbench.certify.algorithm.sequential import LookSchedule
from rsbench.certify.pipeline.settings import Protocol, SequentialSchedule

P_FLAG = 1e-3


class VotePath:
    """Cumulative votes of independent streams at the given sample counts, drawn as binomial increments."""

    def __init__(self, p: np.ndarray, looks: list[int], rng: np.random.Generator) -> None:
        self.looks = sorted(set(looks))
        steps = np.diff(self.looks, prepend=0)
        self.counts = np.cumsum(rng.binomial(steps[None, :], p[:, None]), axis=1)

    def at(self, samples: int, images: np.ndarray | slice = slice(None)) -> np.ndarray:
        return self.counts[images, self.looks.index(samples)]


N0 = 100  # selection votes per image


def selected_votes(p: float, trials: int, rng: np.random.Generator) -> np.ndarray:
    """The n0 selection votes of a class that won its selection against one rival: Bin(n0, p) given >= n0 / 2.

    Selection picks the most voted class, so its count is biased upward (at p = 1/2 it is always >= 50 of 100): a
    design that took these votes as evidence would certify ties; the ``informed`` design takes them as prior only.
    """
    votes = rng.binomial(N0, p, size=trials * 20)
    kept = votes[votes >= N0 / 2]
    assert len(kept) >= trials
    return kept[:trials].astype(float)


def simulate(design, p: float, trials: int, seed: int):
    """Run ``design`` on ``trials`` independent vote streams with vote probability p (and their selection votes)."""
    rng = np.random.default_rng(seed)
    path = VotePath(np.full(trials, p), design.looks(), rng)
    selection = (selected_votes(p, trials, rng), N0)
    return run_design(design, trials, lambda samples, running: path.at(samples, running), selection)


def test_vectorised_clopper_pearson_matches_the_scalar_bound_and_the_golden_vectors() -> None:
    counts = np.array([0, 1, 50_000, 60_000, 90_000, 99_900, 99_999, 100_000])
    lower = cp_lower(counts, 100_000, 0.001)
    for k, bound in zip(counts, lower, strict=True):
        assert bound == pytest.approx(clopper_pearson_lower(int(k), 100_000, 0.001), rel=1e-12)
    assert lower[-1] == pytest.approx(0.99993092, abs=1e-8)  # certify_theory.md §1.5
    assert lower[3] == pytest.approx(0.59520105, abs=1e-8)
    upper = cp_upper(counts, 100_000, 0.001)
    assert upper[-1] == 1.0
    assert upper[0] == pytest.approx(1 - 0.001 ** (1 / 100_000), rel=1e-6)
    assert np.all(upper >= counts / 100_000)
    assert np.all(lower <= counts / 100_000)


def test_betting_bounds_bracket_the_vote_share_and_tighten_with_alpha() -> None:
    prior = BetaMixture()
    k, n = np.array([0.0, 30, 500, 990, 1000]), np.full(5, 1000.0)
    lower, upper = betting_lower(prior, k, n, 0.01), betting_upper(prior, k, n, 0.01)
    assert np.all(lower <= k / n)
    assert np.all(upper >= k / n)
    assert lower[0] == 0.0
    assert upper[-1] == 1.0
    assert np.all(betting_lower(prior, k, n, 0.1) >= lower)
    # every vote right: W(m) = M / m^n with M = B(n + 1/2, 1/2) / B(1/2, 1/2), so the bound is (alpha M)^(1/n)
    log_marginal = (math.lgamma(1000.5) + math.lgamma(0.5) - math.lgamma(1001)) - (2 * math.lgamma(0.5) - 0.0)
    expected = math.exp((math.log(0.01) + log_marginal) / 1000)
    assert lower[-1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("p", [0.55, 0.9, 0.99])
def test_the_betting_sequence_holds_at_every_look_at_once(p: float) -> None:
    """Time-uniform: P(the lower bound exceeds pA at any of 200 looks) <= alpha."""
    alpha, trials, looks = 0.05, 4000, list(range(10, 2001, 10))
    path = VotePath(np.full(trials, p), looks, np.random.default_rng(7))
    prior = BetaMixture(a=(0.5, 1.0), b=(0.5, 0.05), weights=(0.5, 0.5))
    crossed = np.zeros(trials, dtype=bool)
    for look in looks:
        crossed |= betting_lower(prior, path.at(look).astype(float), np.full(trials, float(look)), alpha) > p
    assert binomtest(int(crossed.sum()), trials, alpha, alternative="greater").pvalue >= P_FLAG


def designs_for(goal: Goal) -> list:
    return [
        LooksDesign(goal, first_look=50, growth=2.0),
        BettingDesign(goal),
        BettingDesign(goal, final_share=0.0),
        InformedDesign(goal),
        InformedDesign(goal, final_share=0.0, futility=0.2),
        AdaptiveDesign(goal, stages=(50, 200, 1000)),
    ]


# pA just below each target of the grid 0, 0.25, ..., 1.0 at sigma 0.5 (Phi(0.5), Phi(1), Phi(1.5), Phi(2)), where a
# bound that is a little too loose certifies the target falsely most often; and the tie, 1/2.
JUST_BELOW = [0.5, 0.6914624, 0.8413447, 0.9331927, 0.9772498]


@pytest.mark.parametrize("p", [*JUST_BELOW, 0.6, 0.95, 0.999])
def test_every_design_certifies_falsely_at_most_alpha_of_the_time(p: float) -> None:
    """Coverage of each design, with pA just below each target (the worst cases) and between them."""
    alpha, trials = 0.05, 6000
    goal = Goal.grid(sigma=0.5, alpha=alpha, n_max=2000, cap=1.0, step=0.25)
    for design in designs_for(goal):
        assert design.cap == 1.0
        decisions = simulate(design, p, trials, seed=11)
        failures = int((decisions.certified & (decisions.lower > p)).sum())
        assert binomtest(failures, trials, alpha, alternative="greater").pvalue >= P_FLAG, (design.name, failures)
        true_radius = 0.5 * norm.ppf(p)  # 0 at p = 1/2: a radius-0 certificate of a tie claims nothing false
        assert failures == int((decisions.certified & (decisions.radius > true_radius + 1e-12)).sum())


def test_betting_stops_an_always_right_image_near_the_fewest_samples_any_test_needs() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=0.75)
    decisions = simulate(make_design("betting", goal), 1.0, 50, seed=0)
    floor = math.log(1000) / -math.log(norm.cdf(3.0))  # 5,113 votes: P(all right | pA = Phi(3)) <= alpha
    assert np.all(decisions.radius == pytest.approx(0.75))
    assert np.all(decisions.samples <= 1.35 * floor)  # the sequence's price plus one look's overshoot
    looks = simulate(make_design("looks", goal), 1.0, 50, seed=0)
    assert np.all(looks.samples == 8000)  # (alpha/8)^(1/n) >= Phi(3) first at the 4th look


def test_an_image_between_two_targets_stops_long_before_n() -> None:
    """pA = 0.9: radius 0.32 at sigma 0.25; it certifies 0.25, then 0.5 (pA 0.977) is out of reach."""
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=0.75)
    decisions = simulate(make_design("betting", goal), 0.9, 200, seed=1)
    assert np.mean(decisions.radius >= 0.25) > 0.95
    assert np.all(decisions.radius < 0.5)
    assert np.median(decisions.samples) < 3000


def test_unreachable_targets_are_dropped_and_the_cap_is_the_last_reachable_one() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=1.0)  # 1.0 needs 218,000 votes, all right
    for name in ("looks", "betting", "informed"):
        design = make_design(name, goal)
        assert design.unreachable == (1.0,)
        assert design.cap == 0.75
    with pytest.raises(ValueError, match="unknown sequential design 'fast'; allowed"):
        make_design("fast", goal)


def test_looks_design_keeps_the_first_designs_schedule_and_level() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=100_000, cap=0.75)
    design = LooksDesign(goal)
    assert design.looks() == LookSchedule(1000, 2.0, 100_000).looks()
    assert design.look_alpha == pytest.approx(0.001 / 8)


def test_adaptive_bounds_each_stage_on_its_own_fresh_samples() -> None:
    """98 of 100 votes (no certificate at r = 0.5, pA 0.977), then 1000 of 1000: the second stage is bounded alone."""
    goal = Goal(sigma=0.25, alpha=0.001, n_max=1000, targets=(0.5,))
    design = AdaptiveDesign(goal, stages=(100, 1000))
    cumulative = {100: 98, 1100: 1098}
    decisions = run_design(design, 1, lambda samples, running: np.array([cumulative[samples]]))
    assert decisions.samples[0] == 1100
    assert decisions.lower[0] == pytest.approx(float(cp_lower(1000, 1000, 0.0005)[()]), rel=1e-12)
    assert decisions.radius[0] == 0.5  # certified at the target, which is also the cap
    assert float(cp_lower(1098, 1100, 0.0005)[()]) < decisions.lower[0]  # pooling both stages would bound lower


def test_the_betting_final_look_spends_its_share_of_alpha_on_clopper_pearson() -> None:
    goal = Goal.grid(sigma=0.25, alpha=0.001, n_max=10_000, cap=0.5)
    design = BettingDesign(goal, final_share=0.5)
    assert design.best_lower() == pytest.approx(float(cp_lower(10_000, 10_000, 0.0005)[()]), rel=1e-12)
    assert design.sequence_alpha + design.final_alpha == pytest.approx(0.001)


def test_settings_make_the_design_for_the_grid_or_for_one_radius() -> None:
    protocol = Protocol()  # n = 100,000, alpha = 0.001, radius_step 0.25
    grid = SequentialSchedule().make(0.5, protocol)
    assert grid.name == "informed"
    assert grid.targets == (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)  # the default cap: 1.75 below 1.906
    assert SequentialSchedule().make(1.0, protocol).cap == 2.5  # the papers' tables stop at 2.5
    one = SequentialSchedule(radius_target=0.5).make(0.25, protocol)
    assert (one.targets, one.cap) == ((0.5,), 0.5)
    assert SequentialSchedule(design="adaptive", radius_cap=0.75).make(0.25, protocol).targets == (0.75,)
    assert SequentialSchedule(design="looks", first_look=500).make(0.25, protocol).looks()[:2] == [500, 1000]
    with pytest.raises(ValueError, match=r"certify\.design must be one of"):
        SequentialSchedule(design="fast")
    with pytest.raises(ValueError, match="do not apply to design=adaptive"):
        SequentialSchedule(design="adaptive", growth=1.5)
    with pytest.raises(ValueError, match=r"certify\.radius_target must be >= 0"):
        SequentialSchedule(radius_target=-1.0)


def test_the_betting_lower_bound_is_where_the_wealth_reaches_one_over_alpha() -> None:
    prior = BetaMixture(a=(0.5, 1.0), b=(0.5, 0.05), weights=(0.5, 0.5))
    k, n = np.array([600.0, 950.0]), np.array([1000.0, 1000.0])
    lower = betting_lower(prior, k, n, 0.001)
    assert log_wealth(prior, k, n, lower) == pytest.approx(np.log(1000.0), abs=1e-6)
    assert np.all(log_wealth(prior, k, n, lower + 1e-6) < np.log(1000.0))
