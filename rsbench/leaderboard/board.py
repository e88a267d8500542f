"""A leaderboard's numbers: each entry's ACR and certified accuracy with intervals, its pairs, the envelope, the front.

For each entry (:mod:`rsbench.leaderboard.entries`):

- ACR (the mean of correct x radius over the images; several runs: the mean over runs) with its t interval over the
  images (or the BCa bootstrap, ``acr_interval=bootstrap``), and certified accuracy at each radius with its
  Clopper-Pearson interval (``rsbench.report.stats``; several runs: the interval of one run with the mean count, and
  the sd over runs beside it). Without per-image records, the same t interval from the mean and sd of the scores that
  ``summary.csv`` keeps (several runs: with their mean sd, wider than the records' interval over the run-averaged
  scores), and the Clopper-Pearson interval from the counts.
- Paired, on the images two entries share (``rsbench.published.pairing.pair_rows``, as ``--against-released``): the
  difference of ACR with its paired t interval over the images, and per radius the difference of certified accuracy
  with McNemar's exact p (paired t over images of the run-averaged indicators when an entry has several runs). Every
  entry is paired with the best entry of its sigma (the highest ACR among the published entries with per-image
  records trained on the dataset's own training set) and with a Gaussian entry of its sigma and architecture (same
  source first); every user run with every published entry whose images it shares.
- The order of a sigma's table (:func:`paired_order`): best ACR first, except that an entry certified on a strict
  subset of another's images is placed by the paired comparison on those images (below the last entry that has at
  least its ACR there), so a 500-image run never ranks above an entry that matches it on its own images.
- The envelope: at each radius the best certified accuracy of any entry (any sigma) that can certify that radius
  (its protocol's cap, :func:`rsbench.certify.algorithm.caps.fixed_n_cap`), which entry it is and which entries tie with
  it.
- The Pareto front over the radii: the entries no other entry matches or beats at every radius of the board and beats
  at one (Sun et al. 2025: one ACR hides the trade-off between radii). Point estimates; entries certified on
  different images are compared as published, which the intervals qualify.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rsbench.certify.pipeline import metrics
from rsbench.leaderboard.entries import Entry
from rsbench.published.pairing import pair_rows, restricted
from rsbench.report.stats import Estimate, MeanInterval, proportion_interval
from rsbench.report.tables import radius_column, sigma_text

STANDARD_RADII = {
    "cifar10": tuple(k / 4 for k in range(11)),  # 0 to 2.5: CAT-RS Table 1, SmoothMix Table 1
    "mnist": tuple(k / 4 for k in range(11)),  # 0 to 2.5: SmoothMix Table 2, Consistency Table 1
    "fashion_mnist": tuple(k / 4 for k in range(11)),
    "imagenet": tuple(k / 2 for k in range(7)),  # 0 to 3.0: Cohen et al. Table 1, Salman et al. Table 1
}
OTHER_RADII = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Settings:
    """The radii and how uncertainty is computed."""

    radii: tuple[float, ...]
    confidence: float = 0.95
    ci_method: str = "beta"  # statsmodels proportion_confint; beta = Clopper-Pearson
    acr_interval: MeanInterval = "t"


@dataclass(frozen=True)
class Numbers:
    """An entry's ACR and certified accuracies with intervals (accuracies as fractions; nan: unknown radius)."""

    acr: Estimate
    acr_runs: tuple[float, ...]
    accuracy: dict[float, Estimate]
    accuracy_sd: dict[float, float]

    @property
    def acr_sd(self) -> float:
        """The sd of ACR over runs (nan for one run)."""
        return float(np.std(self.acr_runs, ddof=1)) if len(self.acr_runs) > 1 else math.nan


@dataclass
class Board:
    """One dataset and threat model: its entries, their numbers, pairs, envelope and Pareto front."""

    dataset: str
    threat: str
    settings: Settings
    entries: list[Entry]
    numbers: dict[str, Numbers]
    leader: dict[float, str] = field(default_factory=dict)
    versus_leader: dict[str, dict[str, Any]] = field(default_factory=dict)
    versus_gaussian: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs_against_field: list[dict[str, Any]] = field(default_factory=list)
    envelope: pd.DataFrame = field(default_factory=pd.DataFrame)
    pareto: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _positions: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def sigmas(self) -> list[float]:
        """The sigmas of the board's entries, ascending."""
        return sorted({e.sigma for e in self.entries})

    def ranked(self, sigma: float) -> list[Entry]:
        """The entries certified at ``sigma`` in the order of their table (:func:`paired_order`)."""
        members = [e for e in self.entries if math.isclose(e.sigma, sigma)]
        return paired_order(members, self.numbers)

    def position(self, name: str) -> str:
        """Where an entry's row is: ``σ = 0.25 #3`` (its sigma's table and rank there)."""
        if not self._positions:
            for sigma in self.sigmas:
                for rank, entry in enumerate(self.ranked(sigma), start=1):
                    self._positions[entry.name] = f"σ = {sigma_text(sigma)} #{rank}"
        return self._positions[name]


