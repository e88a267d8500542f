"""Replay benchmark: what sequential CERTIFY saves on the models the field published, from their released logs.

    python -m rsbench.bench.replay                      # every log rsbench ships (44 logs, ~10,000 images each)
    python -m rsbench.bench.replay path/to/noise_0.25.tsv ... [--n 100000 --alpha 0.001]   # Cohen-format logs
    python -m rsbench.bench.replay --radius-target      # Horváth et al.'s setting: one radius per run

For every log, each image's base classifier is replaced by a Bernoulli oracle whose vote probability reproduces the
log's certificate (:mod:`rsbench.bench.oracle` says how, and how images at the cap and abstained images are
modelled). On that oracle, with the same selection draw and the same vote sequence (one simulated path of
estimation votes per image, read by every design at its own looks), the benchmark runs fixed-n CERTIFY (n0 = 100,
n = 100,000, alpha = 0.001, as the authors) and each sequential design of :mod:`rsbench.certify.algorithm.designs`
through :func:`~rsbench.certify.algorithm.designs.run_design`, the loop the pipeline runs on real networks, and reports
per log:

- samples per image (n0 + estimation samples): mean, median, and fixed n's mean over it;
- certified accuracy at every radius of the table (the grid 0, 0.25, ... up to fixed n's cap) and ACR, as
  differences against fixed n in points (paired over images, with 95% normal intervals); the worst radius is shown;
- false certificates: certificates above the oracle's true radius sigma * Phi^-1(pA), as a share of the images,
  with its one-sided 95% Clopper-Pearson upper bound; soundness means the share is at most alpha in expectation;
- the floor: fixed n's mean over a lower bound (Wald's inequality, :func:`floor_samples`) on the samples any sound
  test at level alpha needs to certify each radius of each image as often as fixed n does; images whose vote
  probability sits near a radius's boundary cost close to n whatever the design.

Votes are binomial increments between the looks, vectorised over images, so the replay of every shipped log takes
minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta, binom, norm

from rsbench.bench.oracle import Assumptions, Oracle, build_oracle, count_for_bound, selection_votes
from rsbench.certify.algorithm.caps import TABLE_LARGEST, table_radii
from rsbench.certify.algorithm.confidence import cp_lower
from rsbench.certify.algorithm.designs import Decisions, Design, Goal, make_design, run_design
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.runs.floor import CommandParser

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Candidate:
    """A design to replay: its label in the table, its registered name, its parameters and its sample budget.

    ``max_samples`` caps the estimation samples an image may take (``None``: fixed n's n, as in the pipeline).
    """

    label: str
    design: str
    parameters: dict[str, Any] = field(default_factory=dict)
    max_samples: int | None = None


DEFAULT_CANDIDATES = (
    Candidate("looks", "looks"),
    Candidate("betting", "betting"),
    Candidate("informed", "informed"),
)


@dataclass(frozen=True)
class LogSpec:
    """One log to replay: its name, columns and protocol."""

    name: str
    label: np.ndarray
    predict: np.ndarray
    radius: np.ndarray
    sigma: float
    n0: int
    n: int
    alpha: float


@dataclass(frozen=True)
class Outcome:
    """One design's replay of one log.

    Attributes:
        log: the log's name; design: the candidate's label; promise: what the design decides.
        samples: per-image samples (n0 + estimation).
        accuracy: certified accuracy at each table radius (fraction); delta / delta_half: its difference to fixed n
            and the half-width of its 95% interval (fractions).
        acr, acr_delta, acr_half: ACR, its difference to fixed n and the interval's half-width.
        false: false certificates (count); images: how many images.
        floor: the floor's mean samples per image (n0 + :func:`floor_samples`).
        floor_within: the same for a design that may lose 0.5 points at each radius (n0 + :func:`floor_within`).
    """

    log: str
    design: str
    promise: str
    samples: np.ndarray
    radii: tuple[float, ...]
    accuracy: np.ndarray
    delta: np.ndarray
    delta_half: np.ndarray
    acr: float
    acr_delta: float
    acr_half: float
    false: int
    images: int
    floor: float
    floor_within: float = math.nan

    @property
    def mean_samples(self) -> float:
        """Mean samples per image."""
        return float(self.samples.mean())

    def worst(self) -> int:
        """The index of the radius where the design loses most certified accuracy against fixed n."""
        return int(np.argmin(self.delta))

    def false_upper(self) -> float:
        """One-sided 95% Clopper-Pearson upper bound on the false-certificate rate."""
        k, n = self.false, self.images
        return 1.0 if k == n else float(beta.isf(0.05, k + 1, n - k))


class VotePath:
    """One simulated sequence of estimation votes per image, read at any sample count up to its length.

    The cumulative count at each point of ``grid`` is drawn once, as binomial increments with the image's vote
    probability, so every design (and fixed n) reads the same votes at the sample counts it looks at.
    """

    def __init__(self, probability: np.ndarray, grid: Iterable[int], rng: np.random.Generator) -> None:
        self.grid = np.array(sorted(set(grid)), dtype=np.int64)
        steps = np.diff(self.grid, prepend=0)
        increments = rng.binomial(steps[None, :], np.clip(probability, 0.0, 1.0)[:, None])
        self.counts = np.cumsum(increments, axis=1)
        self.column = {int(g): i for i, g in enumerate(self.grid)}

    def at(self, samples: int, images: np.ndarray | slice = slice(None)) -> np.ndarray:
        """The cumulative votes of ``images`` after ``samples`` estimation samples (a point of the grid)."""
        return self.counts[images, self.column[samples]]


def fixed_n(oracle: Oracle, path: VotePath) -> Decisions:
    """Cohen et al.'s CERTIFY with n estimation samples on the path."""
    counts = path.at(oracle.n)
    lower = cp_lower(counts, oracle.n, oracle.alpha)
    certified = lower >= 0.5
    with np.errstate(divide="ignore"):
        radius = np.where(certified, oracle.sigma * norm.ppf(np.where(certified, lower, 0.5)), 0.0)
    return Decisions(lower, certified, radius, np.full(len(counts), oracle.n), counts)


def floor_samples(oracle: Oracle, radii: Sequence[float]) -> np.ndarray:
    """Per image, a lower bound on the expected estimation samples of any sound design that matches fixed n.

    Fixed n certifies radius r_j of an image whose vote probability is p with probability
    c_j = P(Beta^-1(alpha; K, n - K + 1) >= p_j), K ~ Bin(n, p), p_j = Phi(r_j / sigma). A sequential test that
    certifies pA > p_j at level alpha (probability <= alpha when pA = p_j) with probability c_j when pA = p needs, by
    Wald's inequality for sequential tests, E_p[N] >= (c ln(c / alpha) + (1 - c) ln((1 - c) / (1 - alpha))) /
    KL(p || p_j) samples. The floor is the largest of these over the table's radii: ln(1/alpha) / -ln p_j for an
    image whose every vote is right, and close to n for an image whose p sits near a boundary. It bounds what any
    design must pay to certify every image at every radius as often as fixed n does, knowing each image's p (a test
    that must learn p pays more); a design that may lose up to 0.5 points of certified accuracy at each radius is
    bounded by :func:`floor_within`, which is lower.
    """
    votes, _ = _floor_terms(oracle, radii)
    return np.ceil(votes.max(axis=1))


def _floor_terms(oracle: Oracle, radii: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """[images, radii]: Wald's bound on the samples that certify each radius as often as fixed n, and that power."""
    p = np.clip(oracle.p_selected, 0.0, 1.0)[:, None]
    targets = np.maximum(0.5, norm.cdf(np.asarray(radii) / oracle.sigma))[None, :]
    n, alpha = oracle.n, oracle.alpha
    needed = np.array([_count_needed(t, n, alpha) for t in targets[0]])[None, :]
    power = binom.sf(needed - 1, n, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        evidence = power * np.log(power / alpha) + (1 - power) * np.log((1 - power) / (1 - alpha))
        evidence = np.where(power >= 1.0, np.log(1 / alpha), np.where(power <= alpha, 0.0, evidence))
        divergence = np.where(p >= 1.0, -np.log(targets), p * np.log(p / targets)) + np.where(
            p < 1.0, (1 - p) * np.log((1 - p) / (1 - targets)), 0.0
        )
        votes = np.where((p > targets) & (evidence > 0), evidence / divergence, 0.0)
    return votes, np.where(votes > 0, power, 0.0)


def floor_within(oracle: Oracle, radii: Sequence[float], points: float = 0.5) -> np.ndarray:
    """Per image, samples of an allocation that stays within ``points`` of fixed n's certified accuracy at each radius.

    Certified accuracy counts correct images only, so an image whose selected class is wrong needs no sample; each
    correct image pays :func:`floor_samples`'s bound over the radii it keeps. Greedily, the move that saves the most
    samples per point of expected accuracy given up (dropping an image's costliest radius and every radius above it,
    whose certificates imply it) is taken while every radius stays within ``points`` (in expectation) of fixed n.
    The best allocation needs no more than this one, so the floor of a design that may lose ``points`` at each
    radius is at most its mean: that floor's saving over fixed n is at least fixed n's mean over it.
    """
    votes, power = _floor_terms(oracle, radii)
    votes = np.where(oracle.correct[:, None], votes, 0.0)
    budget = np.full(len(radii), points / 100 * len(oracle))
    kept = np.full(votes.shape, True)
    for _ in range(len(radii)):
        cost = np.where(kept, votes, 0.0)
        top = cost.argmax(axis=1)
        rows = np.arange(len(votes))
        above = np.arange(len(radii))[None, :] >= top[:, None]
        rest = np.where(above, 0.0, cost).max(axis=1)
        saving = cost[rows, top] - rest
        price = np.where(above & kept, power, 0.0)
        order = np.argsort(-(saving / np.maximum(price[rows, top], 1e-12)))
        moved = False
        for i in order:
            if saving[i] <= 0:
                break
            if np.all(price[i] <= budget):
                budget -= price[i]
                kept[i] &= ~above[i]
                moved = True
        if not moved:
            break
    return np.ceil(np.where(kept, votes, 0.0).max(axis=1))


def _count_needed(target: float, n: int, alpha: float) -> int:
    """The fewest of n votes whose Clopper-Pearson bound at alpha reaches ``target`` (n + 1: none does)."""
    count = math.ceil(float(count_for_bound(np.array(target), n, alpha)[()]) - 1e-6)
    while count <= n and float(cp_lower(np.array(count), n, alpha)[()]) < target:
        count += 1
    return count


def certified_at(decisions: Decisions, correct: np.ndarray, radii: Sequence[float]) -> np.ndarray:
    """[images, radii]: correct and certified with radius >= r."""
    return (correct & decisions.certified)[:, None] & (decisions.radius[:, None] >= np.asarray(radii)[None, :])


def paired(difference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of per-image differences and the half-width of its 95% normal interval (along axis 0)."""
    count = difference.shape[0]
    return difference.mean(axis=0), Z95 * difference.std(axis=0, ddof=1) / math.sqrt(count)


def evaluate(
    spec: LogSpec,
    oracle: Oracle,
    path: VotePath,
    design: Design,
    label: str,
    radii: Sequence[float],
    selection: np.ndarray | None = None,
    floors: tuple[float, float] | None = None,
) -> tuple[Decisions, Outcome]:
    """Run ``design`` on the path and compare it with fixed n on the same images and votes.

    ``selection``: each image's selection votes for its selected class (of n0), which ``informed`` reads;
    ``floors``: the log's floors (:func:`floors_of`), computed here when not given.
    """
    floors = floors or floors_of(oracle, radii)
    reference = fixed_n(oracle, path)
    chosen = (selection, oracle.n0) if selection is not None else None
    decisions = run_design(design, len(oracle), lambda samples, running: path.at(samples, running), chosen)
    hits, base = certified_at(decisions, oracle.correct, radii), certified_at(reference, oracle.correct, radii)
    delta, delta_half = paired(hits.astype(float) - base.astype(float))
    scores = np.where(oracle.correct & decisions.certified, decisions.radius, 0.0)
    base_scores = np.where(oracle.correct & reference.certified, reference.radius, 0.0)
    acr_delta, acr_half = paired((scores - base_scores)[:, None])
    versus = (delta, delta_half, float(acr_delta[0]), float(acr_half[0]))
    return decisions, _outcome(spec, oracle, label, design.promise, decisions, radii, floors, versus)


def replay(
    spec: LogSpec,
    candidates: Sequence[Candidate],
    *,
    assumptions: Assumptions | None = None,
    seed: int = 0,
    key: int = 0,
    radius_target: float | None = None,
    largest: float | None = TABLE_LARGEST,
) -> tuple[list[Outcome], dict[str, Decisions]]:
    """Replay one log: fixed n and every candidate on one oracle and one vote path (see the module docstring).

    Args:
        spec: the log.
        candidates: the designs.
        assumptions: how the oracle models images at the cap and abstained images.
        seed: the replay's seed.
        key: the log's position; the random stream is derived from (seed, key), so logs are independent.
        radius_target: decide this one radius (every design gets it as its only target) instead of the table.
        largest: the table's largest radius (``None``: every radius of the grid up to fixed n's cap).

    Returns:
        The outcomes (fixed n first, then the candidates in order) and each candidate's decisions per image.
    """
    rng = np.random.default_rng(derive_seed(seed, key))
    assumptions = assumptions or Assumptions()
    columns = {f.name: getattr(spec, f.name) for f in fields(spec) if f.name != "name"}  # the log's columns, protocol
    oracle = build_oracle(**columns, assumptions=assumptions, rng=rng)
    radii = (
        (radius_target,) if radius_target is not None else table_radii(spec.sigma, spec.n, spec.alpha, largest=largest)
    )
    designs = [
        (c.label, make_design(c.design, Goal(spec.sigma, spec.alpha, c.max_samples or spec.n, radii), **c.parameters))
        for c in candidates
    ]
    grid = {spec.n, *(look for _, design in designs for look in design.looks())}
    path = VotePath(oracle.p_selected, grid, rng)
    selection = selection_votes(oracle, np.random.default_rng(derive_seed(seed, key, 1)))  # (its own stream)
    floors = floors_of(oracle, radii)
    outcomes = [_fixed_outcome(spec, oracle, path, radii, "fixed n", floors)]
    decisions = {}
    for label, design in designs:
        decisions[label], outcome = evaluate(spec, oracle, path, design, label, radii, selection, floors)
        outcomes.append(outcome)
    return outcomes, decisions


def floors_of(oracle: Oracle, radii: Sequence[float]) -> tuple[float, float]:
    """The mean samples (n0 included) of :func:`floor_samples` and of :func:`floor_within`."""
    return float(oracle.n0 + floor_samples(oracle, radii).mean()), float(oracle.n0 + floor_within(oracle, radii).mean())


def _fixed_outcome(
    spec: LogSpec, oracle: Oracle, path: VotePath, radii: Sequence[float], label: str, floors: tuple[float, float]
) -> Outcome:
    reference = fixed_n(oracle, path)
    zeros = np.zeros(len(radii))
    promise = f"Cohen et al.'s CERTIFY, n = {oracle.n:,}"
    return _outcome(spec, oracle, label, promise, reference, radii, floors, (zeros, zeros, 0.0, 0.0))


def _outcome(
    spec: LogSpec,
    oracle: Oracle,
    label: str,
    promise: str,
    decisions: Decisions,
    radii: Sequence[float],
    floors: tuple[float, float],
    versus: tuple[np.ndarray, np.ndarray, float, float],
) -> Outcome:
    """The outcome of ``decisions`` on the log.

    ``versus``: the differences to fixed n (accuracy and its half-width per radius, ACR and its half-width).
    """
    hits = certified_at(decisions, oracle.correct, radii)
    scores = np.where(oracle.correct & decisions.certified, decisions.radius, 0.0)
    false = decisions.certified & (decisions.radius > oracle.true_radius())
    delta, delta_half, acr_delta, acr_half = versus
    return Outcome(
        log=spec.name,
        design=label,
        promise=promise,
        samples=oracle.n0 + decisions.samples,
        radii=tuple(radii),
        accuracy=hits.mean(axis=0),
        delta=delta,
        delta_half=delta_half,
        acr=float(scores.mean()),
        acr_delta=acr_delta,
        acr_half=acr_half,
        false=int(false.sum()),
        images=len(oracle),
        floor=floors[0],
        floor_within=floors[1],
    )


def shipped_logs(match: str | None = None) -> list[LogSpec]:
    """The released logs rsbench ships (:func:`~rsbench.published.catalogue.released_logs`) named with ``match``."""
    from rsbench.published.catalogue import released_logs

    specs = []
    for log in released_logs():
        name = f"{log.dataset} {log.method}{' ' + log.variant if log.variant else ''} s={log.sigma:g}"
        if match is None or match in name:
            specs.append(_spec(name, log.read().records, log.sigma, log.n0, log.n, log.alpha))
    return specs


def logs_from_paths(paths: Sequence[Path], n0: int, n: int, alpha: float) -> list[LogSpec]:
    """Cohen-format logs given on the command line (sigma from the path, e.g. ``noise_0.25``)."""
    from rsbench.report.load import read_cohen_tsv

    specs = []
    for path in paths:
        result = read_cohen_tsv(path, n=n, alpha=alpha)
        specs.append(_spec(f"{path}", result.records, result.sigma, n0, n, alpha))
    return specs


def _spec(name: str, records: Any, sigma: float, n0: int, n: int, alpha: float) -> LogSpec:
    return LogSpec(
        name=name,
        label=records["label"].to_numpy(),
        predict=records["predict"].to_numpy(),
        radius=records["radius"].to_numpy(dtype=np.float64),
        sigma=float(sigma),
        n0=int(n0),
        n=int(n),
        alpha=float(alpha),
    )


def subsample(spec: LogSpec, images: int | None, seed: int) -> LogSpec:
    """A random subset of ``images`` of the log's images (all of them when ``None``)."""
    if images is None or images >= len(spec.label):
        return spec
    keep = np.sort(np.random.default_rng(seed).choice(len(spec.label), images, replace=False))
    return LogSpec(
        spec.name, spec.label[keep], spec.predict[keep], spec.radius[keep], spec.sigma, spec.n0, spec.n, spec.alpha
    )


GOAL_FLOOR = 0.6  # issue 41: at least 0.6 of the floor's saving (about 8x at the median over the shipped logs) ...
GOAL_POINTS = 0.5  # ... with certified accuracy within 0.5 points of fixed n at every radius, by the 95% interval


def floor_share(outcome: Outcome) -> float:
    """The design's saving over the floor's: the floor's mean samples over the design's (1: the floor itself)."""
    return outcome.floor / outcome.mean_samples


def meets_goal(outcome: Outcome) -> tuple[bool, bool]:
    """(at least 0.6 of the floor's saving, every certified-accuracy difference within 0.5 points by its interval)."""
    within = np.all(100 * np.abs(outcome.delta) + 100 * outcome.delta_half <= GOAL_POINTS)
    return floor_share(outcome) >= GOAL_FLOOR, bool(within)


HEADER = (
    f"{'log':<34} {'design':<9} {'mean':>7} {'median':>7} {'fewer':>6} {'floor':>6} {'share':>5} {'within':>6}  "
    f"{'worst d.acc, points [95% CI]':<30} {'d.ACR [95% CI]':<25} {'false (95% UCB)':<17} goal"
)


def format_outcomes(outcomes: Sequence[Outcome]) -> str:
    """One line per design: samples, saving, the floor's, its share, worst accuracy difference, ACR, false share.

    ``floor``: fixed n's mean over the floor's; ``share``: the design's saving over the floor's; ``within``: fixed n's
    mean over :func:`floor_within`'s (a design allowed 0.5 points). ``goal`` is ``x`` for at least 0.6 of the floor
    and ``a`` for certified accuracy within 0.5 points at every radius by the 95% interval.
    """
    fixed = outcomes[0]
    lines = []
    for o in outcomes:
        w = int(np.argmax(np.abs(o.delta) + o.delta_half))
        low, high = 100 * (o.delta[w] - o.delta_half[w]), 100 * (o.delta[w] + o.delta_half[w])
        saving, accurate = meets_goal(o)
        mark = ("x" if saving else "-") + ("a" if accurate else "-")
        lines.append(
            f"{o.log:<34} {o.design:<9} {o.mean_samples:>7,.0f} {np.median(o.samples):>7,.0f} "
            f"{fixed.mean_samples / o.mean_samples:>5.1f}x {fixed.mean_samples / o.floor:>5.1f}x "
            f"{floor_share(o):>5.2f} {fixed.mean_samples / o.floor_within:>5.1f}x  "
            f"{100 * o.delta[w]:>+5.2f} [{low:+.2f}, {high:+.2f}] at {o.radii[w]:<5g} "
            f"{o.acr_delta:>+.3f} [{o.acr_delta - o.acr_half:+.3f}, {o.acr_delta + o.acr_half:+.3f}]  "
            f"{o.false:>2} ({o.false_upper():.4f})    {mark}"
        )
    return "\n".join(lines)


def format_detail(outcomes: Sequence[Outcome], decisions: dict[str, Decisions], n: int) -> str:
    """Per radius: certified accuracy and its difference; per design: where the samples go."""
    fixed = outcomes[0]
    lines = ["  radius      " + " ".join(f"{r:>7g}" for r in fixed.radii)]
    lines.append(f"  {fixed.design:<11} " + " ".join(f"{100 * a:>7.2f}" for a in fixed.accuracy))
    for o in outcomes[1:]:
        lines.append(f"  {o.design:<11} " + " ".join(f"{100 * d:>+7.2f}" for d in o.delta))
    for o in outcomes[1:]:
        samples = o.samples.astype(float)
        full = decisions[o.design].samples >= n
        deciles = ", ".join(f"{np.percentile(samples, q):,.0f}" for q in (10, 25, 50, 75, 90, 99))
        lines.append(
            f"  {o.design}: samples at the 10/25/50/75/90/99th percentiles {deciles}; {100 * full.mean():.1f}% of "
            f"the images draw all n = {n:,} and take {100 * samples[full].sum() / samples.sum():.0f}% of the samples"
        )
    return "\n".join(lines)


def summary(results: Sequence[Sequence[Outcome]]) -> str:
    """Per design over the logs: the saving and its share of the floor's (median, range), and the goal's two halves."""
    lines = []
    names = [o.design for o in results[0][1:]]
    for index, name in enumerate(names, start=1):
        savings = np.array([r[0].mean_samples / r[index].mean_samples for r in results])
        shares = np.array([floor_share(r[index]) for r in results])
        goals = np.array([meets_goal(r[index]) for r in results])
        worst = min(100 * float((r[index].delta - r[index].delta_half).min()) for r in results)
        false = max(r[index].false / r[index].images for r in results)
        lines.append(
            f"{name}: {np.median(savings):.1f}x fewer samples (median over {len(results)} logs; {savings.min():.1f}x "
            f"to {savings.max():.1f}x), {np.median(shares):.2f} of the floor's saving (median; {shares.min():.2f} to "
            f"{shares.max():.2f}); >= {GOAL_FLOOR:g} of the floor on {goals[:, 0].sum()} logs, certified accuracy "
            f"within {GOAL_POINTS:g} points at every radius by the 95% interval on {goals[:, 1].sum()}, both on "
            f"{goals.all(axis=1).sum()}; lowest interval end {worst:+.2f} points; largest false-certificate share "
            f"{false:.4f}"
        )
    floors = np.array([r[0].mean_samples / r[0].floor for r in results])
    within = np.array([r[0].mean_samples / r[0].floor_within for r in results])
    lines.append(
        f"floor (Wald: any sound test that certifies every image at every radius as often as fixed n, knowing each "
        f"image's pA): {np.median(floors):.1f}x (median; {floors.min():.1f}x to {floors.max():.1f}x); 0.6 of it: "
        f"{0.6 * np.median(floors):.1f}x"
    )
    lines.append(
        f"floor within 0.5 points (the same for a test that may lose 0.5 points of certified accuracy at each radius, "
        f"an upper bound on its samples): at least {np.median(within):.1f}x (median; {within.min():.1f}x to "
        f"{within.max():.1f}x)"
    )
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    """The command line of ``python -m rsbench.bench.replay``."""
    parser = CommandParser("python -m rsbench.bench.replay", description=__doc__)
    parser.add_argument("logs", nargs="*", type=Path, help="Cohen-format certify TSVs (default: every shipped log)")
    parser.add_argument("--n0", type=int, default=100, help="selection samples of the given logs")
    parser.add_argument("--n", type=int, default=100_000, help="estimation samples of the given logs")
    parser.add_argument("--alpha", type=float, default=0.001, help="failure probability of the given logs")
    parser.add_argument(
        "--designs", nargs="+", default=None, help="default: looks betting informed (+ adaptive for a target)"
    )
    parser.add_argument("--cap", choices=["posterior", "one"], default="posterior", help="pA of images at the cap")
    parser.add_argument("--abstained", default="uniform", help="pA of abstained images: uniform, or a probability")
    parser.add_argument("--largest", type=float, default=TABLE_LARGEST, help="the table's largest radius")
    parser.add_argument("--full-grid", action="store_true", help="every radius up to fixed n's cap instead")
    parser.add_argument("--radius-target", type=float, default=None, help="decide this one radius only")
    parser.add_argument("--images", type=int, default=None, help="replay a random subset of each log's images")
    parser.add_argument("--match", default=None, help="only logs whose name contains this text")
    parser.add_argument("--detail", action="store_true", help="per-radius differences and where the samples go")
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Replay every log (the shipped ones, or the paths given): one line per log and design, then a summary."""
    parser = _parser()
    args = parser.parse_args(argv)
    abstained = args.abstained if args.abstained == "uniform" else float(args.abstained)
    assumptions = Assumptions(cap=args.cap, abstained=abstained)
    if args.logs:
        specs = [s for s in logs_from_paths(args.logs, args.n0, args.n, args.alpha) if (args.match or "") in s.name]
    else:
        specs = shipped_logs(args.match)
    names = args.designs or (
        ["looks", "betting", "informed"] + (["adaptive"] if args.radius_target is not None else [])
    )
    candidates = [Candidate(name, name) for name in names]
    largest = None if args.full_grid else args.largest
    start = time.perf_counter()
    what = f"the radius {args.radius_target:g}" if args.radius_target is not None else "every radius of the table"
    print(
        f"Replay of {len(specs)} logs, {what}; oracle {assumptions.label()}, seed {args.seed}. Samples per image "
        f"(n0 + estimation); fewer: fixed n's mean over the design's; floor: over the fewest any sound test needs; "
        f"differences against fixed n on the same images and votes (points of certified accuracy, ACR) with 95% "
        f"intervals; false: certificates above the oracle's true radius (alpha = {specs[0].alpha if specs else '?'})"
    )
    print(HEADER)
    results = []
    for key, spec in enumerate(specs):
        spec = subsample(spec, args.images, args.seed)
        outcomes, decisions = replay(
            spec,
            candidates,
            assumptions=assumptions,
            seed=args.seed,
            key=key,
            radius_target=args.radius_target,
            largest=largest,
        )
        results.append(outcomes)
        print(format_outcomes(outcomes))
        if args.detail:
            print(format_detail(outcomes, decisions, spec.n))
        sys.stdout.flush()
    if results:
        print(summary(results))
    print(f"{len(specs)} logs in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
