"""Build a results table from run directories: ``python -m rsbench.table multirun/2026-... [more dirs]``.

Every ``metrics.json`` found under the given paths becomes one row: method, dataset, arch, sigma, the protocol
(n, alpha, images), ACR and certified accuracy at the requested radii, printed as a Markdown table. Rows whose
certificates are not sound are marked, so they cannot be mistaken for certificates; a run certified with a
per-input sigma also gets a row for the sound fixed-sigma certificate it reports beside it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def find_metrics(paths: Iterable[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every ``metrics.json`` under ``paths`` (files or directories), with its content, sorted by path."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        found += [path] if path.is_file() else sorted(path.rglob("metrics.json"))
    return [(p, json.loads(p.read_text())) for p in found]


def markdown_table(rows: Sequence[tuple[Path, dict[str, Any]]], radii: Sequence[float]) -> str:
    """A Markdown table: one line per run, certified accuracy in % at ``radii`` ("-" beyond the radius cap)."""
    header = ["method", "dataset", "arch", "sigma", "n", "alpha", "images", "samples/img", "ACR"]
    header += [*(f"r={r:g}" for r in radii), "run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for path, m in _with_fixed_sigma_rows(rows):
        accuracy = m.get("certified_accuracy", {})
        mode = " (sequential)" if m.get("mode") == "sequential" else ""
        cells = [
            m.get("method", "?") + mode + _label(m),
            m.get("dataset", "?"),
            m.get("arch", "?"),
            f"{m['sigma']:g}",
            f"{m['n']:,}",
            f"{m['alpha']:g}",
            str(m["num_images"]),
            f"{m.get('mean_samples', m['n']):,.0f}",
            f"{m['acr']:.3f}",
        ]
        cells += [f"{100 * accuracy[repr(float(r))]:.1f}" if repr(float(r)) in accuracy else "-" for r in radii]
        cells.append(str(path.parent))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _with_fixed_sigma_rows(rows: Sequence[tuple[Path, dict[str, Any]]]) -> list[tuple[Path, dict[str, Any]]]:
    """The runs, each data-dependent one preceded by its sound fixed-sigma certificate (``fixed_sigma``)."""
    expanded = []
    for path, metrics in rows:
        if "fixed_sigma" in metrics:
            meta = {k: metrics[k] for k in ("method", "dataset", "arch") if k in metrics}
            expanded.append((path, {**metrics["fixed_sigma"], **meta, "_label": " (fixed sigma, sound)"}))
        expanded.append((path, metrics))
    return expanded


def _label(metrics: dict[str, Any]) -> str:
    if "_label" in metrics:
        return str(metrics["_label"])
    if metrics.get("sound", True):
        return ""
    mode = metrics.get("sigma_mode")
    return " (not sound)" if mode in (None, "fixed") else f" ({mode} sigma, not sound)"


def main(argv: list[str] | None = None) -> None:
    """Print the table of the runs under the given paths."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="run or sweep directories, or metrics.json files")
    parser.add_argument("--radii", nargs="+", type=float, default=[0.0, 0.25, 0.5, 0.75, 1.0])
    args = parser.parse_args(argv)
    rows = find_metrics(args.paths)
    if not rows:
        parser.error(f"no metrics.json under {[str(p) for p in args.paths]}")
    print(markdown_table(rows, args.radii))


if __name__ == "__main__":
    main()