TIE = 1e-9  # certified accuracies are ratios of counts (steps of 1/images >= 1e-4): equal within this are a tie


def paired_order(entries: Sequence[Entry], numbers: dict[str, Numbers]) -> list[Entry]:
    """``entries`` best ACR first, an entry on a strict subset of another's images placed by the paired comparison.

    Such an entry (a 500-image run beside 10,000-image releases) goes right below the last entry that ranks above it:
    an entry whose images hold its own and whose ACR on them is at least its own (the paired comparison, the images'
    difficulty cancelled), or any other entry with at least its ACR. Entries on the same images keep their ACR order,
    which is their paired comparison; entries on images neither holds are compared as published.
    """
    order = sorted(entries, key=lambda e: -numbers[e.name].acr.value)
    nested = [
        e for e in order if e.row is not None and any(o.row is not None and e.index_set < o.index_set for o in order)
    ]
    for entry in sorted(nested, key=lambda e: -len(e.index_set)):
        order.remove(entry)
        above = [i for i, other in enumerate(order) if _ranks_above(other, entry, numbers)]
        order.insert(above[-1] + 1 if above else 0, entry)
    return order


def _ranks_above(other: Entry, entry: Entry, numbers: dict[str, Numbers]) -> bool:
    """Whether ``other`` goes above ``entry``: on ``entry``'s images when ``other`` holds them, else by ACR."""
    if other.row is not None and entry.row is not None and entry.index_set < other.index_set:
        theirs = float(np.mean(restricted(other.row, entry.row.images).scores))
        return theirs >= float(np.mean(entry.row.scores)) - TIE
    return numbers[other.name].acr.value >= numbers[entry.name].acr.value


def numbers(entry: Entry, settings: Settings) -> Numbers:
    """The entry's ACR and certified accuracy at ``settings.radii``, with intervals over the images."""
    if entry.row is not None:
        row = entry.row
        acr = row.acr(settings.confidence, settings.acr_interval)
        runs = tuple(float(v) for v in row.seed_values())
        accuracy = {r: row.accuracy(r, settings.confidence, settings.ci_method) for r in settings.radii}
        spread = {r: row.seed_sd(r) for r in settings.radii}
        return Numbers(acr, runs, accuracy, spread)
    summaries = entry.summaries
    images = summaries[0].images
    runs = tuple(s.acr for s in summaries)
    mean, sd = float(np.mean(runs)), float(np.mean([s.acr_sd for s in summaries]))
    se = sd / math.sqrt(images)
    half = float(stats.t.ppf((1 + settings.confidence) / 2, images - 1)) * se
    acr = Estimate(mean, max(mean - half, 0.0), mean + half, se)
    accuracy, spread = {}, {}
    for r in settings.radii:
        counts = [s.certified(r) for s in summaries]
        if any(c is None for c in counts):
            accuracy[r], spread[r] = Estimate(math.nan, math.nan, math.nan), math.nan
            continue
        known = [float(c) for c in counts if c is not None]
        accuracy[r] = proportion_interval(float(np.mean(known)), images, settings.confidence, settings.ci_method)
        spread[r] = float(np.std(np.array(known) / images, ddof=1)) if len(known) > 1 else math.nan
    return Numbers(acr, runs, accuracy, spread)


def pair(a: Entry, b: Entry, settings: Settings) -> dict[str, Any] | None:
    """``a`` against ``b`` on the images both certified; None when either lacks records or they share no image.

    Keys: ``images`` (shared), ``d_acr``, ``d_acr_low``, ``d_acr_high``, ``p_acr`` (paired t), and per radius
    ``d_acc@r`` and ``p_acc@r`` (McNemar's exact test; paired t of run-averaged indicators with several runs), and
    ``test``.
    """
    if a.row is None or b.row is None:
        return None
    paired = pair_rows(a.row, b.row, settings.radii, settings.confidence, b.index_set)
    if paired is None:
        return None
    kept = {k: v for k, v in paired.line.items() if k.startswith(("d_", "p_")) or k == "test"}
    return {"images": len(paired.images), **kept}


