"""Each rsbench row paired image by image with the authors' own released run of the same method, dataset and sigma.

A published table entry and an rsbench number differ by the model, the images and the sampling; a released per-image
log (:mod:`rsbench.published.catalogue`) removes the second: rsbench's certificates and the authors' are compared on the
same test images (the same indices of the same test set), so the difference is paired and far sharper than a
z-distance between two table entries.

Per row: the authors' ACR on the paired images (and on all the images they certified), ΔACR with its paired-t
interval over the images (of the seed-averaged scores) and, with several seeds, the spread of the per-seed ΔACR;
certified accuracy differences per radius with McNemar's exact test (paired t over images of the seed-averaged
indicators with several seeds, as :func:`rsbench.report.paired.paired_table`); and how alike the two models are: the
share of images with the same prediction (abstentions included), the Pearson correlation of their radii
(abstentions as radius 0) and that of their scores (correct x radius, what ACR averages: a model that certifies its
wrong answers differently agrees less on radii than on scores). A row is matched to a log by method, dataset
(exactly: the embedded MNIST subset's images are not MNIST's test images), sigma and the log's variant; a row with
no log, or whose images the log lacks, is listed with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

from rsbench.published.catalogue import ReleasedLog, released_logs, training_curve
from rsbench.published.pairing import pair_rows
from rsbench.report.load import canonical
from rsbench.report.render import Section, with_numbers
from rsbench.report.rows import Row
from rsbench.report.tables import Options, p_text, radius_column, sigma_text
from rsbench.report.training_tracking import TrackingSummary, track


def matching_log(row: Row, logs: Sequence[ReleasedLog]) -> ReleasedLog | None:
    """The released log of ``row``'s method, dataset and sigma whose variant its hyperparameters satisfy, if any."""
    first = row.first
    for log in logs:
        if (log.method, log.dataset) != (first.method, first.dataset) or not math.isclose(log.sigma, first.sigma):
            continue
        variant = dict(item.split("=", 1) for item in log.variant.split(";") if item)
        if all(canonical(first.hparams.get(key, "?")) == canonical(value) for key, value in variant.items()):
            return log
    return None


LAST_COLUMNS = (
    "same prediction",
    "radius r",
    "score r",
    "Δ train acc (epochs)",
    "Δ train loss",
    "noisy test acc",
    "lr schedule",
)
"""Shown after the certified-accuracy differences (whose radii differ by row): how the two models agree, then how
they trained (:func:`_training_columns`)."""

HOLM = "Holm p"
"""The column of the ΔACR p-values adjusted for the number of rows compared (:func:`with_holm`), after ``p``."""


def compare_released(rows: Sequence[Row], options: Options) -> Section | None:
    """The table of every row against its released log; None when no row has one.

    Rows of sound certificates only: an unsound (data-dependent) row is not a reproduction of a released table.
    """
    logs = released_logs()
    lines: list[dict[str, Any]] = []
    for row in rows:
        log = matching_log(row, logs) if row.first.sound else None
        if log is not None:
            lines.append(_compare(row, log, options))
    if not lines:
        return None
    numbers = with_holm(pd.DataFrame(lines))
    visible = [c for c in numbers.columns if not c.startswith("_")]
    last = [c for c in LAST_COLUMNS if c in visible]  # after the radius columns of every row
    first = [c for c in visible if c not in last and c != HOLM]
    if HOLM in visible:
        first.insert(first.index("p") + 1, HOLM)
    shown = numbers[first + last].fillna("-")
    level = f"{100 * options.confidence:g}%"
    sources = ", ".join(sorted({reference.split(" ")[0] for reference in numbers["_reference"]}))
    caption = (
        "Each rsbench row against the authors' own released run of the same method, dataset and sigma (the file in "
        f"{sources}), image by image on the images both certified. ΔACR: rsbench minus the authors, mean per-image "
        f"difference of correct x radius with its {level} paired t interval over the images (for several seeds, of the "
        "seed-averaged scores; 'sd over seeds' is the spread of the per-seed ΔACR). Δ r: certified accuracy "
        "difference in points with McNemar's exact p (paired t over images for several seeds). 'same prediction': "
        "share of images where both models predict the same class (abstentions included); 'radius r': Pearson "
        "correlation of the two radii (abstention = 0); 'score r': of the two scores, correct x radius (what ACR "
        "averages; a wrong prediction's radius, which 'radius r' counts, is 0 here). 'verdict': whether the "
        "interval holds 0. "
        + (
            f"'{HOLM}': the ΔACR p adjusted for the {int(numbers['_p_acr'].notna().sum())} rows compared (Holm's "
            f"step-down): were every row's model as good as the authors', about {1 - options.confidence:.0%} of "
            f"the rows would still fall outside their {level} interval by chance; a Holm p under "
            f"{1 - options.confidence:.2g} is a difference that chance over all the rows does not explain. "
            if HOLM in numbers
            else ""
        )
        + "The authors' ACR "
        "on all the images they certified is the number their table printed. Intervals are over the test images "
        "for these trained models: they do not include the spread over training seeds unless 'sd over seeds' is "
        "given. Where the run folders hold their CSV training log: 'Δ train acc', rsbench minus the authors' "
        "training log, per epoch, in points (the mean over the epochs both logged, the largest absolute difference "
        "after the first, and how many epochs were compared; one noise draw per image per epoch on each side; "
        "MACER's log has none: its script writes 0.0 there); 'Δ train loss', the same for the loss the authors "
        "log (the cross-entropy term alone for Consistency, Stability, CAT-RS and MACER); 'noisy test acc': after "
        "training, rsbench / the authors' last logged epoch (%); 'lr schedule': whether each epoch trained at the "
        "authors' learning rate (their log prints the rate dropped twice at the epoch after each drop, a get_lr() "
        "artefact, read as the rate they trained with)."
    )
    return with_numbers("released", "Against the authors' released runs", shown, caption, numbers)


