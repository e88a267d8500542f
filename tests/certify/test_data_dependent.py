"""Data-dependent smoothing: the sigma search, the memory replay, and honest reporting in every output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from numpy.polynomial.hermite_e import hermegauss
from scipy.stats import norm
from torch import nn

from rsbench.certify.algorithm import sigma_search
from rsbench.certify.algorithm.data_dependent import SigmaSearch
from rsbench.certify.algorithm.sigma_search import optimize_sigma, radius_proxy
from rsbench.certify.pipeline.memory_replay import memory_replay
from rsbench.certify.pipeline.records import CertificationRow, read_rows
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.runs.run import run
from tests.helpers import QUIET, compose_config

HALF_WIDTH, SCALE = 0.5, 8.0
NODES, WEIGHTS = hermegauss(100)


class Slab(nn.Module):
    """Class 0 with probability sigmoid(SCALE * (HALF_WIDTH - |w.(z - x0)|)): a slab around x0, class 1 outside.

    Under N(0, sigma^2 I) noise at x0, the radius proxy sigma/2 (Phi^-1(E_A) - Phi^-1(E_B)) rises with sigma while
    the noise stays inside the slab and falls once it leaves it: an interior optimum, computed by quadrature below.
    """

    def __init__(self, x0: torch.Tensor) -> None:
        super().__init__()
        w = torch.zeros(x0.numel())
        w[0] = 1.0
        self.register_buffer("w", w)
        self.register_buffer("x0", x0.flatten())

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = (z.flatten(1) - self.x0) @ self.w
        return torch.stack([SCALE * (HALF_WIDTH - h.abs()), torch.zeros_like(h)], dim=1)


def exact_proxy(sigma: float) -> float:
    """The proxy at x0 under the slab classifier, by Gauss-Hermite quadrature over the one relevant direction."""
    p_a = float(WEIGHTS @ (1 / (1 + np.exp(-SCALE * (HALF_WIDTH - np.abs(sigma * NODES))))) / WEIGHTS.sum())
    p_a, p_b = np.clip([p_a, 1 - p_a], 0.02, 0.98)
    return sigma / 2 * (norm.ppf(p_a) - norm.ppf(p_b))


def test_radius_proxy_matches_the_formula() -> None:
    probabilities = torch.tensor([[0.7, 0.2, 0.1], [0.999, 0.001, 0.0]])
    expected = [0.25 * (norm.ppf(0.7) - norm.ppf(0.2)), 1.0 * (norm.ppf(0.98) - norm.ppf(0.02))]  # second: clamped
    assert radius_proxy(probabilities, torch.tensor([0.5, 2.0])).tolist() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("start", [0.08, 0.5])
def test_sigma_search_moves_towards_the_optimum_from_both_sides(start: float) -> None:
    grid = np.linspace(0.02, 0.6, 300)
    optimum = float(grid[np.argmax([exact_proxy(s) for s in grid])])  # about 0.26
    x = torch.full((1, 1, 4), 0.5)
    sigma = optimize_sigma(
        Slab(x), x, start, iterations=60, lr=0.02, samples=256, generator=torch.Generator().manual_seed(0)
    )
    found = float(sigma[0])
    assert abs(found - optimum) < abs(start - optimum) / 2  # at least halfway there, from below and from above
    assert exact_proxy(found) > exact_proxy(start)


def test_sigma_search_is_batched_per_input_and_leaves_parameters_alone() -> None:
    x = torch.full((1, 1, 4), 0.5)
    model = Slab(x)
    model.probe = nn.Linear(1, 1)  # a parameter that must not receive a gradient
    xs = torch.cat([x, x])
    sigma = optimize_sigma(
        model,
        xs,
        torch.tensor([0.08, 0.5]),
        iterations=40,
        lr=0.02,
        samples=128,
        generator=torch.Generator().manual_seed(1),
    )
    assert sigma.shape == (2,)
    assert sigma[0] > 0.08
    assert sigma[1] < 0.5
    assert model.probe.weight.grad is None
    assert torch.equal(optimize_sigma(model, xs, 0.3, iterations=0, lr=0.02, samples=1), torch.tensor([0.3, 0.3]))


class TieAtQuarter(nn.Module):
    """Logits (z_1, z_0 - 0.25, -1) of a two-pixel image z. At x = (0.25, 0.25) with noise sigma * (1, 0) and
    sigma = 0.25, the first two logits are both exactly 0.25 (every number here is a binary fraction), so the top two
    scores tie and the radius proxy is exactly 0, while only the second logit moves with sigma (d/dsigma = 1)."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        z = z.flatten(1)
        return torch.stack([z[:, 1], z[:, 0] - 0.25, torch.full_like(z[:, 0], -1.0)], dim=1)


