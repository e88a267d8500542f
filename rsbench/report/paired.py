"""Each row against a baseline row certified on the same images: the difference and whether it is real.

``--baseline gaussian`` pairs every row with the row of method ``gaussian`` that has the same dataset, sigma and
settings (the method's own hyperparameters aside); ``--baseline <run folder or TSV>`` pairs every row with the row
holding that run. Rows are paired only when they certified the same images of the same dataset; otherwise the
comparison says so and computes nothing (a difference between two image subsets is not a paired difference). Rows
of different norms are never paired (their radii measure different balls); a method's baseline row also has its
noise, while ``--baseline <run>`` may pair rows of other noises in the same norm (Yang et al.'s comparison).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rsbench.report.load import ReportError
from rsbench.report.rows import Row
from rsbench.report.stats import mcnemar_test, paired_difference, seed_test
from rsbench.report.tables import radius_column


def baseline_rows(rows: Sequence[Row], baseline: str) -> dict[int, Row | str]:
    """For each row (by position) but the baseline's, its baseline row, or why it has none.

    ``baseline`` is a method among the rows (its row of the same dataset, sigma and settings) or, if no method has
    that name, a run folder or TSV among the report's inputs (the one baseline of every row).

    Raises:
        ReportError: ``baseline`` is neither a method among the rows nor a run folder or TSV among them.
    """
    methods = sorted({row.label for row in rows})
    path = Path(baseline)
    if baseline not in methods and path.exists():
        holding = [row for row in rows if any(_same_path(r.source, path) for r in row.results)]
        if not holding:
            raise ReportError(f"--baseline {baseline} is not one of the runs given to the report; pass it too")
        base = holding[0]
        return {
            i: base if row.first.norm == base.first.norm else f"{base.name} certifies {base.threat}, not {row.threat}"
            for i, row in enumerate(rows)
            if row is not base
        }
    if baseline not in methods:
        raise ReportError(
            f"--baseline {baseline!r} is neither a method among the rows ({', '.join(methods)}) nor a run folder"
        )
    pairs: dict[int, Row | str] = {}
    for i, row in enumerate(rows):
        if row.label == baseline:
            continue
        candidates = [
            other
            for other in rows
            if other.label == baseline
            and other.first.dataset == row.first.dataset
            and math.isclose(other.first.sigma, row.first.sigma)
            and _shared_settings(other) == _shared_settings(row)
            and other.threat == row.threat
        ]
        if len(candidates) == 1:
            pairs[i] = candidates[0]
        else:
            which = "no" if not candidates else f"{len(candidates)}"
            pairs[i] = f"{which} {baseline} rows with the same dataset, sigma, settings and threat model"
    return pairs


def paired_table(
    rows: Sequence[Row], pairs: dict[int, Row | str], radii: Sequence[float], confidence: float
) -> pd.DataFrame:
    """One line per row with a baseline: its settings, the paired ACR difference with its interval and tests.

    Per radius, the certified accuracy difference with McNemar's exact test; when either row has several seeds,
    the paired t test over images of the seed-averaged certified indicators instead.
    """
    lines = []
    for i, row in enumerate(rows):
        if i not in pairs:
            continue
        base = pairs[i]
        line: dict[str, Any] = {"row": i, "method": row.label, "sigma": row.first.sigma, **dict(row.settings)}
        if isinstance(base, str):
            lines.append({**line, "baseline": "-", "note": f"not paired: {base}"})
            continue
        line["baseline"] = base.name
        if row.first.dataset != base.first.dataset or row.images != base.images:
            line["note"] = (
                f"not paired: different images ({row.first.dataset} subset {row.first.protocol.get('subset')} vs "
                f"{base.first.dataset} subset {base.first.protocol.get('subset')})"
            )
            lines.append(line)
            continue
        acr = paired_difference(row.scores, base.scores, confidence)
        line.update(
            d_acr=acr.difference,
            d_acr_low=acr.low,
            d_acr_high=acr.high,
            p_acr=acr.p_value,
            p_acr_wilcoxon=acr.p_wilcoxon,
            p_acr_seeds=seed_test(row.seed_values(), base.seed_values()),
        )
        single = len(row.results) == 1 and len(base.results) == 1
        for radius in radii:
            if radius > min(row.first.cap, base.first.cap):
                continue
            if single:
                test = mcnemar_test(row.certified(radius), base.certified(radius))
                line[f"d_{radius_column(radius)}"], line[f"p_{radius_column(radius)}"] = test.difference, test.p_value
            else:
                averaged = paired_difference(row.certified(radius), base.certified(radius), confidence)
                line[f"d_{radius_column(radius)}"], line[f"p_{radius_column(radius)}"] = (
                    averaged.difference,
                    averaged.p_value,
                )
        line["test"] = "McNemar (exact)" if single else "paired t over images, seed-averaged"
        lines.append(line)
    return pd.DataFrame(lines)


def _shared_settings(row: Row) -> tuple[tuple[str, str], ...]:
    """The settings a row shares with its baseline: everything but the method and its hyperparameters."""
    return tuple((k, v) for k, v in row.settings if not k.startswith("method"))


def _same_path(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve() or a.resolve() == b.resolve().parent
