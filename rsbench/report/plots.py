"""The report's figures (matplotlib, headless): curves with interval bands, the envelope over sigma, pA bounds.

- ``curves.png``: certified accuracy against the radius, one panel per dataset and sigma, one line per row (the mean
  over seeds) with its pointwise binomial interval over the images as a band.
- ``envelope.png``: per setting, the best certified accuracy over its sigmas at each radius (Cohen et al. 2019,
  Fig. 7; Salman et al. 2019), with the sigma curves it is made of drawn thin (each named in the legend).

Legends sit below their panel, so they never cover a curve.
- ``pa_lower.png``: per row, the distribution of the lower confidence bounds pA_lower of the correctly classified
  images (misclassified and abstained images listed in the legend): Sun et al. (2025) ask papers to show it beside
  ACR, because ACR is dominated by easy images (pA near 1).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from statsmodels.stats.proportion import proportion_confint

from rsbench.certify.pipeline.metrics import envelope
from rsbench.report.rows import Row
from rsbench.report.tables import Options

GRID_POINTS = 300


def write_figures(rows: Sequence[Row], options: Options, out: Path) -> list[Path]:
    """Write the figures for ``rows`` into ``out``; return the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [plot_curves(rows, options, out / "curves.png"), plot_pa_lower(rows, out / "pa_lower.png")]
    envelope = plot_envelope(rows, out / "envelope.png")
    return written + ([envelope] if envelope else [])


def curve(row: Row, grid: np.ndarray) -> np.ndarray:
    """The row's certified accuracy (mean over seeds) at each radius of ``grid``."""
    return np.array([np.mean(row.certified(r)) for r in grid])


def plot_curves(rows: Sequence[Row], options: Options, path: Path) -> Path:
    """Certified accuracy curves with pointwise binomial interval bands, one panel per dataset and sigma."""
    panels = _panels(rows, lambda row: (row.first.dataset, row.first.sigma))
    figure, axes = _figure(len(panels))
    for ax, ((dataset, sigma), members) in zip(axes, panels.items(), strict=False):
        top = _grid_end(members)
        grid = np.linspace(0.0, top, GRID_POINTS)
        for row in members:
            accuracy = curve(row, grid)
            low, high = proportion_confint(
                accuracy * len(row.images), len(row.images), alpha=1 - options.confidence, method=options.ci_method
            )
            (line,) = ax.plot(grid, accuracy, lw=1.5, ls="-" if row.first.sound else "--", label=curve_legend(row))
            ax.fill_between(grid, low, high, color=line.get_color(), alpha=0.15, lw=0)
        ax.set(title=f"{dataset}, sigma={sigma:g}", xlabel="l2 radius", ylabel="certified accuracy", ylim=(0, 1))
        _finish(ax)
    return _save(figure, path)


def plot_envelope(rows: Sequence[Row], path: Path) -> Path | None:
    """The envelope over sigma of each setting run at several sigmas; None when there is none."""
    settings = _panels(rows, lambda row: (row.first.dataset, row.label, row.settings))
    settings = {key: members for key, members in settings.items() if len({r.first.sigma for r in members}) > 1}
    if not settings:
        return None
    datasets = _panels([members[0] for members in settings.values()], lambda row: row.first.dataset)
    figure, axes = _figure(len(datasets))
    for ax, dataset in zip(axes, datasets, strict=False):
        for (name, _, _), members in settings.items():
            if name != dataset:
                continue
            grid = np.linspace(0.0, _grid_end(members), GRID_POINTS)
            curves = np.array([curve(row, grid) for row in members])
            (line,) = ax.plot(grid, envelope(curves)[0], lw=2, label=f"{curve_legend(members[0])}: envelope")
            for row, values in zip(members, curves, strict=True):
                ax.plot(grid, values, lw=0.6, alpha=0.4, color=line.get_color(), label=f"  sigma={row.first.sigma:g}")
        ax.set(title=f"{dataset}: envelope over sigma", xlabel="l2 radius", ylabel="certified accuracy", ylim=(0, 1))
        _finish(ax)
    return _save(figure, path)


def plot_pa_lower(rows: Sequence[Row], path: Path) -> Path:
    """Histograms of pA_lower over the correctly classified images, one panel per dataset and sigma."""
    panels = _panels(rows, lambda row: (row.first.dataset, row.first.sigma))
    figure, axes = _figure(len(panels))
    bins = list(np.linspace(0.5, 1.0, 26))
    for ax, ((dataset, sigma), members) in zip(axes, panels.items(), strict=False):
        for row in members:
            bounds, wrong = [], 0
            for result in row.results:
                records = result.records
                correct = records["correct"].to_numpy(bool)
                bounds.append(records["pA_lower"].to_numpy(float)[correct])
                wrong += int(np.sum(~correct))
            values = np.concatenate(bounds)
            values = values[~np.isnan(values)]
            share = wrong / sum(len(r.records) for r in row.results)
            ax.hist(values, bins=bins, histtype="step", lw=1.5, label=f"{curve_legend(row)} ({100 * share:.1f}% wrong)")
        ax.set(title=f"{dataset}, sigma={sigma:g}", xlabel="pA_lower (correct images)", ylabel="images", yscale="log")
        _finish(ax)
    return _save(figure, path)


def _panels(rows: Sequence[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    grouped: dict[Hashable, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[key(row)].append(row)
    return dict(grouped)


def _grid_end(members: Sequence[Row]) -> float:
    caps = [row.first.cap for row in members if np.isfinite(row.first.cap)]
    largest = max((float(np.max(r.records["radius"])) for row in members for r in row.results), default=1.0)
    return 1.05 * (max(caps) if caps else max(largest, 1e-3))


def curve_legend(row: Row) -> str:
    """A row's name in a figure: its label, the settings it sets (not those only other rows set), its seed count."""
    parts = [row.label] + [f"{k}={v}" for k, v in row.stated_settings]
    if len(row.results) > 1:
        parts.append(f"{len(row.results)} seeds")
    return " ".join(parts)


def _figure(panels: int) -> tuple[plt.Figure, list[plt.Axes]]:
    columns = min(panels, 3)
    rows = -(-panels // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4 * rows), squeeze=False)
    flat = list(axes.ravel())
    for ax in flat[panels:]:
        ax.set_visible(False)
    return figure, flat[:panels]


def _finish(ax: plt.Axes) -> None:
    """Grid lines, and the legend below the panel, where it covers no curve."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2, frameon=False)


def _save(figure: plt.Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120, bbox_inches="tight")  # the legends below the panels are kept
    plt.close(figure)
    return path
