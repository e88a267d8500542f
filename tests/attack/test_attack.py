"""The attack beside the certificate: SmoothAdv's PGD in three norms, empirical accuracy, and the certificate check.

The known classifier is the coordinate classifier of tests/classifiers.py (class 1 iff z_0 + b > 0, margin m): its
smoothed classifier changes class exactly at distance m in every norm, so an attack within m must fail and one
beyond m must succeed, and certificates that claim more than m must be caught.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import binom

from rsbench import Smooth
from rsbench.attack import AttackSettings, CertificateContradictionError, attack_certified
from rsbench.attack.evaluate import check_certificates, contradicts, tail_probability
from rsbench.attack.pgd import distance, project_l1, smoothed_pgd
from rsbench.attack.records import read_attack_rows
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.errors import ProtocolMismatchError
from rsbench.methods.attacks import frozen, pgd_l2_smoothed
from rsbench.runs.certify_model import certify_model
from rsbench.runs.run import build_callbacks, run
from tests.classifiers import Coordinate
from tests.helpers import QUIET, compose_config

SIGMA = 0.25
MARGIN = 0.3
DIM = 16
FAST = AttackSettings(num_steps=10, num_noise=16, n=1000, alpha=0.001)
RADII = (0.0, 0.1, 0.2, 0.4, 0.5)


def problem(images: int = 6) -> tuple[Coordinate, list[tuple[torch.Tensor, int]]]:
    return Coordinate(MARGIN - 0.5), [(torch.full((DIM,), 0.5), 1) for _ in range(images)]


def certificates(radius: float, images: int = 6) -> list[CertificationRow]:
    return [CertificationRow(i, 1, 1, radius, True, 0.01, 990, 1000, 0.99, SIGMA) for i in range(images)]


def test_l1_projection_is_duchis() -> None:
    """On the sphere, one soft threshold for all coordinates, signs kept; inside the ball nothing moves."""
    generator = torch.Generator().manual_seed(0)
    delta = torch.randn(5, 3, 4, 4, generator=generator)
    projected = project_l1(delta, 2.0)
    assert projected.flatten(1).abs().sum(dim=1).numpy() == pytest.approx(np.full(5, 2.0), rel=1e-5)
    for before, after in zip(delta.flatten(1), projected.flatten(1), strict=True):
        moved = after != 0
        assert torch.all(torch.sign(after[moved]) == torch.sign(before[moved]))
        thresholds = (before.abs() - after.abs())[moved]
        assert float(thresholds.max() - thresholds.min()) < 1e-5  # the same theta everywhere it is not zeroed
        assert float(before.abs()[~moved].max()) <= float(thresholds.min()) + 1e-6
    inside = delta / 1000
    assert torch.equal(project_l1(inside, 2.0), inside)


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_the_attack_stays_in_its_ball_and_in_the_image_box(norm: str) -> None:
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    x = torch.rand(4, 3, 4, 4, generator=generator)
    noise = torch.randn(4 * 8, 3, 4, 4, generator=generator) * SIGMA
    with frozen(model):
        adversarial = smoothed_pgd(model, x, torch.tensor([0, 1, 2, 0]), noise, 0.7, 10, norm)
    assert float(adversarial.min()) >= 0.0
    assert float(adversarial.max()) <= 1.0
    for before, after in zip(x, adversarial, strict=True):
        assert distance(before, after, norm) <= 0.7 * (1 + 1e-5)
        assert distance(before, after, norm) > 0.1  # it moved
    if norm == "l2":  # Salman et al.'s search, the one SmoothAdv trains with
        with frozen(model):
            assert torch.equal(adversarial, pgd_l2_smoothed(model, x, torch.tensor([0, 1, 2, 0]), noise, 0.7, 10))


@pytest.mark.parametrize(
    ("noise", "norm"), [("gaussian", None), ("laplace", None), ("uniform", None), ("gaussian", "linf")]
)
def test_the_attack_breaks_the_coordinate_classifier_exactly_beyond_its_margin(tmp_path, noise, norm) -> None:
    """Empirically robust up to 0.2, broken at 0.4 and 0.5 (the margin is 0.3), and no certificate contradicted."""
    model, images = problem()
    smooth = Smooth(model, 2, SIGMA, noise=noise, norm=norm)
    certified = [
        CertificationRow(i, 1, c.prediction, c.radius, c.prediction == 1, c.seconds, c.count, c.n, c.p_a_lower, SIGMA)
        for i, c in enumerate(smooth.certify_batch(torch.stack([x for x, _ in images]), 100, 10_000, 0.001, 10_000))
    ]
    assert all(0 < row.radius <= MARGIN for row in certified)
    outcome = attack_certified(smooth, images, certified, FAST, RADII, tmp_path, seed=0, certify_alpha=0.001)
    summary = outcome.summary
    assert summary["empirical_accuracy"] == {"0.0": 1.0, "0.1": 1.0, "0.2": 1.0, "0.4": 0.0, "0.5": 0.0}
    assert summary["contradictions"] == 0
    assert summary["contradictions_p_value"] == 1.0
    for key in summary["empirical_accuracy"]:  # the attack's upper bound is above the certificate's lower bound
        assert summary["empirical_accuracy"][key] >= summary["certified_accuracy"][key]
    broken = [row for row in outcome.rows if not row.correct]
    assert {row.radius for row in broken} == {0.4}  # each image's attack stops at its first success
    check_certificates(summary)


def test_certificates_that_claim_too_much_are_caught(tmp_path) -> None:
    """A certifier claiming radius 1.0 where the truth is 0.3: every image is flipped inside its 'certificate'."""
    model, images = problem()
    smooth = Smooth(model, 2, SIGMA)
    outcome = attack_certified(smooth, images, certificates(1.0), FAST, RADII, tmp_path, seed=0, certify_alpha=0.001)
    assert outcome.summary["contradictions"] == 6
    assert outcome.summary["contradicted_images"] == list(range(6))
    assert outcome.summary["contradictions_p_value"] < 1e-9
    with pytest.raises(CertificateContradictionError, match=r"on 6 of 6 images .* certificates are wrong"):
        check_certificates(outcome.summary)
    assert all(row.contradiction for row in read_attack_rows(tmp_path) if not row.correct)


def test_what_contradicts_a_certificate() -> None:
    cert = CertificationRow(0, 1, 1, 0.5, True, 0.0, 0, 0, 0.9, SIGMA)
    assert contradicts(0, 0.25, cert)
    assert not contradicts(1, 0.25, cert)  # the certified class
    assert not contradicts(Smooth.ABSTAIN, 0.25, cert)  # PREDICT abstaining contradicts nothing
    assert not contradicts(0, 0.5, cert)  # at (or beyond) the certified radius
    abstained = CertificationRow(0, 1, -1, 0.0, False, 0.0, 0, 0, 0.4, SIGMA)
    assert not contradicts(0, 0.0, abstained)


def test_the_tail_of_the_contradiction_count_is_exact() -> None:
    """Equal probabilities: the binomial tail; K = 0 is certain; heterogeneous ones against a Monte Carlo sum."""
    assert tail_probability([0.01] * 50, 2) == pytest.approx(float(binom.sf(1, 50, 0.01)), rel=1e-10)
    assert tail_probability([0.3, 0.5], 0) == 1.0
    probabilities = np.random.default_rng(0).uniform(0, 0.2, size=30)
    draws = (np.random.default_rng(1).uniform(size=(200_000, 30)) < probabilities).sum(axis=1)
    assert tail_probability(list(probabilities), 5) == pytest.approx(float(np.mean(draws >= 5)), abs=0.005)


def test_an_interrupted_attack_resumes_to_the_same_rows(tmp_path) -> None:
    model, images = problem()
    smooth = Smooth(model, 2, SIGMA)
    calls = []
    stopped = attack_certified(
        smooth,
        images,
        certificates(0.25),
        FAST,
        RADII,
        tmp_path / "a",
        seed=3,
        certify_alpha=0.001,
        should_stop=lambda: calls.append(1) or len(calls) == 2,
    )
    assert stopped.stopped
    assert sorted({row.idx for row in read_attack_rows(tmp_path / "a")}) == [0, 1]
    resumed = attack_certified(
        smooth, images, certificates(0.25), FAST, RADII, tmp_path / "a", seed=3, certify_alpha=0.001
    )
    whole = attack_certified(
        smooth, images, certificates(0.25), FAST, RADII, tmp_path / "b", seed=3, certify_alpha=0.001
    )
    key = lambda row: (row.idx, row.radius, row.predict, row.distance)  # noqa: E731
    assert [key(r) for r in resumed.rows] == [key(r) for r in whole.rows]
    other = AttackSettings(num_steps=5, num_noise=16, n=1000)
    with pytest.raises(ProtocolMismatchError, match="attacked with other settings"):
        attack_certified(smooth, images, certificates(0.25), other, RADII, tmp_path / "a", seed=3, certify_alpha=0.001)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"num_steps": 0}, "attack.num_steps must be an integer >= 1, got 0"),
        ({"alpha": 2.0}, "attack.alpha must be in"),
        ({"radii": [-0.5]}, "attack.radii must be a non-empty list of radii >= 0"),
        ({"name": "autoattack"}, r"attack.name must be one of \['smoothadv'\]"),
        ({"steps": 3}, r"unknown attack keys \['steps'\]"),
    ],
)
def test_bad_attack_settings_are_refused_naming_the_key(keys, message) -> None:
    with pytest.raises(ValueError, match=message):
        AttackSettings.from_keys(**keys)


# -------------------------------------------------------------------------------------- through both commands


def test_attack_and_noise_compose_and_build(make_cfg) -> None:
    cfg = make_cfg("noise=uniform", "certify.norm=linf", "attack=smoothadv", "attack.num_noise=4")
    callback = build_callbacks(cfg)[0]
    assert callback.settings.protocol.threat.describe() == "linf (uniform noise)"
    assert (callback.attack.num_steps, callback.attack.num_noise, callback.attack.n) == (20, 4, 1000)
    with pytest.raises(Exception, match=r"attack.num_steps must be an integer >= 1, got 0"):
        build_callbacks(make_cfg("attack=smoothadv", "attack.num_steps=0"))


ATTACK = ("attack=smoothadv", "attack.num_steps=2", "attack.num_noise=4", "attack.n=100", "attack.max_images=3")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smoke-trained LeNet, certified and attacked by its training run (the callback's path)."""
    output_dir = tmp_path_factory.mktemp("trained")
    run(compose_config(*QUIET, "experiment=smoke", *ATTACK, output_dir=output_dir))
    return output_dir