def with_holm(numbers: pd.DataFrame) -> pd.DataFrame:
    """``numbers`` with the ΔACR p-values adjusted for multiplicity (Holm 1979, via statsmodels), if 2+ rows paired.

    Adds the column ``Holm p`` (text) and ``_p_acr_holm``. Holm's step-down controls the family-wise error rate:
    sort the k p-values, multiply the i-th smallest by k - i + 1 (i from 1), and carry the running maximum (capped
    at 1).
    """
    if "_p_acr" not in numbers:
        return numbers
    tested = numbers["_p_acr"].notna()
    if int(tested.sum()) < 2:
        return numbers
    adjusted = multipletests(numbers.loc[tested, "_p_acr"].to_numpy(dtype=float), method="holm")[1]
    numbers = numbers.copy()
    numbers["_p_acr_holm"] = math.nan
    numbers.loc[tested, "_p_acr_holm"] = adjusted
    numbers[HOLM] = [p_text(p) if not math.isnan(p) else "-" for p in numbers["_p_acr_holm"]]
    return numbers


def _compare(row: Row, log: ReleasedLog, options: Options) -> dict[str, Any]:
    released = log.read()
    pairing = pair_rows(row, Row((released,), row.settings), options.radii, options.confidence)
    common = pairing.images if pairing is not None else []
    line: dict[str, Any] = {
        "method": row.label,
        "sigma": sigma_text(row.first.sigma),
        **dict(row.stated_settings),
        "released run": log.path,
        "images": f"{len(common):,}" + ("" if len(common) == len(row.images) else f" of {len(row.images):,}"),
        "_reference": log.reference,
        "_images_paired": len(common),
        "_images_row": len(row.images),
        "_acr_released_all": float(np.mean(released.scores)),
    }
    if pairing is None:
        return {**line, "note": "not paired: the released log certified none of the row's images"}
    ours, base, paired = pairing.ours, pairing.theirs, pairing.line
    per_seed = ours.seed_values() - float(np.mean(base.scores))
    k = len(row.results)
    line.update(
        {
            "rsbench ACR": f"{np.mean(ours.seed_values()):.3f}" + (f" ({k} seeds)" if k > 1 else ""),
            "authors' ACR (same images)": f"{np.mean(base.scores):.3f}",
            "authors' ACR (all)": f"{line['_acr_released_all']:.3f} ({len(released.images):,})",
            "ΔACR": f"{paired.d_acr:+.3f} [{paired.d_acr_low:+.3f}, {paired.d_acr_high:+.3f}]",
            "sd over seeds": f"{np.std(per_seed, ddof=1):.3f}" if k > 1 else "-",
            "p": p_text(paired.p_acr),
            "verdict": _verdict(paired.d_acr_low, paired.d_acr_high),
            "_acr": float(np.mean(ours.seed_values())),
            "_acr_released": float(np.mean(base.scores)),
            "_d_acr": paired.d_acr,
            "_d_acr_low": paired.d_acr_low,
            "_d_acr_high": paired.d_acr_high,
            "_d_acr_seed_sd": float(np.std(per_seed, ddof=1)) if k > 1 else math.nan,
            "_p_acr": paired.p_acr,
        }
    )
    for radius in options.radii:
        column = radius_column(radius)
        if f"d_{column}" in paired and not pd.isna(paired[f"d_{column}"]):
            d, p = paired[f"d_{column}"], paired[f"p_{column}"]
            line[f"Δ r={radius:g} (p)"] = f"{100 * d:+.1f} ({p_text(p)})"
            line[f"_d_{column}"], line[f"_p_{column}"] = d, p
    theirs_records = base.first.records
    same = [
        float(np.mean(r.records["predict"].to_numpy() == theirs_records["predict"].to_numpy())) for r in ours.results
    ]
    radius_r = [_correlation(_radii(r.records), _radii(theirs_records)) for r in ours.results]
    score_r = [_correlation(r.scores, base.first.scores) for r in ours.results]
    line["same prediction"] = f"{100 * np.mean(same):.1f}%"
    line["radius r"], line["score r"] = f"{np.mean(radius_r):.2f}", f"{np.mean(score_r):.2f}"
    line["_same_prediction"] = float(np.mean(same))
    line["_radius_correlation"], line["_score_correlation"] = float(np.mean(radius_r)), float(np.mean(score_r))
    return {**line, **_training_columns(row, log)}


