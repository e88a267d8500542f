"""The replay benchmark: the oracle reproduces a log, the designs replay on it, the command prints the table.

Small and seeded: 400 images of one shipped log; tolerances are stated next to each check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from rsbench.bench import oracle as oracle_module
from rsbench.bench import replay
from rsbench.bench.oracle import Assumptions, build_oracle, count_for_bound, half_point, selection_votes
from rsbench.certify.algorithm.confidence import cp_lower

IMAGES = 400


@pytest.fixture(scope="module")
def catrs() -> replay.LogSpec:
    (spec,) = replay.shipped_logs("cifar10 catrs s=0.25")
    return replay.subsample(spec, IMAGES, seed=0)


def test_count_for_bound_inverts_clopper_pearson() -> None:
    counts = np.array([50_200.0, 60_000.0, 90_000.0, 99_900.0, 99_999.0])
    bounds = cp_lower(counts, 100_000, 0.001)
    assert count_for_bound(bounds, 100_000, 0.001) == pytest.approx(counts, abs=1e-3)
    assert half_point(100_000, 0.001) == pytest.approx(0.50489, abs=1e-4)  # n p = 50,489 votes give exactly 1/2


def test_the_oracle_models_every_kind_of_logged_image() -> None:
    sigma, n = 0.25, 100_000
    radius = np.array([0.0, 0.1, 0.5, 0.953, 0.3])
    predict, label = np.array([-1, 3, 3, 3, 2]), np.array([1, 3, 3, 3, 5])
    built = build_oracle(
        label=label,
        predict=predict,
        radius=radius,
        sigma=sigma,
        n0=100,
        n=n,
        alpha=0.001,
        assumptions=Assumptions(cap="one", abstained=0.5),
        rng=np.random.default_rng(0),
    )
    assert list(built.abstained) == [True, False, False, False, False]
    assert list(built.at_cap) == [False, False, False, True, False]
    assert list(built.correct) == [False, True, True, True, False]  # the last one is a wrong prediction
    assert built.p_selected[0] == 0.5
    assert built.p_selected[3] == 1.0
    # the expected count reproduces the logged bound: Beta^-1(alpha; p n, n - p n + 1) = Phi(r / sigma)
    expected = cp_lower(built.p_selected[1:3] * n, n, 0.001)
    assert expected == pytest.approx(norm.cdf(radius[1:3] / sigma), abs=1e-9)
    with pytest.raises(ValueError, match="cap model must be one of"):
        Assumptions(cap="half")


def test_fixed_n_on_the_oracle_reproduces_the_log(catrs: replay.LogSpec) -> None:
    """The oracle is calibrated to the log's median: replayed fixed n lands near the logged certified accuracy."""
    outcomes, _ = replay.replay(catrs, [], key=0)
    fixed = outcomes[0]
    logged = np.array([np.mean((catrs.predict == catrs.label) & (catrs.radius >= r)) for r in fixed.radii])
    # certified accuracy over 400 images has a binomial sd of at most 2.5 points; allow 3 sd plus rounding
    assert np.abs(fixed.accuracy - logged).max() < 0.08
    assert fixed.mean_samples == 100_100


def test_the_designs_replay_with_fewer_samples_and_stay_sound(catrs: replay.LogSpec) -> None:
    candidates = [replay.Candidate(name, name) for name in ("looks", "betting", "informed")]
    outcomes, decisions = replay.replay(catrs, candidates, key=0)
    fixed, looks, betting, informed = outcomes
    assert set(decisions) == {"looks", "betting", "informed"}
    assert informed.mean_samples < betting.mean_samples < looks.mean_samples < fixed.mean_samples / 4
    for outcome in (looks, betting, informed):
        # paired differences against fixed n on the same votes: within 3 points at every radius on 400 images
        assert np.all(np.abs(outcome.delta) < 0.03)
        assert outcome.false <= 3  # expected <= alpha * 400 = 0.4; P(more than 3) < 1e-3 at that rate
        assert binomtest(outcome.false, outcome.images, 0.001, alternative="greater").pvalue >= 1e-3
        assert fixed.mean_samples / outcome.floor >= fixed.mean_samples / outcome.mean_samples


def test_a_radius_target_gives_each_design_one_radius(catrs: replay.LogSpec) -> None:
    candidates = [replay.Candidate(name, name) for name in ("looks", "betting", "adaptive")]
    outcomes, _ = replay.replay(catrs, candidates, key=0, radius_target=0.5)
    assert all(o.radii == (0.5,) for o in outcomes)
    assert "decides one radius, 0.5" in outcomes[3].promise
    assert outcomes[2].mean_samples < outcomes[3].mean_samples  # betting needs fewer samples than Horvath's stages


def test_the_command_prints_a_line_per_log_and_design_and_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], catrs: replay.LogSpec
) -> None:
    log = tmp_path / "noise_0.25.tsv"  # a Cohen-format log given by path: sigma from the file name
    rows = ["idx\tlabel\tpredict\tradius\tcorrect\ttime"]
    for i in range(200):
        correct = int(catrs.predict[i] == catrs.label[i])
        rows.append(f"{i}\t{catrs.label[i]}\t{catrs.predict[i]}\t{catrs.radius[i]:.3g}\t{correct}\t0")
    log.write_text("\n".join(rows) + "\n")
    assert replay.main([str(log), "--detail"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(str(log))]
    assert [line.split()[1] for line in lines] == ["fixed", "looks", "betting", "informed"]
    assert "informed: " in out
    assert "of the floor's saving" in out
    assert "floor (Wald: any sound test that certifies every image" in out
    assert "floor within 0.5 points" in out
    assert "radius            0    0.25     0.5    0.75" in out


def test_the_oracle_module_says_how_it_models_what_the_log_does_not_hold() -> None:
    doc = oracle_module.__doc__ or ""
    for topic in ("at the cap", "abstained", "selection", "true radius"):
        assert topic in doc


def test_the_floor_within_half_a_point_needs_fewer_samples_and_none_for_wrong_images(catrs: replay.LogSpec) -> None:
    """Allowed to lose 0.5 points per radius (in expectation), a test may skip images: its floor is lower."""
    rng = np.random.default_rng(0)
    oracle = build_oracle(
        label=catrs.label,
        predict=catrs.predict,
        radius=catrs.radius,
        sigma=catrs.sigma,
        n0=catrs.n0,
        n=catrs.n,
        alpha=catrs.alpha,
        assumptions=Assumptions(),
        rng=rng,
    )
    radii = replay.table_radii(catrs.sigma, catrs.n, catrs.alpha)
    full, within = replay.floor_samples(oracle, radii), replay.floor_within(oracle, radii)
    assert np.all(within <= full)
    assert np.all(within[~oracle.correct] == 0)  # certified accuracy counts correct images only
    assert within.mean() < full.mean()
    votes = selection_votes(oracle, rng)
    assert np.all((votes >= 0) & (votes <= catrs.n0))
    assert np.all(votes[~oracle.abstained] >= catrs.n0 / 2)  # the selected class won its selection
