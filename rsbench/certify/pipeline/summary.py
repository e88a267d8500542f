"""``metrics.json``: ACR, certified accuracy on the radius grid, abstention rate and the exact protocol."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rsbench.certify.algorithm.caps import fixed_n_cap
from rsbench.certify.pipeline.metrics import average_certified_radius, certified_accuracy_curve, radius_grid
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.files import write_text_atomically


def summarize(
    rows: Sequence[CertificationRow],
    *,
    sigma: float,
    n0: int,
    n: int,
    alpha: float,
    radius_step: float = 0.25,
    cap: float | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``metrics.json`` content for certified ``rows`` (one per image).

    Certified accuracy is reported on the grid 0, step, ... up to the radius cap sigma * Phi^-1(alpha^(1/n)),
    beyond which no certificate can reach.

    Args:
        rows: the certified images.
        sigma: the noise level.
        n0: selection samples.
        n: estimation samples.
        alpha: the failure probability.
        radius_step: the grid step.
        cap: the largest radius the protocol can certify; sigma * Phi^-1(alpha^(1/n)) when ``None``.
        extra: more fields to record (method, dataset, arch, subset, seed, ...).
    """
    radii = [row.radius for row in rows]
    correct = [row.correct for row in rows]
    cap = fixed_n_cap(sigma, n, alpha) if cap is None else cap
    abstained = sum(row.predict == -1 for row in rows)
    summary: dict[str, Any] = {
        "acr": average_certified_radius(radii, correct),
        "certified_accuracy": certified_accuracy_curve(radii, correct, radius_grid(cap, radius_step)),
        "abstain_rate": abstained / len(rows) if rows else 0.0,
        "num_images": len(rows),
        "sigma": sigma,
        "n0": n0,
        "n": n,
        "alpha": alpha,
        "radius_cap": cap,
        "sound": all(row.sound for row in rows),
    }
    summary.update(extra or {})
    return summary


def write_metrics(summary: Mapping[str, Any], path: Path) -> None:
    """Write the summary as indented JSON, atomically (a reader never sees half a file)."""
    write_text_atomically(path, _dumps(summary) + "\n")


def _dumps(value: Any, indent: int = 0) -> str:
    """Indented JSON whose lists of numbers (the subset's indices) stay on one line."""
    pad = " " * (indent + 2)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {_dumps(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, list | tuple) and any(isinstance(v, Mapping | list | tuple) for v in value):
        items = [f"{pad}{_dumps(v, indent + 2)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(value)


def format_summary(summary: Mapping[str, Any]) -> str:
    """A short human-readable report: ACR, abstention and certified accuracy per radius (soundness first)."""
    accuracy = "  ".join(f"r={r}: {100 * a:.1f}%" for r, a in summary["certified_accuracy"].items())
    threat = f"{summary['norm']} radii, {summary['noise']} noise, " if "norm" in summary else ""
    report = (
        f"ACR {summary['acr']:.4f} over {summary['num_images']} images "
        f"({threat}sigma={summary['sigma']}, n0={summary['n0']}, n={summary['n']}, alpha={summary['alpha']}; "
        f"abstained {100 * summary['abstain_rate']:.1f}%)\ncertified accuracy: {accuracy}"
    )
    if summary.get("sound", True):
        return report
    report = f"NOT SOUND ({summary.get('soundness', 'see metrics.json')}):\n{report}"
    if "fixed_sigma" in summary:
        report += "\nsound, at fixed sigma: " + format_summary(summary["fixed_sigma"])
    return report
