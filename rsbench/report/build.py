"""Assemble the report's sections and notes.

The results table, the paired comparison with a baseline, the envelope over sigma, the attack's empirical accuracy
beside certified accuracy, a dual randomized-smoothing run's diagnostics (not certificates), the published numbers
beside rsbench's, each row against the authors' released per-image run of it, and notes on anything a reader must
know (unsound rows, rounded radii).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from rsbench.certify.pipeline.metrics import envelope
from rsbench.report.against_released import compare_released
from rsbench.report.attack import attack_section
from rsbench.report.dual import dual_section
from rsbench.report.paired import baseline_rows, paired_table
from rsbench.report.published import compare_published, load_published
from rsbench.report.render import Section
from rsbench.report.rows import Row
from rsbench.report.tables import Options, display_frame, p_text, radius_column, results_frame, sigma_text


def build_sections(
    rows: Sequence[Row],
    keys: Sequence[str],
    common: Mapping[str, str],
    options: Options,
    baseline: str | None = None,
    published: bool = True,
    published_source: str | None = None,
    against_released: bool = False,
) -> tuple[list[Section], list[str]]:
    """The report's sections and notes for ``rows`` (see :mod:`rsbench.report`)."""
    numbers = results_frame(rows, options)
    table, caption = display_frame(numbers, keys, options, common)
    sections = [Section("results", "Results", table, caption, numbers)]
    notes: list[str] = []
    if baseline is not None:
        paired = paired_table(rows, baseline_rows(rows, baseline), options.radii, options.confidence)
        if not paired.empty:
            sections.append(_paired_section(paired, baseline, keys, options))
    envelope = envelope_frame(rows, numbers, keys, options)
    if envelope is not None:
        sections.append(envelope)
    attacked = attack_section(rows, keys, options)
    if attacked is not None:
        sections.append(attacked)
    diagnostics = dual_section(rows, options)
    if diagnostics is not None:
        sections.append(diagnostics)
    if published:
        comparison = compare_published(rows, numbers, load_published(), options, published_source)
        if comparison is not None:
            sections.append(comparison)
    if against_released:
        released = compare_released(rows, options)
        if released is None:
            notes.append("--against-released: no row has a released log of its method, dataset and sigma.")
        else:
            sections.append(released)
    notes += [
        f"{row.name}: these radii are NOT sound certificates ({row.first.variant})."
        for row in rows
        if not row.first.sound
    ]
    rounded = [row.name for row in rows if any(r.rounded_radii for r in row.results)]
    if rounded:
        notes.append(
            f"{', '.join(rounded)}: radii were written with 3 significant digits, so an image counted at a grid "
            "radius may have been rounded up to it (e.g. 0.4996 written as 0.5)."
        )
    return sections, notes


def _paired_section(paired: pd.DataFrame, baseline: str, keys: Sequence[str], options: Options) -> Section:
    """The paired table as shown: a row's method, sigma and settings, its baseline, the differences and their tests.

    The setting columns are the results table's (``keys``), so that two settings of one method stay apart.
    """
    level = f"{100 * options.confidence:g}%"
    shown: dict[str, list[str]] = {
        "method": list(paired["method"]),
        "sigma": [sigma_text(s) for s in paired["sigma"]],
        **{key: [str(v) for v in paired[key]] for key in keys},  # paired_table gives every line its settings
        "baseline": list(paired["baseline"]),
    }
    has = paired.get("d_acr") is not None
    if has:
        shown["ΔACR"] = [
            "-" if pd.isna(line.d_acr) else f"{line.d_acr:+.3f} [{line.d_acr_low:+.3f}, {line.d_acr_high:+.3f}]"
            for line in paired.itertuples()
        ]
        shown["p (paired t)"] = [p_text(v) for v in paired["p_acr"]]
        shown["p (Wilcoxon)"] = [p_text(v) for v in paired["p_acr_wilcoxon"]]
        if paired["p_acr_seeds"].notna().any():
            shown["p (seeds, Welch)"] = [p_text(v) for v in paired["p_acr_seeds"]]
        for radius in options.radii:
            column = radius_column(radius)
            if f"d_{column}" not in paired:
                continue
            shown[f"Δ r={radius:g} (p)"] = [
                "-" if pd.isna(d) else f"{100 * d:+.1f} ({p_text(p)})"
                for d, p in zip(paired[f"d_{column}"], paired[f"p_{column}"], strict=True)
            ]
    if "note" in paired:
        shown["note"] = ["" if pd.isna(v) else str(v) for v in paired["note"]]
    tests = sorted({str(t) for t in paired.get("test", pd.Series(dtype=str)).dropna()})
    caption = (
        f"Each row minus its baseline ({baseline}) on the same images. ΔACR: mean per-image difference of "
        f"correct x radius with its {level} paired t interval; p (paired t), p (Wilcoxon signed-rank): over images; "
        "p (seeds, Welch): between the per-seed ACRs, where both rows have 2 or more seeds. Δ r: certified accuracy "
        f"difference in percentage points with the p-value of {' / '.join(tests) or 'McNemar'}. p-values are not "
        "corrected for multiple comparisons."
    )
    return Section("paired", f"Paired against {baseline}", pd.DataFrame(shown), caption, paired)


def envelope_frame(rows: Sequence[Row], numbers: pd.DataFrame, keys: Sequence[str], options: Options) -> Section | None:
    """The best certified accuracy at each radius over sigma, per method and setting.

    Cohen et al.'s Fig. 7 and Salman et al.'s tables take this envelope. None when no setting ran at two sigmas.
    """
    lines = []
    frame = numbers.assign(_setting=[row.label + "|" + repr(row.settings) + "|" + row.threat for row in rows])
    for _, group in frame.groupby("_setting", sort=False):
        if group["sigma"].nunique() < 2:
            continue
        line: dict[str, object] = {"method": group["label"].iloc[0], **{k: group[k].iloc[0] for k in keys}}
        line["sigmas"] = ", ".join(sigma_text(s) for s in sorted(group["sigma"]))
        best, which = envelope(group[[radius_column(r) for r in options.radii]].to_numpy(dtype=float))
        for radius, value, row in zip(options.radii, best, which, strict=True):
            line[f"r={radius:g}"] = "-" if row < 0 else f"{100 * value:.1f} (σ={sigma_text(group['sigma'].iloc[row])})"
        lines.append(line)
    if not lines:
        return None
    table = pd.DataFrame(lines)
    caption = (
        "Envelope over sigma: the best certified accuracy (%) at each radius among the sigmas of one setting, "
        "and the sigma that reaches it (mean over seeds; intervals in the results table)."
    )
    return Section("envelope", "Envelope over sigma", table, caption, table)
