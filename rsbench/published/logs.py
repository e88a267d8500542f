"""What a released log's rows say: its numbers, its images as a rule, the alpha it is consistent with, its wall clock.

Read by the importer (:mod:`rsbench.published.importer`) when it indexes a log and by the leaderboard when it
describes a user's run the same way (:func:`subset_rule`, :func:`seconds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rsbench.certify.algorithm.caps import fixed_n_cap
from rsbench.runs.datasets import find_dataset

GRID = [k / 16 for k in range(65)]  # radii of summary.csv's counts: 0, 1/16, ..., 4
ALPHAS = (0.01, 0.05, 0.1)  # what else a log's largest radius may be consistent with, tried in order


@dataclass(frozen=True)
class Card:
    """A repository's card in ``sources.yaml`` (the fields the importer needs)."""

    name: str
    repository: str
    commit: str
    licence: str
    n0: int
    n: int
    alpha: float


def subset_rule(indices: Sequence[int], dataset: str, split: str = "test", size: int | None = None) -> str:
    """The images a log certified, as a rule a reader can check (``size``: the test set's, else its config's).

    >>> subset_rule(range(0, 10000, 20), "cifar10")
    'every 20th test image (500)'
    >>> subset_rule(range(0, 42700, 100), "imagenet")
    'every 100th validation image, the first 427 of 500 (stopped early)'
    >>> subset_rule(range(10000), "mnist")
    'all 10,000 test images'
    """
    kind = "validation" if dataset == "imagenet" and split == "test" else ("training" if split == "train" else "test")
    info = find_dataset(dataset)
    size = size or (info.test_size if split == "test" and info is not None else None)
    idx = list(indices)
    step = idx[1] - idx[0] if len(idx) > 1 else 1
    if idx and idx[0] == 0 and idx == list(range(0, step * len(idx), step)):
        if step == 1 and size == len(idx):
            return f"all {len(idx):,} {kind} images"
        whole = -(-size // step) if size else None
        every = f"every {step}{_ordinal(step)} {kind} image"
        if whole is None or whole == len(idx):
            return f"{every} ({len(idx):,})"
        return f"{every}, the first {len(idx):,} of {whole:,} (stopped early)"
    return f"{len(idx):,} {kind} images (idx {idx[0]} to {idx[-1]})"


def _ordinal(number: int) -> str:
    return {1: "st", 2: "nd", 3: "rd"}.get(number % 10 if number % 100 not in (11, 12, 13) else 0, "th")


def consistent_alpha(largest: float, sigma: float, card: Card) -> tuple[float, str]:
    """The alpha a log is consistent with: the documented one unless its largest radius exceeds that alpha's cap.

    CERTIFY's radius is at most sigma * Phi^-1(alpha^(1/n)); a radius above the cap of the documented alpha (allowing
    for 3-significant-digit rounding, 0.5%) means the log was certified at a larger alpha. Returns the alpha and a note
    ("" when it is the documented one).
    """
    for alpha in (card.alpha, *ALPHAS):
        if largest <= fixed_n_cap(sigma, card.n, alpha) * 1.005:
            if alpha == card.alpha:
                return alpha, ""
            return alpha, (
                f"largest radius {largest:g} exceeds the alpha = {card.alpha:g} cap "
                f"({fixed_n_cap(sigma, card.n, card.alpha):.3f}): consistent with alpha = {alpha:g}"
            )
    return card.alpha, f"largest radius {largest:g} exceeds every cap at n = {card.n:,}"


def seconds(times: pd.Series) -> np.ndarray:
    """The ``time`` column in seconds (``0:00:01.5`` or a number of seconds)."""
    if pd.api.types.is_numeric_dtype(times):
        return times.to_numpy(dtype=float)
    return pd.to_timedelta(times).dt.total_seconds().to_numpy()


def summary(frame: pd.DataFrame) -> dict[str, Any]:
    """A log's numbers: images, correct, abstained, ACR and the sd of the scores, and counts on the 1/16 grid."""
    correct = frame["correct"].to_numpy(bool)
    radius = frame["radius"].to_numpy(float)
    scores = np.where(correct, radius, 0.0)
    line: dict[str, Any] = {
        "images": len(frame),
        "correct": int(correct.sum()),
        "abstained": int((frame["predict"] < 0).sum()),
        "acr": f"{scores.mean():.6f}",
        "acr_sd": f"{scores.std(ddof=1):.6f}" if len(scores) > 1 else "",
        "largest_radius": f"{radius.max():g}",
    }
    for r in GRID:
        line[f"n@{r:g}"] = int((correct & (radius >= r)).sum())
    return line