def build(entries: Sequence[Entry], dataset: str, threat: str, settings: Settings, notes: Sequence[str] = ()) -> Board:
    """The board of ``entries`` (all of one dataset and threat model)."""
    board = Board(dataset, threat, settings, list(entries), {e.name: numbers(e, settings) for e in entries})
    board.notes = list(notes)
    published = [e for e in entries if e.kind == "published"]
    for sigma in board.sigmas:
        candidates = [e for e in published if math.isclose(e.sigma, sigma) and e.row is not None and not e.training]
        if candidates:
            board.leader[sigma] = max(candidates, key=lambda e: board.numbers[e.name].acr.value).name
    by_name = {e.name: e for e in entries}
    for entry in entries:
        leader = board.leader.get(entry.sigma)
        if leader and leader != entry.name:
            compared = pair(entry, by_name[leader], settings)
            if compared:
                board.versus_leader[entry.name] = {"against": leader, **compared}
        gaussian = _gaussian_for(entry, published)
        if gaussian is not None:
            compared = pair(entry, gaussian, settings)
            if compared:
                board.versus_gaussian[entry.name] = {"against": gaussian.name, **compared}
    for run in (e for e in entries if e.kind == "run"):
        for other in published:
            compared = pair(run, other, settings)
            if compared:
                board.runs_against_field.append(
                    {"run": run.name, "against": other.name, "sigma": other.sigma, **compared}
                )
    board.envelope = envelope(board)
    board.pareto = pareto_front(board)
    return board


def _gaussian_for(entry: Entry, published: Sequence[Entry]) -> Entry | None:
    """The Gaussian entry an entry is compared with: same sigma (trained and certified) and architecture, records.

    Among those, one of the entry's own source first, then the one sharing most of its images; None for a Gaussian
    entry of the same source (it is the baseline) or when none shares an image.
    """
    if entry.row is None:
        return None
    mine = entry.index_set
    candidates = [
        g
        for g in published
        if g.method == "gaussian"
        and g is not entry
        and g.row is not None
        and math.isclose(g.sigma, entry.sigma)
        and math.isclose(g.trained_sigma, g.sigma)
        and g.arch == entry.arch
        and not g.training
        and not mine.isdisjoint(g.index_set)
    ]
    if entry.method == "gaussian" and any(g.source == entry.source for g in candidates):
        return None
    if not candidates:
        return None
    return max(candidates, key=lambda g: (g.source == entry.source, len(mine & g.index_set)))


def envelope(board: Board) -> pd.DataFrame:
    """Per radius: the best certified accuracy over the entries that can certify it, its interval, entry and ties.

    An entry takes part at the radii up to its protocol's cap (beyond it its accuracy is 0 by construction, not a
    result); a radius no entry can certify has no line. Entries within :data:`TIE` of the best tie with it: the one
    with the most images (the narrowest interval), then the highest ACR, is named, the others are in ``tied``.
    """
    lines = []
    radii = board.settings.radii
    curves = np.array([[_capped(board, e, r) for r in radii] for e in board.entries]).reshape(-1, len(radii))
    tops = metrics.envelope(curves)[0] if board.entries else np.full(len(radii), math.nan)
    for column, (r, top) in enumerate(zip(radii, tops, strict=True)):
        if math.isnan(top):
            continue
        takes_part = ~np.isnan(curves[:, column])
        known = [
            (e, board.numbers[e.name].accuracy[r]) for e, part in zip(board.entries, takes_part, strict=True) if part
        ]
        tied = [(e, a) for e, a in known if a.value >= top - TIE]
        tied.sort(key=lambda pair: (-pair[0].images, -board.numbers[pair[0].name].acr.value))
        best, estimate = tied[0]
        lines.append(
            {
                "radius": r,
                "accuracy": estimate.value,
                "low": estimate.low,
                "high": estimate.high,
                "entry": best.name,
                "sigma": best.sigma,
                "kind": best.kind,
                "row": board.position(best.name),
                "tied": "; ".join(e.name for e, _ in tied[1:]),
                "tied_rows": "; ".join(board.position(e.name) for e, _ in tied[1:]),
            }
        )
    return pd.DataFrame(lines)


def _capped(board: Board, entry: Entry, radius: float) -> float:
    """The entry's certified accuracy at ``radius``; NaN beyond its protocol's cap (0 there by construction)."""
    return board.numbers[entry.name].accuracy[radius].value if radius <= entry.cap * (1 + 1e-9) else math.nan


def pareto_front(board: Board) -> list[str]:
    """The entries not dominated over the board's radii (all radii known), in the board's order.

    ``a`` dominates ``b`` when its certified accuracy is at least ``b``'s at every radius and higher at one.
    """
    radii = board.settings.radii
    vectors = {
        e.name: np.array([board.numbers[e.name].accuracy[r].value for r in radii])
        for e in board.entries
        if not any(math.isnan(board.numbers[e.name].accuracy[r].value) for r in radii)
    }
    front = []
    for name, vector in vectors.items():
        dominated = any(np.all(other >= vector) and np.any(other > vector) for o, other in vectors.items() if o != name)
        if not dominated:
            front.append(name)
    return front


def column(radius: float) -> str:
    """The CSV column of certified accuracy at ``radius`` (``acc@0.5``)."""
    return radius_column(radius)
