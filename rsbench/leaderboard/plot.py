"""The board's figure (matplotlib, headless): certified accuracy against the radius for every entry.

The published entries that are best at some radius of the table (the envelope's) are coloured and named in the
legend with their ACR, the other entries of the Pareto front dark grey, the rest light grey; the user's runs are thick
dashed curves; the envelope (the best accuracy of any entry at each radius) is dotted black. Each curve ends at the
largest radius its entry's protocol can certify. The legend sits below the axes, so it never covers a curve, and its
labels are wrapped to the axes' width, so a long one never widens the figure and squeezes the plot. Curves of entries
with per-image records are drawn on a fine grid, the others on the 1/16 grid of their counts.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rsbench.certify.pipeline.metrics import envelope
from rsbench.leaderboard.board import Board
from rsbench.leaderboard.entries import Entry

POINTS = 400
LABEL_WIDTH = 120  # characters per legend line: at 6.5 pt about 5.5 inches, inside the 9-inch figure


def curve(entry: Entry, top: float) -> tuple[np.ndarray, np.ndarray]:
    """Radii from 0 to ``top`` (or the entry's cap, if lower) and the entry's certified accuracy (mean over runs)."""
    top = min(top, entry.cap) if not math.isinf(entry.cap) else top
    if entry.row is not None:
        grid = np.linspace(0.0, top, POINTS)
        return grid, np.array([float(np.mean(entry.row.certified(r))) for r in grid])
    first = entry.summaries[0]
    radii = np.array([r for r, _ in first.counts if r <= top])
    values = np.mean([[c / s.images for r, c in s.counts if r <= top] for s in entry.summaries], axis=0)
    return radii, values


def _wrapped(label: str) -> str:
    """A legend label broken into lines of at most :data:`LABEL_WIDTH` characters."""
    return "\n".join(textwrap.wrap(label, LABEL_WIDTH, break_long_words=True)) or label


def plot_board(board: Board, path: Path) -> Path:
    """Write the board's curves to ``path`` (PNG) and return it."""
    top = max(board.settings.radii[-1] * 1.2, 0.5)
    figure, ax = plt.subplots(figsize=(9, 6.5))
    best = set(board.envelope["entry"]) if not board.envelope.empty else set()
    highlighted = [e for e in board.entries if e.name in best and e.kind == "published"]
    for entry in board.entries:
        if entry.kind == "published" and entry.name not in best:
            grey = "0.6" if entry.name in board.pareto else "0.85"
            ax.plot(*curve(entry, top), color=grey, lw=0.6, zorder=1)
    colours = plt.get_cmap("tab10")
    for i, entry in enumerate(sorted(highlighted, key=lambda e: e.sigma)):
        grid, values = curve(entry, top)
        acr = board.numbers[entry.name].acr.value
        ax.plot(grid, values, color=colours(i % 10), lw=1.4, zorder=2, label=_wrapped(f"{entry.name}, ACR {acr:.3f}"))
    for entry in (e for e in board.entries if e.kind == "run"):
        grid, values = curve(entry, top)
        acr = board.numbers[entry.name].acr.value
        ax.plot(grid, values, lw=2.4, ls="--", zorder=3, label=_wrapped(f"{entry.name} (run), ACR {acr:.3f}"))
    fine = np.linspace(0.0, top, POINTS)
    top_curve = envelope([np.interp(fine, *curve(e, top), right=0.0) for e in board.entries])[0]
    ax.plot(fine, top_curve, color="black", lw=1.0, ls=":", zorder=4, label="envelope (best of any entry)")
    ax.set_xlim(0, top)
    ax.set_ylim(0, 1)
    ax.set_xlabel("l2 radius")
    ax.set_ylabel("certified accuracy")
    ax.grid(alpha=0.3)
    ax.set_title(
        f"{board.dataset}: {len(board.entries)} entries; coloured: best at a radius of the table; "
        "dark grey: on the Pareto front; light grey: the others",
        fontsize=9,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=6.5, ncol=1, frameon=False)
    figure.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(figure)
    return path
