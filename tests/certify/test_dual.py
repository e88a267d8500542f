"""Dual randomized smoothing (rsbench/certify/algorithm/dual.py): soundness against closed forms, then the records.

Every router and expert here is a linear classifier f(z) = [w.z + b > 0] with unit w, which is its own smoothed
classifier (tests/certify/test_coverage.py): g(x) = f(x), P(f(x + eps) = 1) = Phi(m / sigma) at signed distance m,
and g is constant exactly within |m| of x. So the dual classifier G(x') = g_{router(x')}(x') is known in closed form,
and a dual certificate (c, R) can be graded exactly: it is false iff G(x) != c or some x' with ||x' - x|| < R has
G(x') != c, i.e. iff R exceeds the distance from x to the nearest point where the routed expert disagrees with c
(the distance from x to the intersection of the router's region k and expert k's other halfspace, minimised over k;
:func:`distance_to_disagreement`). The coverage test certifies one such problem many times (seeded, deterministic)
and tests H0 "false-certificate rate <= alpha + beta" with a one-sided binomial test at P_FLAG = 1e-3, as
tests/certify/test_coverage.py does for CERTIFY. The same grading catches a certifier that ignores the router's radius.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import norm

from rsbench import Smooth
from rsbench.certify.algorithm.dual import DualCertificate, DualSmooth, combine, router_labels, router_seed
from rsbench.certify.algorithm.groups import certifier
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.smooth import Certificate
from rsbench.certify.pipeline.dual_records import DUAL_RECORD, dual_row, dual_rows, summarize_dual
from rsbench.certify.pipeline.records import (
    COLUMNS,
    DUAL_COLUMNS,
    CertificationRow,
    RecordWriter,
    read_rows,
    write_record,
)
from rsbench.errors import DamagedFileError, ProtocolMismatchError
from tests.classifiers import Linear
from tests.stats import ALPHA, N0, P_FLAG, N, soundness_p_value

SHAPE = (1, 4, 4)
BATCH = 1000
FLOAT32 = 1e-6
"""Distances are exact for the classifiers as built, whose normals are float32 buffers: margins placed in float64
land within ~1e-7 of their target, and a radius within 1e-6 of the exact distance is not graded false (a radius
falls there with negligible probability)."""


def cert(prediction: int, radius: float, sigma: float = 0.5, n: int = 1000) -> Certificate:
    return Certificate(prediction, radius, 0.9, 900, max(prediction, 0), 100, n, 0.001, sigma, 0.1)


# ------------------------------------------------------------------------------------------ the rules


def test_combine_takes_the_smaller_radius_and_the_routed_experts_class() -> None:
    dual = combine(cert(1, 0.3), cert(4, 0.8), [0.25, 0.5], 0.001, 0.002)
    assert (dual.prediction, dual.radius, dual.expert, dual.sigma) == (4, 0.3, 1, 0.5)
    assert dual.failure_probability == pytest.approx(0.003)
    dual = combine(cert(0, 0.9), cert(2, 0.4), [0.25, 0.5], 0.001, 0.001)
    assert (dual.prediction, dual.radius, dual.sigma) == (2, 0.4, 0.25)


def test_combine_abstains_when_the_router_or_the_expert_abstains() -> None:
    router_abstains = combine(cert(-1, 0.0), None, [0.25, 0.5], 0.001, 0.001)
    assert (router_abstains.prediction, router_abstains.radius, router_abstains.expert) == (-1, 0.0, -1)
    expert_abstains = combine(cert(0, 0.7), cert(-1, 0.0), [0.25, 0.5], 0.001, 0.001)
    assert (expert_abstains.prediction, expert_abstains.radius, expert_abstains.expert) == (-1, 0.0, 0)
    with pytest.raises(ValueError, match="no certificate"):
        combine(cert(1, 0.7), None, [0.25, 0.5], 0.001, 0.001)


def test_router_labels_pick_the_largest_radius_with_ties_to_the_smallest_sigma() -> None:
    radii = np.array([[0.2, 0.5, 0.9], [0.0, 0.0, 0.0], [0.6, 0.6, 0.1], [0.3, 0.0, 0.0]])
    assert router_labels(radii).tolist() == [2, 0, 0, 0]


def test_router_noise_is_independent_of_the_experts() -> None:
    seeds = [derive_seed(0, i) for i in range(100)]
    assert not set(seeds) & {router_seed(s) for s in seeds}


# ------------------------------------------------------------------------------------------ closed forms


def unit(seed: int) -> torch.Tensor:
    w = torch.randn(SHAPE, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return w / w.norm()


def hyperplane_at(w: torch.Tensor, x: torch.Tensor, margin: float) -> Linear:
    """The linear classifier with normal ``w`` whose signed distance from ``x`` is ``margin``."""
    return Linear(w, margin - float((w * x).sum()))


def signed_margin(model: Linear, x: torch.Tensor) -> float:
    return float(x.flatten().double() @ model.w.double() + model.b)


def distance_to_halfspaces(x: np.ndarray, constraints: list[tuple[np.ndarray, float]]) -> float:
    """The distance from ``x`` to {z: a.z >= c for each (a, c)} (at most two normals, not parallel).

    The nearest point has one or both constraints active (KKT): the nearest feasible projection wins.
    """
    feasible = lambda z: all(a @ z >= c - 1e-9 for a, c in constraints)  # noqa: E731
    if feasible(x):
        return 0.0
    candidates = []
    for a, c in constraints:  # one active constraint: the projection onto its hyperplane
        z = x + (c - a @ x) / (a @ a) * a
        if feasible(z):
            candidates.append(np.linalg.norm(z - x))
    if len(constraints) == 2:  # both active: the projection onto the intersection of the two hyperplanes
        a = np.stack([constraints[0][0], constraints[1][0]])
        rhs = np.array([constraints[0][1], constraints[1][1]]) - a @ x
        z = x + a.T @ np.linalg.solve(a @ a.T, rhs)
        candidates.append(np.linalg.norm(z - x))
    return float(min(candidates))


def distance_to_disagreement(x: torch.Tensor, router: Linear, experts: list[Linear], c: int) -> float:
    """The distance from ``x`` to the nearest x' where G(x') != c (G routes by the sign of the router's margin).

    Region of expert 1: router margin > 0; of expert 0: < 0. Expert k disagrees with c where its class is 1 - c.
    """
    z = x.flatten().double().numpy()
    u, b_r = router.w.double().numpy(), router.b
    best = math.inf
    for k, expert in enumerate(experts):
        route = (u, -b_r) if k == 1 else (-u, b_r)  # u.z + b_r >= 0, or <= 0
        w, b = expert.w.double().numpy(), expert.b
        other = (w, -b) if c == 0 else (-w, b)  # the expert says 1 where w.z + b > 0
        best = min(best, distance_to_halfspaces(z, [route, other]))
    return best


def true_class(x: torch.Tensor, router: Linear, experts: list[Linear]) -> int:
    k = int(signed_margin(router, x) > 0)
    return int(signed_margin(experts[k], x) > 0)


def is_false(dual: DualCertificate, x: torch.Tensor, router: Linear, experts: list[Linear]) -> bool:
    """Whether a dual certificate claims something false about G (an abstention claims nothing)."""
    if dual.prediction == -1:
        return False
    if dual.prediction != true_class(x, router, experts):
        return True
    return dual.radius > distance_to_disagreement(x, router, experts, dual.prediction) + FLOAT32


def dual_smooth(router: Linear, router_sigma: float, experts: list[Linear], sigmas: list[float]) -> DualSmooth:
    return DualSmooth(
        Smooth(router, 2, router_sigma),
        [Smooth(e, 2, s) for e, s in zip(experts, sigmas, strict=True)],
        certifier(N0, N, BATCH),
    )


def coverage_problem() -> tuple[torch.Tensor, Linear, list[Linear], list[float], float]:
    """x with the router and both experts placed where CERTIFY's failure probability is near its level.

    Router: sigma_r = 0.25, margin +0.32 (p = Phi(1.28) = 0.90, routes to expert 1); expert 1 (sigma 0.5) says
    class 1 at margin 0.64 (p = 0.90, radius about 0.6); expert 0 (sigma 0.25) says class 0 across the router's
    boundary. So G flips about 0.32 from x, the router's radius is the one that binds, and a router radius
    overclaimed (probability about beta) is a false dual certificate.
    """
    x = torch.rand(SHAPE, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    router = hyperplane_at(unit(10), x, 0.32)
    experts = [hyperplane_at(unit(11), x, -0.2), hyperplane_at(unit(12), x, 0.64)]
    return x, router, experts, [0.25, 0.5], 0.25


@pytest.mark.slow
def test_dual_certificates_are_false_at_most_alpha_plus_beta() -> None:
    """2,000 independent dual certifications of one problem: false certificates <= alpha + beta (binomial test)."""
    x, router, experts, sigmas, router_sigma = coverage_problem()
    smooth = dual_smooth(router, router_sigma, experts, sigmas)
    trials = 2000
    xs = x.float().unsqueeze(0).expand(trials, *SHAPE).contiguous()
    seeds = [derive_seed(2026, t) for t in range(trials)]
    certificates = smooth.certify_batch(xs, seeds, ALPHA, ALPHA)
    failures = sum(is_false(d, x, router, experts) for d in certificates)
    routed = [d for d in certificates if d.expert == 1]
    # the problem is a real test: the router routes almost every trial and its radius binds in many of them
    assert len(routed) > 0.9 * trials
    assert sum(d.radius == d.router.radius for d in routed) > 0.8 * trials
    assert soundness_p_value(failures, trials, 2 * ALPHA) >= P_FLAG, f"{failures} false of {trials}"


@pytest.mark.slow
def test_coverage_test_catches_a_certifier_that_ignores_the_routers_radius() -> None:
    """Radius R_c alone (no min with R_sigma) on the same problem: far more false certificates than alpha + beta."""
    x, router, experts, sigmas, router_sigma = coverage_problem()
    smooth = dual_smooth(router, router_sigma, experts, sigmas)
    trials = 500
    xs = x.float().unsqueeze(0).expand(trials, *SHAPE).contiguous()
    certificates = smooth.certify_batch(xs, [derive_seed(7, t) for t in range(trials)], ALPHA, ALPHA)
    unsound = [
        DualCertificate(d.prediction, d.classifier.radius, d.expert, d.sigma, d.router, d.classifier, d.alpha, d.beta)
        if d.classifier is not None and d.prediction != -1
        else d
        for d in certificates
    ]
    failures = sum(is_false(d, x, router, experts) for d in unsound)
    assert soundness_p_value(failures, trials, 2 * ALPHA) < P_FLAG, f"only {failures} false of {trials}"


def test_a_router_that_flips_near_the_input_shrinks_the_radius() -> None:
    """Router boundary 0.1 from x (confident: sigma_r 0.05), routed expert robust to 1.0, the other expert disagrees.

    G flips 0.1 from x, so the dual radius must be the router's (<= 0.1), far below the expert's own radius; the
    expert's radius alone would be a false certificate of G.
    """
    x = torch.rand(SHAPE, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    router = hyperplane_at(unit(20), x, 0.1)
    experts = [hyperplane_at(unit(21), x, -0.6), hyperplane_at(unit(22), x, 1.0)]
    smooth = DualSmooth(
        Smooth(router, 2, 0.05),
        [Smooth(e, 2, s) for e, s in zip(experts, [0.25, 0.5], strict=True)],
        certifier(100, 10_000, BATCH),
    )
    (dual,) = smooth.certify_batch(x.float().unsqueeze(0), [derive_seed(5, 0)], 0.001, 0.001)
    assert dual.expert == 1
    assert dual.prediction == 1
    assert dual.classifier is not None
    assert dual.classifier.radius > 0.9
    assert dual.radius == dual.router.radius
    assert 0.05 < dual.radius <= 0.1  # Phi^-1 of the router's bound at sigma 0.05: about 0.1 * (1 - a little)
    assert distance_to_disagreement(x, router, experts, 1) == pytest.approx(0.1, abs=FLOAT32)
    assert not is_false(dual, x, router, experts)
    expert_only = DualCertificate(1, dual.classifier.radius, 1, 0.5, dual.router, dual.classifier, 0.001, 0.001)
    assert is_false(expert_only, x, router, experts)


def test_closed_form_grader_agrees_with_sampling() -> None:
    """The grader's distance to G's disagreement set matches a brute-force search along random directions."""
    x, router, experts, _, _ = coverage_problem()
    exact = distance_to_disagreement(x, router, experts, true_class(x, router, experts))
    generator = torch.Generator().manual_seed(9)
    directions = torch.randn(20_000, *SHAPE, generator=generator, dtype=torch.float64)
    directions /= directions.flatten(1).norm(dim=1).view(-1, 1, 1, 1)
    found = math.inf
    for radius in np.linspace(0.0, 2.0, 401):
        points = x + radius * directions
        routes = (points.flatten(1) @ router.w.double() + router.b) > 0
        classes = torch.where(
            routes,
            (points.flatten(1) @ experts[1].w.double() + experts[1].b) > 0,
            (points.flatten(1) @ experts[0].w.double() + experts[0].b) > 0,
        )
        if bool((classes.long() != true_class(x, router, experts)).any()):
            found = float(radius)
            break
    assert exact <= found + 1e-9  # random directions can only find points at or beyond the exact distance
    assert found <= exact + 0.35  # and get close in 16 dimensions (grid step 0.005, 20,000 directions)


def test_expert_records_reused_are_the_certificates_recomputed() -> None:
    """The routed expert's certificate from its own certification (same seeds) equals the one computed here."""
    x, router, experts, sigmas, router_sigma = coverage_problem()
    smooth = dual_smooth(router, router_sigma, experts, sigmas)
    xs = torch.stack([x, x * 0.9, x * 0.8]).float()
    seeds = [derive_seed(0, i) for i in range(3)]
    computed = smooth.certify_batch(xs, seeds, 0.01, 0.01)
    own = {k: Smooth(experts[k], 2, sigmas[k]).certify_batch(xs, N0, N, 0.01, BATCH, seeds=seeds) for k in range(2)}
    reused = smooth.certify_batch(xs, seeds, 0.01, 0.01, expert_certificates=lambda k, pos: [own[k][i] for i in pos])
    assert [(d.prediction, d.radius, d.expert) for d in computed] == [
        (d.prediction, d.radius, d.expert) for d in reused
    ]


def test_router_abstaining_abstains_and_runs_no_expert() -> None:
    """A router at a tie (margin 0) abstains (up to beta); no expert is certified for that image."""
    x, _, experts, sigmas, _ = coverage_problem()
    router = hyperplane_at(unit(10), x, 0.0)
    calls: list[int] = []

    def certifier(smooth: Smooth, xs: torch.Tensor, seeds: list[int], alpha: float) -> list[Certificate]:
        calls.append(len(xs))
        return smooth.certify_batch(xs, N0, N, alpha, BATCH, seeds=seeds)

    smooth = DualSmooth(
        Smooth(router, 2, 0.5), [Smooth(e, 2, s) for e, s in zip(experts, sigmas, strict=True)], certifier
    )
    (dual,) = smooth.certify_batch(x.float().unsqueeze(0), [derive_seed(1, 0)], 0.001, 0.001)
    assert (dual.prediction, dual.expert, dual.radius) == (-1, -1, 0.0)
    assert calls == [1]


def test_router_and_expert_counts_must_agree() -> None:
    _x, router, experts, _, _ = coverage_problem()
    with pytest.raises(ValueError, match="3 experts"):
        DualSmooth(Smooth(router, 2, 0.5), [Smooth(e, 2, 0.5) for e in [*experts, experts[0]]], certifier(N0, N, BATCH))


# ------------------------------------------------------------------------------------------ records


def row(idx: int, radius: float = 0.4, expert: int = 1) -> CertificationRow:
    dual = combine(cert(expert, 0.9), cert(3, radius), [0.25, 0.5, 1.0], 0.001, 0.001)
    return dual_row(idx, 3, dual)


def test_record_is_rsbenchs_row_with_the_dual_columns_and_round_trips(tmp_path: Path) -> None:
    assert (*COLUMNS, *DUAL_COLUMNS) == DUAL_RECORD
    path = tmp_path / "certify.tsv"
    with RecordWriter(path, DUAL_RECORD) as writer:
        writer.append(row(0))
        writer.append(row(20, 0.123456789012345, 2))
    rows = read_rows(path)  # the one reader of every record
    assert rows == [row(0), row(20, 0.123456789012345, 2)]
    assert all(r.is_dual for r in rows)
    assert (rows[1].sigma, rows[1].count, rows[1].n) == (1.0, 900, 1000)  # the routed expert's
    assert rows[1].radius == 0.123456789012345
    assert rows[1].router_radius == 0.9
    assert rows[1].failure_probability == pytest.approx(0.002)  # a sum of two floats
    assert CertificationRow.from_line(rows[1].to_line()) == rows[1]


def test_record_resumes_after_a_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path, DUAL_RECORD) as writer:
        writer.append(row(0))
    with path.open("a") as handle:
        handle.write(row(20).to_line()[:15])  # a crash in the middle of a line
    with RecordWriter(path, DUAL_RECORD) as writer:
        writer.append(row(40))
    assert [r.idx for r in read_rows(path)] == [0, 40]