def test_relu_objective_drops_the_gradient_where_the_radius_is_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sigma_search.torch, "randn", lambda shape, **_: torch.tensor([1.0, 0.0]).view(shape))
    x, sigma, lr = torch.full((1, 1, 1, 2), 0.25), 0.25, 0.1

    def one_step(objective: str) -> float:
        return float(optimize_sigma(TieAtQuarter(), x, sigma, iterations=1, lr=lr, samples=1, objective=objective)[0])

    # R = sigma / 2 * (Phi^-1(p_a) - Phi^-1(p_b)) with p_a = p_b = p = 1 / (2 + e^-1.25): R = 0, and
    # dR/dsigma = sigma / 2 * (+-) (dp_b - dp_a) / phi(Phi^-1(p)) with dp_b - dp_a = p (1 - p) + p^2 = p
    # (the sign depends on which of the tied classes topk lists first).
    p = 1 / (2 + math.exp(-1.25))
    step = lr * sigma / 2 * p / norm.pdf(norm.ppf(p))
    assert abs(one_step("radius") - sigma) == pytest.approx(step, rel=1e-4)
    assert one_step("relu_radius") == pytest.approx(sigma, abs=1e-12)  # relu(R) has no gradient at R = 0


def test_relu_objective_agrees_with_the_radius_where_it_is_positive() -> None:
    x = torch.full((1, 1, 4), 0.5)

    def search(objective: str) -> torch.Tensor:
        generator = torch.Generator().manual_seed(0)
        return optimize_sigma(
            Slab(x), x, 0.1, iterations=20, lr=0.02, samples=64, generator=generator, objective=objective
        )

    assert torch.allclose(search("relu_radius"), search("radius"), rtol=0, atol=1e-7)
    with pytest.raises(ValueError, match=r"objective must be one of \['radius', 'relu_radius'\], got 'hinge'"):
        search("hinge")


def test_certification_search_takes_the_methods_n_and_objective_else_the_papers_default() -> None:
    assert SigmaSearch().with_defaults(samples=8) == SigmaSearch(samples=8, objective="radius")
    assert SigmaSearch().with_defaults(objective="relu_radius") == SigmaSearch(samples=1, objective="relu_radius")
    explicit = SigmaSearch(samples=64, objective="radius")
    assert explicit.with_defaults(samples=8, objective="relu_radius") == explicit  # explicit settings win
    with pytest.raises(ValueError, match="sigma_objective must be one of"):
        SigmaSearch(objective="hinge")


def test_sigma_search_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="sigma_init must be > 0"):
        SigmaSearch(init=0.0)
    with pytest.raises(ValueError, match="sigma_iters must be >= 0"):
        SigmaSearch(iterations=-1)


def row(idx: int, predict: int, radius: float, label: int | None = None) -> CertificationRow:
    label = predict if label is None else label
    return CertificationRow(idx, label, predict, radius, predict == label, 0.0, 0, 1000, 0.9, 0.5, sound=False)


def test_memory_replay_shrinks_overlapping_balls_and_switches_points_inside_one() -> None:
    images = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.2, 0.0], [3.0, 0.0]]).view(4, 1, 1, 2)
    rows = [row(0, 0, 0.5), row(1, 1, 0.8), row(2, 1, 0.4, label=1), row(3, 2, 1.0)]
    replayed, report = memory_replay(rows, images)
    # point 1 (class 1) at distance 1.0 from point 0's ball (radius 0.5, class 0): shrunk to 1.0 - 0.5
    assert replayed[1].radius == pytest.approx(0.5)
    # point 2 lies inside point 0's ball: it takes class 0 and the distance to that ball's boundary
    assert (replayed[2].predict, replayed[2].radius, replayed[2].correct) == (0, pytest.approx(0.3), False)
    assert replayed[3].radius == 1.0  # far from everything: unchanged
    assert (report.shrunk, report.switched, report.memory_size) == (1, 1, 4)
    assert not any(r.sound for r in replayed)


