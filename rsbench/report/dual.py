"""Diagnostics of a dual randomized-smoothing run, labelled NOT certificates: what the router's certificate costs.

A dual certificate's radius is min(R_sigma, R_c): the router's radius R_sigma (the routed sigma stays the same
nearby) and the routed expert's R_c. Three numbers split the gap between dual RS and its experts:

- **R_sigma binds**: of the images dual RS classifies correctly, those where the router's radius is the smaller one.
- **routed expert alone**: the routed expert's own certificate with the router's radius left out. It is NOT a
  certificate (nothing certifies that nearby inputs get the same sigma); it is what the choice of sigma gives.
- **oracle routing**: each image sent to the expert of its largest certified radius, known after certifying every
  expert on it (the experts' own records, ``expert_records``): the most a router over these experts can reach. NOT a
  certificate either.

The same functions make ``experiments/fashion_mnist_dual_rs/compare.py``'s diagnostic columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from rsbench.certify.pipeline.records import read_records
from rsbench.report.load import Result
from rsbench.report.render import Section
from rsbench.report.rows import Row
from rsbench.report.tables import Options, radius_column

NOT_CERTIFICATES = "NOT certificates"
Certified = tuple[np.ndarray, np.ndarray]
"""Per image: (radius, whether the prediction is the label)."""


def router_binds(correct: np.ndarray, router_radius: np.ndarray, expert_radius: np.ndarray) -> int:
    """How many images dual RS classifies correctly with the router's radius below the routed expert's."""
    return int((np.asarray(correct, bool) & (np.asarray(router_radius) < np.asarray(expert_radius))).sum())


def routed_alone(expert_radius: np.ndarray, expert_predict: np.ndarray, label: np.ndarray) -> Certified:
    """The routed expert's own certificates, the router's radius left out (NOT certificates of the dual classifier)."""
    return np.asarray(expert_radius, float), np.asarray(expert_predict) == np.asarray(label)


def oracle_routing(experts: Sequence[Certified]) -> Certified:
    """Each image at the expert of its largest correct radius: certified at r where any expert is (NOT a certificate).

    >>> radii, correct = oracle_routing([(np.array([0.5, 0.1]), np.array([True, False])),
    ...                                  (np.array([0.2, 0.9]), np.array([True, False]))])
    >>> radii.tolist(), correct.tolist()
    ([0.5, 0.0], [True, False])
    """
    radii = np.stack([np.where(np.asarray(c, bool), np.asarray(r, float), -np.inf) for r, c in experts])
    best = radii.max(axis=0)
    correct = np.isfinite(best)
    return np.where(correct, best, 0.0), correct


def certified_at(certified: Certified, radius: float) -> np.ndarray:
    """Per image: certified correctly at ``radius`` or more."""
    radii, correct = certified
    return np.asarray(correct, bool) & (np.asarray(radii) >= radius)


def dual_section(rows: Sequence[Row], options: Options) -> Section | None:
    """The diagnostics of every dual row's first run (``None`` without a dual row): one line per kind of number."""
    lines = []
    for row in rows:
        result = row.first
        if result.beta is None:
            continue
        records = result.records
        label = records["label"].to_numpy()
        dual = (records["radius"].to_numpy(float), records["correct"].to_numpy(bool))
        binds = router_binds(
            dual[1], records["router_radius"].to_numpy(float), records["expert_radius"].to_numpy(float)
        )
        common = {"method": row.label, "images": len(records), "R_sigma binds": f"{binds} of {int(dual[1].sum())}"}
        lines.append({**common, "numbers": "dual RS (certificates)", **_curve(dual, options)})
        alone = routed_alone(records["expert_radius"].to_numpy(float), records["expert_predict"].to_numpy(), label)
        lines.append({**common, "numbers": f"routed expert alone ({NOT_CERTIFICATES})", **_curve(alone, options)})
        experts = _expert_records(result)
        if experts is None:
            lines.append({**common, "numbers": "oracle routing: needs the run's expert_records"})
        else:
            oracle = oracle_routing(experts)
            lines.append({**common, "numbers": f"oracle routing ({NOT_CERTIFICATES})", **_curve(oracle, options)})
    if not lines:
        return None
    table = pd.DataFrame(lines)
    caption = (
        "Dual randomized smoothing, split (the first run of each dual row): its certificates; the routed expert's own "
        "certificate with the router's radius left out and each image sent to the expert of its largest radius "
        f"(its experts' own records) are {NOT_CERTIFICATES}: they say what the router's certificate (R_sigma binds: "
        "the images dual RS classifies correctly where the router's radius is the smaller) and the choice of sigma "
        "cost. ACR and certified accuracy (%) at radius r."
    )
    return Section("dual", f"Dual RS diagnostics ({NOT_CERTIFICATES})", table, caption, table)


def _curve(certified: Certified, options: Options) -> dict[str, str]:
    """ACR and certified accuracy (%) at the report's radii, as shown."""
    radii, correct = certified
    line = {"ACR": f"{float(np.where(correct, radii, 0.0).mean()):.3f}"}
    line.update({radius_column(r): f"{100 * float(certified_at(certified, r).mean()):.1f}" for r in options.radii})
    return line


def _expert_records(result: Result) -> list[Certified] | None:
    """Each expert's (radius, correct) on the dual run's images, from its ``expert_records``; ``None`` without."""
    if not result.expert_records:
        return None
    indices = result.images
    experts = []
    for folder in result.expert_records:
        rows = read_records(Path(folder))
        if any(i not in rows for i in indices):
            return None
        experts.append(
            (np.array([rows[i].radius for i in indices]), np.array([rows[i].predict == rows[i].label for i in indices]))
        )
    return experts
