"""The attack's table: empirical robust accuracy beside certified accuracy, per radius, with their uncertainty.

For each row whose runs were attacked (``attack=smoothadv``: ``attack.tsv`` beside ``certify.tsv``), on the attacked
images and at the attack's radii: the empirical robust accuracy (PREDICT returned the label at every attacked
radius up to r), the certified accuracy of the same images, and their gap, the room a better certificate (or a
stronger attack) could still close. Each cell reads ``mean ± sd over seeds [interval over images]``: a Clopper-Pearson
interval for the accuracies, the paired t interval over images of the seed-averaged per-image difference for the
gap. Per row, the images where the attack flipped a prediction inside its certified radius (summed over seeds, with
the most a sound certifier gives on average) and the attack's cost as a multiple of certification's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from rsbench.report.load import Result
from rsbench.report.render import Section
from rsbench.report.rows import Row
from rsbench.report.stats import paired_difference, proportion_interval
from rsbench.report.tables import Options, sigma_text

THREAT_KEYS = ("noise", "certify.noise", "certify.norm")  # shown by the threat column


def attack_section(rows: Sequence[Row], keys: Sequence[str], options: Options) -> Section | None:
    """The section, or None when no row was attacked (every seed of a row must have been, on the same images)."""
    lines = []
    for row in rows:
        results = row.results
        summaries = [r.attack for r in results if r.attack is not None and r.attack_records is not None]
        if len(summaries) < len(results):
            continue
        images = _attacked(results[0])
        if any(_attacked(r) != images for r in results[1:]):
            continue
        radii = [float(radius) for radius in summaries[0]["radii"]]
        contradictions = sum(int(summary["contradictions"]) for summary in summaries)
        allowed = sum(float(summary["contradictions_expected_at_most"]) for summary in summaries)
        ratios = [float(summary["cost_ratio"]) for summary in summaries if summary.get("cost_ratio") is not None]
        cost = float(np.mean(ratios)) if ratios else math.nan
        for radius in radii:
            empirical = np.array([_robust(r, images, radius) for r in results], dtype=float)
            certified = np.array([_certified(r, images, radius) for r in results], dtype=float)
            gap = paired_difference(empirical.mean(axis=0), certified.mean(axis=0), options.confidence)
            lines.append(
                {
                    "method": row.label,
                    "sigma": sigma_text(row.first.sigma),
                    "threat": row.threat,
                    **{key: value for key, value in row.settings if key in keys and key not in THREAT_KEYS},
                    "images": len(images),
                    "r": f"{radius:g}",
                    "empirical": _accuracy(empirical, options),
                    "certified": _accuracy(certified, options),
                    "gap": f"{100 * gap.difference:+.1f} [{100 * gap.low:+.1f}, {100 * gap.high:+.1f}]",
                    "flipped within R": f"{contradictions} (<= {allowed:.2f} expected)",
                    "cost (x certification)": f"{cost:.2f}",
                }
            )
    if not lines:
        return None
    table = pd.DataFrame(lines)
    first = next(r.attack for row in rows for r in row.results if r.attack is not None)
    level = f"{100 * options.confidence:g}%"
    caption = (
        f"{first.get('name', 'attack')} (Salman et al. 2019: PGD on the soft smoothed classifier, T = "
        f"{first.get('num_steps')}, m = {first.get('num_noise')}; PREDICT n = {first.get('n')}, alpha = "
        f"{first.get('alpha')}) on the first attacked images of each row. empirical: PREDICT returned the label at "
        "every attacked radius up to r (up to PREDICT's errors, an upper bound on robust accuracy); certified: the "
        "same images' certified accuracy (a lower bound); gap: their difference in points. Cells: mean ± sd over "
        "seeds [a, b]: "
        f"{level} interval over images (Clopper-Pearson; the gap: paired t). flipped within R: images whose "
        "prediction the attack changed inside the certified radius, summed over seeds, beside the most a sound "
        "certifier gives on average; cost: attack time over certification time of the same images."
    )
    return Section("attack", "Empirical robust accuracy beside certified accuracy", table, caption, table)


def _attacked(result: Result) -> tuple[int, ...]:
    assert result.attack_records is not None
    return tuple(sorted(set(int(i) for i in result.attack_records["idx"])))


def _robust(result: Result, images: tuple[int, ...], radius: float) -> list[bool]:
    """Per attacked image: PREDICT returned the label at every attacked radius up to ``radius``."""
    assert result.attack_records is not None
    records = result.attack_records
    out = []
    for idx in images:
        own = records[(records["idx"] == idx) & (records["radius"] <= radius + 1e-12)]
        out.append(bool(len(own)) and bool(own["correct"].all()) and float(own["radius"].max()) >= radius - 1e-12)
    return out


def _certified(result: Result, images: tuple[int, ...], radius: float) -> list[bool]:
    """Per attacked image: certified correctly at ``radius`` or more."""
    records = result.records.set_index("idx")
    return [bool(records.at[idx, "correct"]) and float(records.at[idx, "radius"]) >= radius for idx in images]


def _accuracy(per_seed: np.ndarray, options: Options) -> str:
    """``mean ± sd [interval]`` in % from a seeds x images array of indicators."""
    values = per_seed.mean(axis=1)
    interval = proportion_interval(
        float(per_seed.mean(axis=0).sum()), per_seed.shape[1], options.confidence, options.ci_method
    )
    sd = f" ± {100 * float(np.std(values, ddof=1)):.1f}" if len(values) > 1 else ""
    return f"{100 * float(values.mean()):.1f}{sd} [{100 * interval.low:.1f}, {100 * interval.high:.1f}]"