LEGACY = (
    "idx\tlabel\tpredict\tradius\tcorrect\ttime\tsigma\texpert\trouter_radius\trouter_pA_lower\trouter_n\t"
    "expert_predict\texpert_radius\texpert_pA_lower\texpert_n\talpha\tbeta\tsound\n"
    "0\t9\t9\t0.1848136773799691\t1\t7.4053\t0.5\t1\t0.1848136773799691\t0.5733124101675633\t12271\t9\t"
    "0.5008948165442189\t0.8417773973934864\t1173\t0.001\t0.001\ttrue\n"
)
"""The first row of the committed experiments/fashion_mnist_dual_rs/runs/dual_rs/certify.tsv, as written before the
one row type."""


def test_dual_records_written_before_the_one_row_type_still_read(tmp_path: Path) -> None:
    (tmp_path / "certify.tsv").write_text(LEGACY)
    (first,) = read_rows(tmp_path / "certify.tsv")
    assert first.is_dual
    assert (first.n, first.pA_lower, first.count) == (1173, 0.8417773973934864, None)  # the expert's; count not kept
    assert (first.expert, first.router_n, first.expert_radius, first.alpha, first.beta) == (
        1,
        12271,
        0.5008948165442189,
        0.001,
        0.001,
    )
    with pytest.raises(ValueError, match="without count"):
        first.to_line()
    with pytest.raises(ProtocolMismatchError), RecordWriter(tmp_path / "certify.tsv", DUAL_RECORD):
        pass  # continued only under its own header: a new run folder


