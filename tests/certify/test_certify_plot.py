"""The run's plot, certified_accuracy.png: each curve's ACR in the legend, and the legend off the curves."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from rsbench.certify.pipeline.plot import Curve, certified_accuracy_figure, plot_certified_accuracy


def curves() -> list[Curve]:
    rng = np.random.default_rng(0)
    radii = rng.uniform(0.0, 0.9, 200)
    correct = rng.random(200) < 0.8
    return [
        Curve("fixed sigma=0.25 (sound)", radii.tolist(), correct.tolist()),
        Curve("data_dependent sigma (NOT sound)", (1.1 * radii).tolist(), correct.tolist(), dashed=True),
    ]


def test_each_curves_legend_gives_its_acr() -> None:
    drawn = curves()
    figure = certified_accuracy_figure(drawn, cap=0.93, title="gaussian on mnist_embedded", note="200 images")
    texts = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    plt.close(figure)
    for curve, text in zip(drawn, texts, strict=False):
        acr = float(np.mean(np.asarray(curve.radii) * np.asarray(curve.correct)))  # ACR: mean of radius x correct
        assert text == f"{curve.label}, ACR {acr:.3f}"
    assert texts[-1] == "radius cap 0.930"


def test_the_legend_sits_below_the_axes_never_over_a_curve(tmp_path: Path) -> None:
    """It sat in the upper right corner, where a curve that starts high and ends near the cap runs."""
    figure = certified_accuracy_figure(curves(), cap=0.93, title="t", note="n")
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    legend = axes.get_legend().get_window_extent(renderer)
    frame = axes.get_window_extent(renderer)
    below = axes.xaxis.get_tightbbox(renderer)
    plt.close(figure)
    assert legend.y1 <= frame.y0  # entirely under the plotting area
    assert below is not None
    assert legend.y1 <= below.y0 + 1  # and under the axis label (1 pixel of rounding)
    path = tmp_path / "certified_accuracy.png"
    plot_certified_accuracy(curves(), 0.93, path, "t", "n")
    assert path.stat().st_size > 0


@pytest.mark.parametrize("radius", [0.0, 0.5])
def test_an_acr_is_the_mean_of_radius_times_correct(radius: float) -> None:
    curve = Curve("c", [radius, radius, 0.0, 1.0], [True, False, True, True])
    assert curve.acr == pytest.approx((radius + 1.0) / 4, abs=1e-12)  # float sums of 4 terms