def test_the_training_run_attacks_after_certifying(trained: Path) -> None:
    attack = json.loads((trained / "metrics.json").read_text())["attack"]
    assert attack["images"] == 3
    assert list(attack["empirical_accuracy"]) == list(
        json.loads((trained / "metrics.json").read_text())["certified_accuracy"]
    )
    assert attack["cost_ratio"] > 0
    assert {row.idx for row in read_attack_rows(trained)} <= {0, 1, 2}


@pytest.mark.parametrize("model", ["checkpoint", "ensemble"])
def test_the_certify_command_attacks_any_model(trained: Path, tmp_path: Path, model: str) -> None:
    ckpt = str(trained / "checkpoints" / "best.ckpt")
    chosen = [f"model.path={ckpt}"] if model == "checkpoint" else ["model=ensemble", f"model.members=[{ckpt},{ckpt}]"]
    certify_model(compose_config("certify=smoke", *ATTACK, *chosen, output_dir=tmp_path, config_name="certify_model"))
    attack = json.loads((tmp_path / "metrics.json").read_text())["attack"]
    assert (attack["images"], attack["norm"], attack["noise"]) == (3, "l2", "gaussian")
    if model == "checkpoint":  # the same model, noise streams and attack as the training run's: the same rows
        drop_time = lambda rows: [row.to_line().rsplit("\t", 1)[0] for row in rows]  # noqa: E731
        assert drop_time(read_attack_rows(tmp_path)) == drop_time(read_attack_rows(trained))


def test_the_cost_benchmark_prints_the_ratio(capsys) -> None:
    from rsbench.bench import attack_cost

    args = ["--arch", "lenet", "--images", "1", "--n", "200", "--n0", "10", "--steps", "1", "--noise", "2"]
    result = attack_cost.run(attack_cost.parse_args([*args, "--predict-n", "50", "--repeats", "1"]))
    assert result["ratio"] > 0
    assert "the attack costs" in capsys.readouterr().out