def _training_columns(row: Row, log: ReleasedLog) -> dict[str, Any]:
    """How the row's runs trained against the authors' training log (means over the seeds whose CSV log is there).

    Nothing when the authors released no training log for the cell; '-' when no run folder of the row has one.
    """
    theirs = training_curve(log.method, log.dataset, log.sigma)
    if theirs is None:
        return {}
    summaries: list[TrackingSummary] = []
    for result in row.results:
        try:
            summaries.append(track(Path(result.source), log.method, theirs)[1])
        except (FileNotFoundError, KeyError, ValueError):  # no CSV log, another logger's columns, no common epoch
            continue
    if not summaries:
        return {"Δ train acc (epochs)": "-"}
    largest = max(summary.max_abs_d_later for summary in summaries)
    mean = float(np.mean([summary.mean_d for summary in summaries]))
    loss_largest = max(summary.loss_max_abs_d_later for summary in summaries)
    loss_mean = float(np.mean([summary.loss_mean_d for summary in summaries]))
    epochs = min(summary.epochs for summary in summaries)
    tests = [summary.test_acc_rsbench for summary in summaries if summary.test_acc_rsbench is not None]
    test = f"{np.mean(tests):.1f}" if tests else "-"
    accuracy = (
        f"mean {mean:+.2f}, at most {largest:.2f} after the first ({epochs})"
        if not math.isnan(mean)
        else f"not in the authors' log ({epochs})"
    )
    return {
        "Δ train acc (epochs)": accuracy,
        "Δ train loss": f"mean {loss_mean:+.3f}, at most {loss_largest:.3f} after the first",
        "noisy test acc": f"{test} / {summaries[0].test_acc_authors:.1f}",
        "lr schedule": _schedule_agreement(summaries),
        "_d_train_acc_mean": mean,
        "_d_train_acc_max_after_first": largest,
        "_d_train_loss_mean": loss_mean,
        "_d_train_loss_max_after_first": loss_largest,
        "_epochs_compared": epochs,
        "_test_acc": float(np.mean(tests)) if tests else math.nan,
        "_test_acc_released": summaries[0].test_acc_authors,
        "_lr_epochs_differing": sum(len(summary.lr_differing) for summary in summaries),
    }


def _schedule_agreement(summaries: list[TrackingSummary]) -> str:
    """Whether the runs of a row trained at the authors' learning rate, epoch by epoch.

    'same (N epochs)' when every seed did in every epoch whose rate both sides logged, else the epochs that differ
    (of the first seed that differs); '-' when no run logged its rate.
    """
    compared = min(summary.lr_epochs for summary in summaries)
    if compared == 0:
        return "-"
    differing = next((summary.lr_differing for summary in summaries if summary.lr_differing), ())
    if not differing:
        return f"same ({compared} epochs)"
    shown = ", ".join(str(epoch) for epoch in differing[:5]) + (", ..." if len(differing) > 5 else "")
    return f"differs at epochs {shown}"


def _radii(records: pd.DataFrame) -> np.ndarray:
    """Per image: the certified radius, right or wrong (an abstention counts as radius 0)."""
    return np.where(records["predict"].to_numpy() >= 0, records["radius"].to_numpy(float), 0.0)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two models' per-image values on the same images; NaN when either is constant."""
    if np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _verdict(low: float, high: float) -> str:
    if low <= 0 <= high:
        return "within (0 in the interval)"
    return "rsbench above" if low > 0 else "rsbench below"
