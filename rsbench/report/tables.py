"""The report's tables as pandas DataFrames: numbers for CSV, formatted cells for Markdown, LaTeX and W&B.

``results_frame`` holds every number (means, intervals, seed sd, the runs); ``display_frame`` is the paper table:
one line per setting, the columns that differ between lines, and each value with its uncertainty:

- ``0.739 [0.731, 0.747]``: the value over all certified images with its 95% interval over the images;
- ``0.739 ± 0.012 [...]``: several seeds: their mean, the sample sd over seeds, then the interval over images of
  the seed average;
- ``-``: a radius beyond what the protocol can certify (sigma * Phi^-1(alpha^(1/n))).

The ``cost`` column is what the row's runs cost together (:mod:`rsbench.report.cost`): GPU-hours on a GPU, core-hours
(seconds x threads) on a CPU, training and certification; ``*`` marks a figure without training time.

Columns that are the same on every line (dataset, n, alpha, a common override such as ``experiment=mnist_study``)
move into the caption.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rsbench.report.cost import total_cost
from rsbench.report.rows import Row
from rsbench.report.stats import MeanInterval


@dataclass(frozen=True)
class Options:
    """How the report computes and shows uncertainty."""

    radii: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    confidence: float = 0.95
    ci_method: str = "beta"  # statsmodels proportion_confint method; beta = Clopper-Pearson
    acr_interval: MeanInterval = "t"


CI_NAMES = {"beta": "Clopper-Pearson", "wilson": "Wilson", "agresti_coull": "Agresti-Coull", "normal": "Wald"}


def radius_column(radius: float) -> str:
    """The column of certified accuracy at ``radius`` (``acc@0.5``)."""
    return f"acc@{radius:g}"


def results_frame(rows: Sequence[Row], options: Options) -> pd.DataFrame:
    """Every number of the table, one line per row (accuracies as fractions; nan beyond a row's radius cap)."""
    lines = []
    for row in rows:
        first = row.first
        acr = row.acr(options.confidence, options.acr_interval)
        line: dict[str, Any] = {
            "label": row.label,
            "method": first.method,
            "variant": first.variant,
            "sound": first.sound,
            "dataset": first.dataset,
            "arch": first.arch,
            "device": "; ".join(sorted({r.device or "?" for r in row.results})),  # "?": a run that did not record it
            "sigma": first.sigma,
            "norm": first.norm,
            "noise": first.noise,
            **{key: value for key, value in row.settings},
            "seeds": len(row.results),
            "seed_list": " ".join("?" if s is None else str(s) for s in row.seeds),
            "images": len(row.images),
            "subset": first.protocol.get("subset"),
            "n0": first.protocol.get("n0"),
            "n": first.protocol.get("n"),
            "alpha": first.protocol.get("alpha"),
            "beta": first.protocol.get("beta"),
            "mode": first.protocol.get("mode"),
            "network": first.protocol.get("network", "fp32"),
            "samples_per_image": first.mean_samples,
            "radius_cap": first.cap,
            "acr": acr.value,
            "acr_se": acr.se,
            "acr_low": acr.low,
            "acr_high": acr.high,
            "acr_sd_seeds": row.seed_sd(),
        }
        for radius in options.radii:
            column = radius_column(radius)
            if radius > first.cap:
                line.update({column: math.nan, f"{column}_low": math.nan, f"{column}_high": math.nan})
                continue
            accuracy = row.accuracy(radius, options.confidence, options.ci_method)
            line.update(
                {
                    column: accuracy.value,
                    f"{column}_low": accuracy.low,
                    f"{column}_high": accuracy.high,
                    f"{column}_sd_seeds": row.seed_sd(radius),
                }
            )
        cost = total_cost(r.cost for r in row.results)
        line["gpu_hours"] = cost.gpu_hours if cost is not None else math.nan
        line["core_hours"] = cost.core_hours if cost is not None else math.nan
        line["cost"] = cost.text() if cost is not None else "?"
        line["rounded_radii"] = any(r.rounded_radii for r in row.results)
        line["runs"] = ";".join(str(r.source) for r in row.results)
        lines.append(line)
    return pd.DataFrame(lines)


NETWORK_KEYS = frozenset({"certify.precision", "certify.channels_last", "certify.compile"})
"""The overrides that the ``network`` column summarises (``fp32+channels-last``, ...)."""


def display_frame(
    frame: pd.DataFrame, keys: Sequence[str], options: Options, common: Mapping[str, str] | None = None
) -> tuple[pd.DataFrame, str]:
    """The paper table (formatted cells) and its caption (the constant columns and what the numbers mean).

    Args:
        frame: the numbers (``results_frame``).
        keys: the override keys that differ between rows (a column each).
        options: radii and interval settings.
        common: override keys with one value for every row, named in the caption.
    """
    shown: dict[str, list[str]] = {"method": list(frame["label"]), "sigma": [sigma_text(s) for s in frame["sigma"]]}
    describes_network = bool((frame["network"] != "fp32").any())  # then `network` says it: not its overrides again
    keys = [key for key in keys if not (describes_network and key in NETWORK_KEYS)]
    common = {k: v for k, v in (common or {}).items() if not (describes_network and k in NETWORK_KEYS)}
    constant: list[str] = []
    for name, values in _described_columns(frame, keys, describes_network).items():
        if len(set(values)) > 1:
            shown[name] = values
        elif values and values[0] not in ("?", "nan", "None"):
            constant.append(f"{name}={values[0]}")
    constant += [f"{key}={value}" for key, value in common.items()]
    several_seeds = bool((frame["seeds"] > 1).any())
    if several_seeds or len(set(frame["seeds"])) > 1:
        shown["seeds"] = [str(k) for k in frame["seeds"]]
    costs = [str(v) for v in frame.get("cost", pd.Series(["?"] * len(frame)))]
    if any(cost != "?" for cost in costs):
        shown["cost"] = costs
    cells = [_estimate_cells_of(frame, i, options.radii) for i in range(len(frame))]
    for name in cells[0] if cells else ["ACR", *(f"r={radius:g}" for radius in options.radii)]:
        shown[name] = [line[name] for line in cells]
    caption = _caption(options, several_seeds, "cost" in shown, constant)
    if frame["rounded_radii"].any():
        caption += " Some rows were read from TSVs with 3-significant-digit radii (Cohen's format)."
    return pd.DataFrame(shown), caption


def _described_columns(frame: pd.DataFrame, keys: Sequence[str], describes_network: bool) -> dict[str, list[str]]:
    """The columns shown where they differ between rows (else named in the caption), as cells."""
    optional = {
        "norm": [str(v) for v in frame["norm"]],
        "noise": [str(v) for v in frame["noise"]],
        "dataset": [str(v) for v in frame["dataset"]],
        "arch": [str(v) for v in frame["arch"]],
        "device": [str(v) for v in frame["device"]],
        **{key: [str(v) for v in frame[key]] for key in keys},
        "images": [_count(v) for v in frame["images"]],
        "n": [_count(v) for v in frame["n"]],
        _alpha_column(frame): [_alpha_text(a, b) for a, b in zip(frame["alpha"], frame["beta"], strict=True)],
    }
    if describes_network:  # a network evaluated otherwise is another classifier: say how
        optional["network"] = [str(v) for v in frame["network"]]
    if (frame["mode"] == "sequential").any():  # sequential CERTIFY draws fewer samples than n; show how many
        optional["samples/img"] = [_count(v) for v in frame["samples_per_image"].fillna(frame["n"])]
    return optional


def _estimate_cells_of(frame: pd.DataFrame, i: int, radii: Sequence[float]) -> dict[str, str]:
    """Line ``i`` of ``results_frame``'s ACR and certified accuracies as cells (nan: beyond the cap, ``-``)."""
    acr = (frame.at[i, "acr"], frame.at[i, "acr_sd_seeds"], frame.at[i, "acr_low"], frame.at[i, "acr_high"])
    accuracies = {}
    for radius in radii:
        column = radius_column(radius)
        value = frame.at[i, column]
        accuracies[radius] = (
            (value, frame.at[i, f"{column}_sd_seeds"], frame.at[i, f"{column}_low"], frame.at[i, f"{column}_high"])
            if not math.isnan(value)
            else (math.nan, math.nan, math.nan, math.nan)
        )
    return estimate_cells(acr, accuracies)


def _caption(options: Options, several_seeds: bool, cost: bool, constant: Sequence[str]) -> str:
    """What the paper table's numbers mean, and the columns common to every row."""
    level = f"{100 * options.confidence:g}%"
    acr_kind = "t interval" if options.acr_interval == "t" else "BCa bootstrap interval"
    return (
        f"ACR and certified accuracy (%) at radius r. [a, b]: {level} interval over the certified images "
        f"(ACR: {acr_kind}; accuracy: {CI_NAMES.get(options.ci_method, options.ci_method)})"
        + ("; ± sd over seeds, the value being their mean" if several_seeds else "")
        + "; - : beyond the radius the protocol can certify."
        + (
            " cost: the row's runs together (training and certification), GPU-hours on a GPU, core-hours "
            "(seconds x threads) on a CPU; * without training time; ? not recorded."
            if cost
            else ""
        )
        + (f" Common to all rows: {', '.join(constant)}." if constant else "")
    )


Interval = tuple[float, float, float, float]
"""A value, its sd over seeds (nan for one), and its interval's low and high ends."""


def estimate_cells(
    acr: Interval,
    accuracies: Mapping[float, Interval],
    beyond: Callable[[float], bool] = lambda radius: False,
    unknown: str = "-",
    sd_digits: tuple[int | None, int | None] = (None, None),
) -> dict[str, str]:
    """The ``ACR`` and ``r=<radius>`` cells of one line of a results table, each value with its sd and interval.

    The one renderer of a results table with intervals: the report's paper table (:func:`display_frame`) and the
    leaderboard's tables (:mod:`rsbench.leaderboard.render`). ACR at 3 decimals, certified accuracy in % at 1
    (:func:`interval_cell`; the sds at ``sd_digits``, default the same); ``-`` at a radius ``beyond`` the protocol's
    cap, ``unknown`` where the accuracy is nan.

    >>> estimate_cells((0.5, math.nan, 0.4, 0.6), {0.0: (0.9, math.nan, 0.85, 0.95), 1.0: (math.nan,) * 4})
    {'ACR': '0.500 [0.400, 0.600]', 'r=0': '90.0 [85.0, 95.0]', 'r=1': '-'}
    """
    cells = {"ACR": interval_cell(*acr, 1.0, 3, sd_digits[0])}
    for radius, (value, sd, low, high) in accuracies.items():
        if beyond(radius):
            cells[f"r={radius:g}"] = "-"
        elif math.isnan(value):
            cells[f"r={radius:g}"] = unknown
        else:
            cells[f"r={radius:g}"] = interval_cell(value, sd, low, high, 100.0, 1, sd_digits[1])
    return cells


def _alpha_column(frame: pd.DataFrame) -> str:
    """``alpha``, or ``alpha (+ beta)`` when a row is a dual certification (which holds at alpha + beta)."""
    return "alpha (+ beta)" if frame["beta"].notna().any() else "alpha"


def _alpha_text(alpha: Any, beta: Any) -> str:
    """A row's failure probability: ``0.001``, or ``0.001 + 0.001`` for a dual certification (alpha + beta)."""
    if beta is None or (isinstance(beta, float) and math.isnan(beta)):
        return _number(alpha)
    return f"{_number(alpha)} + {_number(beta)}"


def sigma_text(sigma: float) -> str:
    """Sigma as the papers write it: two decimals (``0.25``, ``1.00``), more only when needed.

    >>> sigma_text(1.0), sigma_text(0.12), sigma_text(0.125)
    ('1.00', '0.12', '0.125')
    """
    text = f"{sigma:.2f}"
    return text if float(text) == sigma else f"{sigma:g}"


def p_text(value: float | None) -> str:
    """A p-value as tables show it: three decimals, ``<0.001`` below, ``-`` when there is none.

    >>> p_text(0.04321), p_text(0.0001), p_text(float("nan"))
    ('0.043', '<0.001', '-')
    """
    if value is None or math.isnan(value):
        return "-"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def interval_cell(
    value: float, sd: float, low: float, high: float, scale: float, digits: int, sd_digits: int | None = None
) -> str:
    """``value ± sd [low, high]``, each times ``scale``, at ``digits`` decimals (the sd at ``sd_digits``).

    ``sd_digits`` defaults to ``digits``; a NaN sd or interval is left out.
    """
    text = f"{scale * value:.{digits}f}"
    if not math.isnan(sd):
        text += f" ± {scale * sd:.{digits if sd_digits is None else sd_digits}f}"
    if not math.isnan(low):
        text += f" [{scale * low:.{digits}f}, {scale * high:.{digits}f}]"
    return text


def _count(value: Any) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{float(value):,.0f}"


def _number(value: Any) -> str:
    return "?" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{float(value):g}"