def test_memory_replay_leaves_no_overlapping_balls_of_different_classes() -> None:
    """Naive per-input radii overlap across classes; after the replay no two balls of different classes do."""
    generator = torch.Generator().manual_seed(0)
    images = torch.rand(200, 1, 1, 2, generator=generator)
    classes = (images.flatten(1)[:, 0] > 0.5).long().tolist()
    radii = (torch.rand(200, generator=generator) * 0.3).tolist()
    rows = [
        row(i, c if i % 10 else -1, r if i % 10 else 0.0) for i, (c, r) in enumerate(zip(classes, radii, strict=True))
    ]
    points = images.flatten(1).double()
    distances = torch.cdist(points, points, compute_mode="donot_use_mm_for_euclid_dist")
    # The replay makes a shrunk ball touch its neighbour exactly (radius = distance - R_j), which the promise allows
    # (open balls). This test measures distances with another kernel than the code (cdist vs vector_norm), whose
    # float64 results differ by a few ulp (-5.6e-17 seen on an Intel CPU), so an overlap counts only beyond 1e-12:
    # far above that rounding, far below any real overlap (naive radii overlap by up to 0.3).
    touching = 1e-12

    def conflicts(records: list[CertificationRow]) -> int:
        return sum(
            1
            for i, a in enumerate(records)
            for j, b in enumerate(records[:i])
            if -1 not in (a.predict, b.predict)
            and a.predict != b.predict
            and a.radius + b.radius - distances[i, j] > touching
        )

    assert conflicts(rows) > 10  # the naive certificates contradict each other
    replayed, _ = memory_replay(rows, images)
    assert conflicts(replayed) == 0
    assert [r.predict for r in replayed if r.idx % 10 == 0] == [-1] * 20  # abstentions pass through


@pytest.mark.parametrize("sigma_mode", ["data_dependent", "memory"])
def test_data_dependent_modes_say_they_are_not_sound_and_report_the_sound_one_beside(
    smoke_checkpoint: Path, tmp_path: Path, sigma_mode: str
) -> None:
    run(
        compose_config(
            *QUIET,
            "experiment=smoke",
            "train=false",
            f"ckpt_path={smoke_checkpoint}",
            f"certify.sigma_mode={sigma_mode}",
            "certify.sigma_iters=3",
            "certify.sigma_lr=0.01",
            "certify.sigma_samples=8",
            output_dir=tmp_path,
        )
    )
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    per_input = read_rows(tmp_path / "certify.tsv")
    fixed = read_rows(tmp_path / "certify_fixed_sigma.tsv")
    assert metrics["sound"] is False
    assert "NOT a sound certificate" in metrics["soundness"] or "stateful" in metrics["soundness"]
    assert metrics["sigma_mode"] == sigma_mode
    assert metrics["fixed_sigma"]["sound"] is True
    assert not any(r.sound for r in per_input)
    assert all(r.sound for r in fixed)
    assert [r.idx for r in per_input] == [r.idx for r in fixed] == list(range(8))
    assert all(r.sigma == 0.25 for r in fixed)
    assert len({r.sigma for r in per_input}) > 1  # each input got its own sigma
    protocol = json.loads((tmp_path / "certify_protocol.json").read_text())
    assert (protocol["sigma_search"]["samples"], protocol["sigma_search"]["objective"]) == (8, "radius")
    if sigma_mode == "memory":
        assert set(metrics["memory"]) == {"order", "memory_size", "shrunk", "switched"}
        assert (tmp_path / "certify_data_dependent.tsv").exists()


@pytest.mark.parametrize(
    ("overrides", "defaults"),
    [
        (["method=macer"], {"sigma_samples": 8}),
        (["method=smoothadv"], {"sigma_objective": "relu_radius"}),
        (["method=ddrs", "method.base=macer"], {"sigma_samples": 8, "sigma_objective": "radius"}),
        (["method=ddrs", "method.base=smoothadv"], {"sigma_samples": 1, "sigma_objective": "relu_radius"}),
        (["method=gaussian"], {}),
    ],
)
def test_the_papers_certification_search_per_method_comes_from_the_methods_config(make_cfg, overrides, defaults):
    """The DDRS paper certifies MACER models with n = 8 and SmoothAdv ones with relu(R): each method's YAML says so."""
    cfg = make_cfg(*overrides, "certify.sigma_mode=data_dependent")
    module = instantiate(cfg.method, net=instantiate(cfg.arch), optimizer=instantiate(cfg.optimizer))
    assert module.certify_defaults == defaults
    settings = CertifySettings.from_config(cfg.certify).with_defaults(module.certify_defaults)
    assert settings.data_dependent is not None
    search = settings.data_dependent.search
    assert (search.samples, search.objective) == (
        defaults.get("sigma_samples", 1),
        defaults.get("sigma_objective", "radius"),
    )