def test_the_validating_reader_refuses_a_dual_radius_above_the_routers(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    write_record(path, [replace(row(0, 0.4), router_radius=0.3)])  # the dual radius 0.4 > the router's 0.3
    with pytest.raises(
        DamagedFileError, match=r"line 2 is damaged: radius 0.4 is above min\(router_radius, expert_radius\) 0.3"
    ):
        read_rows(path)


def test_one_record_holds_one_kind_of_row(tmp_path: Path) -> None:
    single = CertificationRow(1, 3, 3, 0.1, True, 0.1, 100, 100, 0.9, 0.5)
    with pytest.raises(ValueError, match="different records"):
        write_record(tmp_path / "certify.tsv", [row(0), single])
    with pytest.raises(DamagedFileError, match="image 1 is not a dual"):
        dual_rows([row(0), single])


def test_summary_states_both_failure_probabilities_and_the_chosen_sigmas() -> None:
    rows = [
        row(0, 0.4, 1),
        row(1, 0.6, 2),
        dual_row(2, 3, combine(cert(-1, 0.0), None, [0.25, 0.5, 1.0], 0.001, 0.001)),
    ]
    summary = summarize_dual(rows, sigmas=[0.25, 0.5, 1.0], router_sigma=1.0, cap=1.0)
    assert summary["failure_probability"] == pytest.approx(0.002)
    assert (summary["alpha"], summary["beta"], summary["sigma"]) == (0.001, 0.001, None)
    assert summary["chosen_sigma"] == {"0.25": 0, "0.5": 1, "1.0": 1}
    assert summary["certified_accuracy"] == {"0.0": 2 / 3, "0.25": 2 / 3, "0.5": 1 / 3, "0.75": 0.0, "1.0": 0.0}
    assert summary["router_abstain_rate"] == pytest.approx(1 / 3)
    assert summary["acr"] == pytest.approx(1.0 / 3)


def test_phi_sanity() -> None:
    """The problem's probabilities are what its docstring says (a guard against editing the margins blindly)."""
    assert norm.cdf(0.32 / 0.25) == norm.cdf(0.64 / 0.5) == pytest.approx(0.8997, abs=1e-4)
