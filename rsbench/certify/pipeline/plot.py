"""``certified_accuracy.png``: certified accuracy as a function of the l2 radius (matplotlib, headless Agg).

Each curve's legend entry gives its ACR; the legend sits beside the axes, never over a curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from rsbench.certify.pipeline.metrics import average_certified_radius, certified_accuracy


def accuracy_curve(
    radii: Sequence[float], correct: Sequence[bool], cap: float, points: int = 200
) -> tuple[np.ndarray, np.ndarray]:
    """Certified accuracy on ``points`` radii from 0 to 1.05 x cap (so the drop at the cap shows)."""
    grid = np.linspace(0.0, 1.05 * cap, points)
    return grid, np.array([certified_accuracy(radii, correct, r) for r in grid])


@dataclass(frozen=True)
class Curve:
    """One certified-accuracy curve: its legend label, each image's radius and correctness."""

    label: str
    radii: Sequence[float]
    correct: Sequence[bool]
    dashed: bool = False

    @property
    def acr(self) -> float:
        """The curve's average certified radius (the area under it: the mean of radius x correct)."""
        return average_certified_radius(self.radii, self.correct)

    @property
    def legend(self) -> str:
        """``<label>, ACR <acr to 3 decimals>``: what the legend shows for the curve."""
        return f"{self.label}, ACR {self.acr:.3f}"


def plot_certified_accuracy(curves: Sequence[Curve], cap: float, path: Path, title: str, note: str = "") -> None:
    """Save the certified-accuracy curves to ``path`` (:func:`certified_accuracy_figure`)."""
    figure = certified_accuracy_figure(curves, cap, title, note)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


def certified_accuracy_figure(curves: Sequence[Curve], cap: float, title: str, note: str = "") -> Figure:
    """The certified-accuracy curves, with the radius cap as a dotted vertical line and the legend below the axes.

    Args:
        curves: the curves to draw (the sound certificate first; unsound ones dashed and labelled so); the legend
            gives each one's ACR.
        cap: the largest radius any curve can reach (sigma * Phi^-1(alpha^(1/n)) for fixed-sigma CERTIFY).
        title: the figure title (method, dataset, sigma).
        note: a second line under the title (protocol, soundness label).
    """
    figure, axes = plt.subplots(figsize=(6, 4.6))
    for curve in curves:
        grid, accuracy = accuracy_curve(curve.radii, curve.correct, cap)
        axes.plot(grid, accuracy, lw=2, ls="--" if curve.dashed else "-", label=curve.legend)
    axes.axvline(cap, ls=":", color="grey", lw=1, label=f"radius cap {cap:.3f}")
    axes.set(xlabel="l2 radius (pixel units in [0,1])", ylabel="certified accuracy", ylim=(0, 1), xlim=(0, 1.05 * cap))
    axes.set_title(title + (f"\n{note}" if note else ""), fontsize=10)
    axes.grid(alpha=0.3)
    # Below the axes (outside them), so that no curve is covered whatever its shape.
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)
    figure.tight_layout()
    return figure
