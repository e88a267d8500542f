"""Write the measured figures of the README and docs/ from the committed records, so that none is typed by hand.

    python tools/make_docs.py            # rewrite every generated region of README.md and docs/*.md
    python tools/make_docs.py --check    # change nothing; exit 1 naming each region its records no longer give
    python tools/make_docs.py --list     # the regions and the pages that hold them

A page marks a generated region with an opening ``<!-- generated: NAME -->`` line and a closing
``<!-- /generated -->`` line. NAME is one of :data:`FRAGMENTS`, a function of the committed records only: the runs of
the studies (``experiments/<study>/runs/``: metrics.json, certify.tsv, .hydra/, the training CSV), each study's
``card.yaml``, the bench outputs committed as files, and the published numbers and released per-image logs rsbench
ships (``rsbench/report/``). The text between the markers is replaced whole; everything outside them is the page's
own. ``tests/tools/test_docs.py`` regenerates every region and fails when a page and its records disagree.

The numbers are computed with the report's own code (:mod:`rsbench.report`), so a figure here is the figure
``python -m rsbench.report`` prints for the same runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python tools/make_docs.py` from a checkout: import this checkout's rsbench
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from rsbench.certify.pipeline.certification import read_segments  # noqa: E402
from rsbench.certify.pipeline.summary import format_summary  # noqa: E402
from rsbench.methods.card import method_card, table_methods  # noqa: E402
from rsbench.published.catalogue import released_logs  # noqa: E402
from rsbench.report.against_released import compare_released, matching_log  # noqa: E402
from rsbench.report.build import build_sections  # noqa: E402
from rsbench.report.load import Result, find_results  # noqa: E402
from rsbench.report.published import load_published  # noqa: E402
from rsbench.report.render import Section  # noqa: E402
from rsbench.report.rows import Row, group_rows  # noqa: E402
from rsbench.report.stats import mean_interval, paired_difference, seed_test  # noqa: E402
from rsbench.report.tables import Options, p_text  # noqa: E402

EXPERIMENTS = ROOT / "experiments"
OPEN = re.compile(r"^<!-- generated: (?P<name>[\w.-]+) -->$", re.M)
CLOSE = "<!-- /generated -->"
SIGMAS = (0.25, 0.5, 1.0)
Fragment = Callable[[], str]
FRAGMENTS: dict[str, Fragment] = {}


def fragment(name: str) -> Callable[[Fragment], Fragment]:
    """Register a generated region's maker under ``name``."""

    def register(make: Fragment) -> Fragment:
        FRAGMENTS[name] = make
        return make

    return register


# --- reading the records ------------------------------------------------------------------------------------------


def study_link(study: str, page_depth: int = 1) -> str:
    """A Markdown link to a study's folder from a page ``page_depth`` folders below the root (README: 0)."""
    return f"[{study}]({'../' * page_depth}experiments/{study}/)"


@functools.cache
def study_results(study: str) -> tuple[Result, ...]:
    """Every certified run under ``experiments/<study>/runs/``, read as the report reads them (paths relative)."""
    results = find_results([EXPERIMENTS / study / "runs"])
    return tuple(sorted(results, key=lambda r: str(r.source)))


def card(study: str) -> dict[str, Any]:
    """The study's ``card.yaml`` (empty when it has none)."""
    path = EXPERIMENTS / study / "card.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def rows_of(results: Iterable[Result]) -> list[Row]:
    """The report's rows (runs differing only in the seed grouped)."""
    rows, _, _ = group_rows(list(results))
    return rows


def devices(results: Iterable[Result]) -> str:
    """The devices that certified, as the runs recorded them."""
    names = sorted({r.device or "a device not recorded" for r in results})
    return ", ".join(names)


def acr_triple(values: dict[float, str]) -> str:
    """``a / b / c`` over sigma 0.25, 0.5, 1.0 (``-`` where absent)."""
    return " / ".join(values.get(s, "-") for s in SIGMAS)


def paired(a: Row, b: Row) -> tuple[str, float]:
    """``+0.012 [+0.003, +0.021]``: ΔACR of row ``a`` minus row ``b`` on the same images (seed-averaged), its p."""
    if a.images != b.images:
        raise ValueError(f"{a.name} and {b.name} certified different images")
    d = paired_difference(a.scores, b.scores)
    return f"{d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]", d.p_value


def p_phrase(p: float) -> str:
    """``p = 0.062`` or ``p < 0.001``, as a sentence says it."""
    text = p_text(p)
    return f"p {text[0]} {text[1:]}" if text.startswith("<") else f"p = {text}"


def seeds_text(row: Row) -> str:
    """``1.229 ± 0.002`` (mean ± sd over seeds) or ``1.229`` for one seed."""
    values = row.seed_values()
    return f"{np.mean(values):.3f}" + (f" ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else "")


def report_tables(
    results: Sequence[Result],
    radii: Sequence[float],
    *,
    baseline: str | None = None,
    sections: Sequence[str] = ("results", "paired"),
    heading: str = "####",
) -> str:
    """The report's tables for ``results`` (as ``python -m rsbench.report`` prints them), without its figures."""
    rows, keys, common = group_rows(list(results))
    built, notes = build_sections(rows, keys, common, Options(radii=tuple(radii)), baseline=baseline, published=False)
    return render([s for s in built if s.name in sections], heading) + "".join(f"\n- {note}" for note in notes)


def render(sections: Iterable[Section], heading: str = "####") -> str:
    """Sections as Markdown: a heading, the table, the caption."""
    parts = []
    for section in sections:
        table = section.table.to_markdown(index=False, disable_numparse=True)
        parts.append(f"{heading} {section.title}\n\n{table}\n\n{section.caption}\n")
    return "\n".join(parts).rstrip("\n")


MEASUREMENTS = "docs/measurements.md"


@functools.cache
def fed_by(page: str) -> tuple[str, ...]:
    """The studies whose card says they feed ``page``, in the order of their sections on the page.

    A card's ``docs:`` entries are ``page`` or ``page#section``; a study naming the page alone comes first. Raises
    naming a card whose section the page does not have.
    """
    placed: dict[str, int] = {}
    for path in sorted(EXPERIMENTS.glob("*/card.yaml")):
        study = path.parent.name
        for entry in card(study).get("docs", []):
            name, _, section = entry.partition("#")
            if name == page:
                where = section_position(page, section, study)
                placed[study] = min(where, placed.get(study, where))
    return tuple(sorted(placed, key=lambda study: (placed[study], study)))


def section_position(page: str, section: str, study: str) -> int:
    """Where the heading whose anchor is ``section`` starts on ``page``, code blocks left out (0 for no section)."""
    if not section:
        return 0
    text = re.sub(r"```.*?```", "", (ROOT / page).read_text(), flags=re.S)
    for heading in re.finditer(r"^#+ (.+)$", text, re.M):
        if anchor(heading[1]) == section:
            return heading.start()
    raise ValueError(f"experiments/{study}/card.yaml: docs entry {page}#{section}: {page} has no such section")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@fragment("measurements-sources")
def measurements_sources() -> str:
    """measurements: each study this page reads, its certified runs and the machines that certified them."""
    lines = ["| study | certified runs | certified on (from the runs' metrics.json) | machine (the study's card) |"]
    lines.append("|---|---|---|---|")
    for study in fed_by(MEASUREMENTS):
        if not (EXPERIMENTS / study / "runs").is_dir():  # a benchmark's outputs, quoted in its section: no runs
            continue
        results = study_results(study)
        machine = card(study).get("machine", "-")
        lines.append(f"| {study_link(study)} | {len(results)} | {devices(results)} | {machine} |")
    return "\n".join(lines)


# --- the default run ----------------------------------------------------------------------------------------------

DEFAULT = "default_run"


def default_rows() -> list[Result]:
    """The default run's records, by training seed."""
    return sorted(study_results(DEFAULT), key=lambda r: (r.seed is None, r.seed or 0))


def metrics_of(result: Result) -> dict[str, Any]:
    """The run's ``metrics.json``."""
    return dict(json.loads((Path(result.source) / "metrics.json").read_text()))


@fragment("default-run-output")
def default_run_output() -> str:
    """What ``python -m rsbench`` printed at its end, from the committed record of seed 0."""
    first = default_rows()[0]
    return f"```\n{format_summary(metrics_of(first))}\n```"


def default_run_time(metrics: dict[str, Any]) -> str:
    """The run's training and certification time from its ``metrics.json["cost"]`` ("" for a record without it)."""
    cost = metrics.get("cost") or {}
    if cost.get("train_seconds") is None or cost.get("certify_seconds") is None:
        return ""
    train, certify = cost["train_seconds"] / 60, cost["certify_seconds"] / 60
    return (
        f"It trained for {train:.1f} min and certified for {certify:.1f} min ({cost['threads']} threads; the record's "
        f"`cost`), about {train + certify:.0f} min in all. "
    )


@fragment("default-run-spread")
def default_run_spread() -> str:
    """README: where the quoted lines come from, and how far the default run's ACR is known to move."""
    results = default_rows()
    first = results[0]
    estimate = mean_interval(first.scores)
    text = (
        f"These lines are the committed record of this run ({study_link(DEFAULT, 0)}: "
        f"{card(DEFAULT).get('machine', devices([first]))}; its commit and date are in "
        "[docs/measurements.md](docs/measurements.md#the-default-run)). "
        f"{default_run_time(metrics_of(first))}"
        f"The standard error of its ACR over the {len(first.scores)} certified images is {estimate.se:.3f}"
    )
    if len(results) > 1:
        seeds = ", ".join(f"{np.mean(r.scores):.4f}" for r in results)
        text += f"; training seeds {', '.join(str(r.seed) for r in results)} give {seeds} (`python -m rsbench seed=1`)"
    return text + "."


@fragment("measurements-default-run")
def measurements_default_run() -> str:
    """measurements: every committed default run, with where and when it ran."""
    notes = {cell["name"]: cell.get("note", "") for cell in card(DEFAULT).get("cells", [])}
    lines = [
        f"Machine: {card(DEFAULT).get('machine', '-')}.",
        "",
        "| record | seed | made with | certified on | threads | torch | ACR [95% t interval] | certified accuracy |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in default_rows():
        metrics = metrics_of(result)
        environment = metrics.get("environment", {})
        estimate = mean_interval(result.scores)
        accuracy = ", ".join(f"{100 * a:.0f}% at {r}" for r, a in metrics["certified_accuracy"].items())
        lines.append(
            f"| `runs/{Path(result.source).name}` | {result.seed} | {notes.get(Path(result.source).name, '-')} | "
            f"{environment.get('device_name', '-')} | {environment.get('threads', '-')} | "
            f"{environment.get('torch', '-')} | {metrics['acr']:.4f} [{estimate.low:.3f}, {estimate.high:.3f}] | "
            f"{accuracy} |"
        )
    values = [float(np.mean(r.scores)) for r in default_rows()]
    if len(values) > 1:
        lines += ["", f"Over the {len(values)} seeds: ACR {np.mean(values):.4f} ± {np.std(values, ddof=1):.4f} (sd)."]
    return "\n".join(lines)


# --- published numbers and the methods table ---------------------------------------------------------------------

PUBLISHED_SOURCES = {  # the line each dataset's default follows (a card's published_sources says where it does not)
    "cifar10": "catrs2023_table1",
    "mnist": "smoothmix2021_table2",
    "fashion_mnist": "catrs2023_logs_fmnist",
}
FASHION = "fashion_mnist_table"


def method_study(method: str) -> str:
    """The study the README's methods table links for ``method`` ("-" when no card lists it in ``methods_table``)."""
    for study in fed_by("README.md"):
        if method in card(study).get("methods_table", []):
            return study_link(study, 0)
    return "-"


def published_acr(source: str, method: str, variant: str | None = None) -> dict[float, str]:
    """The published ACR of ``method`` in ``source`` per sigma (3 decimals), as rsbench ships it."""
    published = load_published()
    lines = published[(published["source"] == source) & (published["method"] == method)]
    if variant is not None:
        lines = lines[lines["variant"].fillna("") == variant]
    found: dict[float, str] = {}
    for line in lines.itertuples():
        found.setdefault(float(line.sigma), f"{float(line.acr):.3f}")
    return found


def published_cell(dataset: str, method: str) -> tuple[str, str]:
    """The ACR triple a default reproduces on ``dataset`` and where it is from (the dataset's line, or its card's)."""
    card = method_card(method)
    source = card.published_sources.get(dataset, PUBLISHED_SOURCES[dataset])
    values = published_acr(source, method, card.published_variants.get(dataset))
    return acr_triple(values), source


def source_name(source: str) -> str:
    """The paper or log a published source id stands for."""
    published = load_published()
    reference = str(published.loc[published["source"] == source, "reference"].iloc[0])
    # a released log's reference names one file (its first line's): name the release's folder instead
    return re.sub(r"certification log (\S+) (data/[^/]+/)\S*", r"certification logs (\1, \2)", reference)


@functools.cache
def fashion_comparison() -> pd.DataFrame:
    """Every Fashion-MNIST cell against the authors' released run (the report's numbers, one line per cell)."""
    radii = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
    logs = released_logs()
    rows = [row for row in rows_of(study_results(FASHION)) if row.first.sound and matching_log(row, logs)]
    section = compare_released(rows, Options(radii=radii))
    if section is None:
        return pd.DataFrame()
    numbers = section.numbers.copy()
    numbers["_row"] = rows
    numbers["sigma_value"] = [row.first.sigma for row in rows]
    return numbers


@fragment("methods-table")
def methods_table() -> str:
    """README: each method's paper, the published ACR its default reproduces, rsbench's paired result, its study."""
    comparison = fashion_comparison()
    lines = [
        "| `method=` | Paper | Published ACR, sigma 0.25 / 0.5 / 1.0: CIFAR-10 (CAT-RS Table 1); Fashion-MNIST "
        "(the authors' released runs) | rsbench minus the authors' run on the same Fashion-MNIST images: ΔACR "
        "[95% interval] at sigma 0.25 / 0.5 / 1.0 | Study |",
        "|---|---|---|---|---|",
    ]
    for card in table_methods():
        method = card.name
        cifar, _ = published_cell("cifar10", method)
        fashion, _ = published_cell("fashion_mnist", method)
        ours = comparison[comparison["method"] == method] if not comparison.empty else comparison
        deltas: dict[float, str] = {}
        for _, line in ours.iterrows():  # a cell trained again in another layout stays in its study's table
            sigma = float(line["sigma_value"])
            if sigma not in deltas or str(line.get("train_layout", "?")) in ("?", "contiguous"):
                deltas[sigma] = str(line["ΔACR"])
        result = acr_triple(deltas)
        study = method_study(method)
        lines.append(f"| `{method}` | {card.citation} | {cifar}; {fashion} | {result} | {study} |")
    return "\n".join(lines)


@fragment("published-defaults")
def published_defaults() -> str:
    """docs/methods.md: the published ACR each default reproduces, per dataset, with its source."""
    lines = [
        "| `method=` | `dataset=cifar10` | `dataset=mnist` | `dataset=fashion_mnist` (`protocol=authors`) |",
        "|---|---|---|---|",
    ]
    sources: set[str] = set()
    for method in (card.name for card in table_methods()):
        cells = []
        for dataset in PUBLISHED_SOURCES:
            triple, source = published_cell(dataset, method)
            if triple == acr_triple({}):
                cells.append("no published setting")
                continue
            sources.add(source)
            cells.append(f"{triple} ({source})")
        lines.append(f"| `{method}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- `{source}`: {source_name(source)}" for source in sorted(sources)]
    return "\n".join(lines)


@fragment("reports-example")
def reports_example() -> str:
    """docs/reports.md: the report of the CAT-RS authors' released CIFAR-10 logs at sigma 0.25 (rsbench ships them)."""
    logs = [
        log
        for log in released_logs(dataset="cifar10", sigma=0.25)
        if log.method in ("gaussian", "consistency", "catrs")
    ]
    results = [log.read() for log in logs]
    rows, keys, common = group_rows(results)
    options = Options(radii=(0.0, 0.25, 0.5, 0.75))
    built, _ = build_sections(rows, keys, common, options, baseline="gaussian", published=False)
    tables = [s.table.to_markdown(index=False, disable_numparse=True) for s in built if s.name in ("results", "paired")]
    by_method = {row.label: row for row in rows}
    difference, p = paired(by_method["catrs"], by_method["consistency"])
    return (
        "\n\n".join(tables)
        + f"\n\nPaired on the same {len(by_method['catrs'].images):,} images (`--baseline consistency`), CAT-RS minus "
        f"Consistency is {difference} (95% paired t interval over the images), {p_phrase(p)}."
    )


# --- the Fashion-MNIST table --------------------------------------------------------------------------------------


def cell_name(row: Row) -> str:
    """``gaussian, sigma 0.5``; ``gaussian, sigma 0.25, trained channels-last`` for a cell trained in that layout."""
    layout = dict(row.settings).get("train_layout")
    suffix = ", trained channels-last" if layout == "channels_last" else ""
    return f"{row.label}, sigma {row.first.sigma:g}{suffix}"


@fragment("fashion-mnist-paired")
def fashion_mnist_paired() -> str:
    """measurements: every Fashion-MNIST cell against the authors' run of it, on the same images."""
    comparison = fashion_comparison()
    lines = [
        "| cell | certified on | images | rsbench ACR | authors' ACR, same images | authors' ACR, all images | "
        "ΔACR [95% paired t] | p | Holm p | same prediction | radius r | score r | McNemar tests | smallest "
        "McNemar p |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tests_total, within, smallest = 0, 0, (math.inf, "")
    for _, line in comparison.iterrows():
        row: Row = line["_row"]
        tested = {c[len("p_acc@") :]: float(p) for c, p in line.items() if c.startswith("p_acc@") and not pd.isna(p)}
        tests_total += len(tested)
        low_r, low_p = min(tested.items(), key=lambda item: item[1])
        if low_p < smallest[0]:
            smallest = (low_p, f"{cell_name(row)}, r = {low_r}")
        within += int(line["d_acr_low"] <= 0 <= line["d_acr_high"])
        cells = [
            cell_name(row),
            devices(row.results),
            line["images"],
            line["rsbench ACR"],
            line["authors' ACR (same images)"],
            line["authors' ACR (all)"],
            line["ΔACR"],
            line["p"],
            line["Holm p"],
            line["same prediction"],
            line["radius r"],
            line["score r"],
            str(len(tested)),
            f"{p_text(low_p)} (r = {low_r})",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += [
        "",
        f"{len(comparison)} cells; {within} hold 0 in their 95% interval of ΔACR. McNemar's exact test of certified "
        f"accuracy at the radii 0, 0.25, 0.5, 0.75, 1, 1.5, 2 that each protocol can certify: {tests_total} tests, "
        f"the smallest {p_phrase(smallest[0])} ({smallest[1]}). Intervals are over these test images for these "
        "trained models (one seed each), not over training seeds. 'radius r': correlation of the two models' radii, "
        "wrong predictions' radii included; 'score r': of correct x radius, what ACR averages.",
    ]
    return "\n".join(lines)


@fragment("fashion-mnist-training")
def fashion_mnist_training() -> str:
    """measurements: how each Fashion-MNIST cell trained against the authors' training log, and where it resumed."""
    comparison = fashion_comparison()
    lines = [
        "| cell | trained with | Δ train accuracy, points (epochs compared) | Δ train loss | noisy test accuracy, "
        "rsbench / authors | learning rate | resumed inside an epoch |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, line in comparison.iterrows():
        row: Row = line["_row"]
        hparams = ", ".join(f"{k} {v:g}" for k, v in row.first.hparams.items() if k in ("lbd", "eta", "num_noise"))
        batch = config_value(row.first, "dataset.batch_size")
        trained = ", ".join(part for part in (f"batch {batch}" if batch else "", hparams) if part) or "-"
        cells = [
            cell_name(row),
            trained,
            line["Δ train acc (epochs)"],
            line["Δ train loss"],
            line["noisy test acc"],
            line["lr schedule"],
            resumed_epochs(row),
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += [
        "",
        "Δ: rsbench minus the authors' log, per epoch (mean over the epochs, and the largest after the first). "
        "'resumed inside an epoch': epochs where the training log's step count goes back, i.e. the run was stopped "
        "inside that epoch and continued from its last checkpoint (the epoch trained again); a run resumed between "
        "epochs leaves no trace there.",
    ]
    return "\n".join(lines)


def config_value(result: Result, key: str) -> Any:
    """A key of the run's stored ``.hydra/config.yaml`` (None when absent or not resolvable outside the run)."""
    if result.config is None:
        return None
    try:
        return OmegaConf.select(result.config, key, default=None)
    except Exception:  # an interpolation only a live Hydra run can resolve
        return None


def resumed_epochs(row: Row) -> str:
    """The epochs in which the run's CSV training log goes back in steps (a restart inside that epoch)."""
    found: list[int] = []
    for result in row.results:
        path = Path(result.source) / "logs" / "training_metrics.csv"
        if not path.exists():
            return "no training log"
        log = pd.read_csv(path, usecols=["epoch", "step"]).dropna()
        epochs, steps = log["epoch"].to_numpy(int), log["step"].to_numpy(int)
        for i in range(1, len(log)):
            if steps[i] < steps[i - 1] and epochs[i] == epochs[i - 1]:
                found.append(int(epochs[i]))
    return ", ".join(f"epoch {e}" for e in sorted(set(found))) or "none"


@fragment("fashion-mnist-cost")
def fashion_mnist_cost() -> str:
    """measurements: seconds per certified image at n = 100,000, per machine and network layout (the rows' time)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for result in study_results(FASHION):
        protocol = result.protocol
        network = str(protocol.get("network", "fp32"))
        times = pd.read_csv(Path(result.source) / "certify.tsv", sep="\t", usecols=["time"])["time"].tolist()
        threads = metrics_of(result).get("environment", {}).get("threads")
        machines = [(result.device, threads, 0)]
        segments = read_segments(Path(result.source))  # a run resumed on other machines: which rows each certified
        if len(segments) > 1:
            machines = [(str(s["device_name"]), s["threads"], int(s["rows"].get("certify", 0))) for s in segments]
        for k, (device, count, first) in enumerate(machines):
            last = machines[k + 1][2] if k + 1 < len(machines) else len(times)
            key = (f"{device} ({count} thread{'' if count == 1 else 's'})", network)
            groups.setdefault(key, []).extend(times[first:last])
    lines = ["| certified on | network | images | median seconds per image |", "|---|---|---|---|"]
    for (device, network), times in sorted(groups.items()):
        lines.append(f"| {device} | {network} | {len(times)} | {np.median(times):.2f} |")
    return "\n".join(lines)


@fragment("fashion-mnist-radius-correlation")
def fashion_mnist_radius_correlation() -> str:
    """measurements: how the two models' radii agree, over all images and over those both classify correctly."""
    logs = released_logs(dataset="fashion_mnist")
    lines = [
        "| cell | radius r, all images | radius r, images both classify correctly | wrong answers (abstentions "
        "included), rsbench / authors | their mean radius, rsbench / authors |",
        "|---|---|---|---|---|",
    ]
    for row in rows_of(study_results(FASHION)):
        log = next(log for log in logs if log.method == row.label and math.isclose(log.sigma, row.first.sigma))
        theirs, ours = log.read().on_images(row.images).records, row.first.records
        radii = [np.where(r["predict"] >= 0, r["radius"], 0.0) for r in (ours, theirs)]
        both = (ours["correct"].to_numpy() == 1) & (theirs["correct"].to_numpy() == 1)
        wrong = [r["correct"].to_numpy() == 0 for r in (ours, theirs)]
        cells = [
            cell_name(row),
            f"{np.corrcoef(radii[0], radii[1])[0, 1]:.3f}",
            f"{np.corrcoef(radii[0][both], radii[1][both])[0, 1]:.3f}",
            f"{wrong[0].sum()} / {wrong[1].sum()}",
            f"{radii[0][wrong[0]].mean():.2f} / {radii[1][wrong[1]].mean():.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


@fragment("fashion-mnist-subset")
def fashion_mnist_subset() -> str:
    """measurements: the authors' models on the every-20th subset against all 10,000 test images."""
    lines = [
        "| method | sigma | ACR, all 10,000 | ACR, every 20th (500) | subset minus all | in standard errors |",
        "|---|---|---|---|---|---|",
    ]
    differences = []
    for log in sorted(released_logs(dataset="fashion_mnist"), key=lambda log: (log.sigma, log.method)):
        released = log.read()
        scores, images = np.asarray(released.scores), np.asarray(released.images)
        subset = scores[images % 20 == 0]
        error = float(np.std(scores, ddof=1)) / math.sqrt(len(subset)) * math.sqrt(1 - len(subset) / len(scores))
        full, part = float(scores.mean()), float(subset.mean())
        differences.append(part - full)
        lines.append(
            f"| {log.method} | {log.sigma:g} | {full:.4f} | {part:.4f} | {part - full:+.4f} | "
            f"{(part - full) / error:+.2f} |"
        )
    higher = sum(d > 0 for d in differences)
    lines += [
        "",
        f"The subset scores higher than the whole test set for {higher} of the {len(differences)} released models "
        f"(differences {min(differences):+.4f} to {max(differences):+.4f}); one fixed selection shared by every model, "
        "so these are not independent findings. Only a paired comparison on the same images tests a reproduction.",
    ]
    return "\n".join(lines)


# --- the CPU-scale studies on embedded MNIST ----------------------------------------------------------------------


@fragment("embedded-mnist-study")
def embedded_mnist_study() -> str:
    """measurements: every method with the 20-epoch recipe, paired with Gaussian augmentation."""
    results = study_results("embedded_mnist_study")
    return report_tables(results, (0.0, 0.5, 1.0, 1.5, 2.0), baseline="gaussian")


@fragment("embedded-mnist-full-recipe")
def embedded_mnist_full_recipe() -> str:
    """measurements: Gaussian, Stability and MACER with the papers' recipe, and the spread over seeds."""
    results = study_results("embedded_mnist_full_recipe")
    rows = rows_of(results)
    sds = [float(np.std(row.seed_values(), ddof=1)) for row in rows if len(row.results) > 1]
    return (
        report_tables(results, (0.0, 0.5, 1.0, 1.5, 2.0), baseline="gaussian")
        + f"\n\nThe sd of ACR over the 3 training seeds ranges from {min(sds):.4f} to {max(sds):.4f} over these "
        f"{len(sds)} settings."
    )


@fragment("embedded-mnist-catrs-lambda")
def embedded_mnist_catrs_lambda() -> str:
    """measurements: CAT-RS's lambda 1 and 2 on MNIST, each against Gaussian and against each other."""
    results = study_results("embedded_mnist_catrs_lambda")
    rows = rows_of(results)
    text = report_tables(results, (0.0, 0.5, 1.0, 1.5, 2.0), baseline="gaussian")
    lines = ["", "| sigma | lambda 2 minus lambda 1, same images: ΔACR [95% paired t] | p |", "|---|---|---|"]
    for sigma in sorted({row.first.sigma for row in rows}):
        by_lbd = {
            float(row.first.hparams["lbd"]): row
            for row in rows
            if row.label == "catrs" and math.isclose(row.first.sigma, sigma)
        }
        if 1.0 in by_lbd and 2.0 in by_lbd:
            difference, p = paired(by_lbd[2.0], by_lbd[1.0])
            lines.append(f"| {sigma:g} | {difference} | {p_text(p)} |")
    return text + "\n" + "\n".join(lines)


@fragment("embedded-mnist-denoised")
def embedded_mnist_denoised() -> str:
    """measurements: denoised smoothing on embedded MNIST, per sigma, every model paired with the Gaussian LeNet."""
    results = study_results("embedded_mnist_denoised")
    parts = []
    for sigma in sorted({r.sigma for r in results}):
        rows = rows_of(r for r in results if math.isclose(r.sigma, sigma))
        gaussian = next(row for row in rows if row.label == "gaussian")
        lines = [
            f"sigma {sigma:g}:",
            "",
            "| model | seeds | ACR, mean ± sd over seeds | ΔACR against the Gaussian LeNet, same images [95% paired t] "
            "| p (seeds, Welch) |",
            "|---|---|---|---|---|",
        ]
        for row in sorted(rows, key=lambda row: ORDER.index(model_name(row)) if model_name(row) in ORDER else 99):
            name = model_name(row)
            if row is gaussian:
                lines.append(f"| {name} | {len(row.results)} | {seeds_text(row)} | baseline | |")
                continue
            difference, _ = paired(row, gaussian)
            welch = seed_test(row.seed_values(), gaussian.seed_values())
            lines.append(f"| {name} | {len(row.results)} | {seeds_text(row)} | {difference} | {p_text(welch)} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


OBJECTIVES = {"mse": "MSE", "stability": "Stab", "classification": "classification"}


def model_name(row: Row) -> str:
    """A denoised-smoothing row in words: the classifier alone, or the denoiser's objective (MSE+Stab: fine-tuned)."""
    if row.label == "standard":
        return "LeNet trained without noise, no denoiser"
    if row.label == "gaussian":
        return "LeNet trained with Gaussian noise"
    objective = OBJECTIVES.get(str(row.first.hparams.get("objective")), str(row.first.hparams.get("objective")))
    start = row.first.hparams.get("init_objective")
    return f"+ DnCNN, {OBJECTIVES.get(str(start), start)}+{objective}" if start else f"+ DnCNN, {objective}"


ORDER = [
    "LeNet trained without noise, no denoiser",
    "+ DnCNN, MSE",
    "+ DnCNN, Stab",
    "+ DnCNN, MSE+Stab",
    "LeNet trained with Gaussian noise",
]


@fragment("embedded-mnist-threat-models")
def embedded_mnist_threat_models() -> str:
    """measurements: l1 with three noises at matched variance, l-infinity from l2, and the attack beside l2."""
    results = study_results("embedded_mnist_threat_models")
    parts = []
    l1 = [r for r in results if r.norm == "l1"]
    rows = rows_of(l1)
    gaussian = next(row for row in rows if row.first.noise == "gaussian")
    lines = [
        "l1, each noise at per-pixel standard deviation sigma = 0.5:",
        "",
        "| noise | seeds | l1 ACR, mean ± sd over seeds | ΔACR against Gaussian noise, same images [95% paired t] | "
        "p (seeds, Welch) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if row is gaussian:
            lines.append(f"| gaussian | {len(row.results)} | {seeds_text(row)} | baseline | |")
            continue
        difference, _ = paired(row, gaussian)
        welch = seed_test(row.seed_values(), gaussian.seed_values())
        lines.append(f"| {row.first.noise} | {len(row.results)} | {seeds_text(row)} | {difference} | {p_text(welch)} |")
    parts.append("\n".join(lines))
    parts.append(
        "l-infinity from l2 (Gaussian noise):\n\n"
        + report_tables([r for r in results if r.norm == "linf"], (0.0, 0.01, 0.02, 0.03, 0.04, 0.05), heading="#####")
    )
    parts.append(
        "l2, certified and attacked (`attack=smoothadv`):\n\n"
        + report_tables(
            [r for r in results if r.norm == "l2"],
            (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5),
            baseline="gaussian",
            sections=("results", "paired", "attack"),
            heading="#####",
        )
    )
    return "\n\n".join(parts)


# --- committed bench outputs --------------------------------------------------------------------------------------


def output_file(study: str, name: str) -> Path:
    """A committed output of a study: in its ``report/`` folder (the study layout), else beside its runs."""
    in_report = EXPERIMENTS / study / "report" / name
    return in_report if in_report.exists() else EXPERIMENTS / study / name


def summary_lines(path: Path) -> list[str]:
    """The summary lines a replay output ends with (one per design, the floor, the count of logs)."""
    lines = path.read_text().splitlines()
    return [line for line in lines if re.match(r"^(looks|betting|informed|adaptive|floor)\b.*: ", line)]


@fragment("sequential-replay")
def sequential_replay() -> str:
    """measurements: what sequential CERTIFY saves on the released logs (the bench's own summary lines)."""
    parts = []
    for name, goal in (
        ("table.txt", "the whole table (radii 0, 0.25, ... 2.5)"),
        ("radius_0.5.txt", "one radius, 0.5"),
    ):
        path = output_file("sequential_replay", name)
        body = "\n".join(f"- {line}" for line in summary_lines(path))
        parts.append(f"{goal} ([`{name}`](../{path.relative_to(ROOT).as_posix()})):\n\n{body}")
    return "\n\n".join(parts)


REPLAY_DESIGN = re.compile(
    r"^(?P<design>\w+): (?P<fewer>[\d.]+x) fewer samples \(median over (?P<logs>\d+) logs; (?P<low>[\d.]+x) to "
    r"(?P<high>[\d.]+x)\), (?P<share>[\d.]+) of the floor's saving \(median; (?P<share_low>[\d.]+) to "
    r"(?P<share_high>[\d.]+)\); .*by the 95% interval on (?P<within>\d+), .*lowest interval end (?P<lowest>[-+\d.]+) "
    r"points; largest false-certificate share (?P<false>[\d.]+)$"
)
REPLAY_FLOOR = re.compile(
    r"^floor (?P<what>\(Wald|within 0\.5 points).*?: (?P<body>(at least )?[\d.]+x \(median; .*?\))"
)
REPLAY_ROW = re.compile(
    r"^.{35}(?P<design>fixed n|looks|betting|informed|adaptive)\s.* at \S+\s+(?P<acr>[-+][\d.]+) \["
)


def replay_acr_loss(path: Path) -> dict[str, tuple[float, float]]:
    """Per design, the smallest and largest ACR loss against fixed n over the logs of a replay output (its d.ACR)."""
    losses: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        if match := REPLAY_ROW.match(line):
            losses.setdefault(match["design"], []).append(-float(match["acr"]))
    return {design: (min(values), max(values)) for design, values in losses.items() if design != "fixed n"}


@fragment("sequential-table")
def sequential_table() -> str:
    """sequential: each design's saving, its share of the Wald floor, accuracy and ACR loss (the replay's outputs)."""
    rows = [
        "| Goal | design | fewer samples than fixed n (median, range) | share of the floor (median, range) | "
        "accuracy within 0.5 points by the 95% interval (lowest interval end) | ACR lower by | "
        "false certificates (largest share; alpha = 0.001) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, goal in (("table.txt", "the whole table (0, 0.25, ..., 2.5)"), ("radius_0.5.txt", "one radius, 0.5")):
        path = output_file("sequential_replay", name)
        acr = replay_acr_loss(path)
        link = f"[{goal}](../{path.relative_to(ROOT).as_posix()})"
        for line in summary_lines(path):
            if design := REPLAY_DESIGN.match(line):
                d = design.groupdict()
                low, high = acr[d["design"]]
                rows.append(
                    f"| {link} | `{d['design']}` | {d['fewer']} ({d['low']}-{d['high']}) | {d['share']} "
                    f"({d['share_low']}-{d['share_high']}) | {d['within']} of {d['logs']} logs ({d['lowest']}) | "
                    f"{low:.3f}-{high:.3f} | {d['false']} |"
                )
            elif floor := REPLAY_FLOOR.match(line):
                label = "the floor" if floor["what"] == "(Wald" else "the floor within 0.5 points"
                rows.append(f"| {link} | {label} | {floor['body']} | | | | |")
    return "\n".join(rows)


@fragment("certify-throughput")
def certify_throughput() -> str:
    """performance: the users' path against the forward pass and Cohen's loop (the study's outputs, quoted whole)."""
    return benchmark_outputs("certify_throughput")


@fragment("training-throughput")
def training_throughput() -> str:
    """performance: each method's training against a plain PyTorch loop, per layout (the study's outputs, whole)."""
    return benchmark_outputs("training_throughput")


def benchmark_outputs(name: str) -> str:
    """A benchmark study's machine, then each ``report/*.txt`` quoted whole under the command that wrote it."""
    study = EXPERIMENTS / name
    card = yaml.safe_load((study / "card.yaml").read_text())
    parts = [f"On {card['machine'][0].lower()}{card['machine'][1:]}"]
    for path in sorted((study / "report").glob("*.txt")):
        command = next(c for c in card["commands"] if f"report/{path.name}" in c).split(" > ")[0]
        relative = path.relative_to(ROOT).as_posix()
        parts.append(f"`{command}` ([`{path.name}`](../{relative})):\n\n```\n{path.read_text().rstrip()}\n```")
    return "\n\n".join(parts)


@fragment("bench-outputs")
def bench_outputs() -> str:
    """measurements: the bench outputs committed as files, each quoted whole."""
    files = [
        path
        for pattern in ("training_cost_*.txt", "attack_cost.txt")
        for path in sorted([*EXPERIMENTS.glob(f"*/{pattern}"), *EXPERIMENTS.glob(f"*/report/{pattern}")])
    ]
    parts = []
    for path in files:
        relative = path.relative_to(ROOT)
        parts.append(f"[`{relative}`](../{relative}):\n\n```\n{path.read_text().rstrip()}\n```")
    return "\n\n".join(parts)


# --- the pages ----------------------------------------------------------------------------------------------------


def pages() -> list[Path]:
    """README.md and every docs/ page."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def regions(text: str) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of each region's body in ``text`` (the lines between its markers)."""
    found = []
    for opening in OPEN.finditer(text):
        start = opening.end() + 1
        end = text.find(CLOSE, start)
        if end < 0:
            raise ValueError(f"<!-- generated: {opening['name']} --> is never closed")
        found.append((opening["name"], start, end))
    return found


def fill(text: str, made: dict[str, str] | None = None) -> str:
    """``text`` with every region's body replaced by its fragment (``made`` caches fragments across pages)."""
    made = {} if made is None else made
    out, last = [], 0
    for name, start, end in regions(text):
        if name not in FRAGMENTS:
            raise ValueError(f"no fragment named {name!r} (known: {', '.join(sorted(FRAGMENTS))})")
        if name not in made:
            made[name] = FRAGMENTS[name]().rstrip("\n") + "\n"
        out += [text[last:start], made[name]]
        last = end
    return "".join(out) + text[last:]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or check, or list) the generated regions of every page; the exit status of the command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region differs")
    parser.add_argument("--list", action="store_true", help="print each region and its page")
    args = parser.parse_args(argv)
    made: dict[str, str] = {}
    stale = []
    for page in pages():
        text = page.read_text()
        if args.list:
            for name, _, _ in regions(text):
                print(f"{page.relative_to(ROOT)}: {name}")
            continue
        new = fill(text, made)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print(f"out of date with their records: {', '.join(map(str, stale))} (python tools/make_docs.py)")
        return 1
    if not args.check and not args.list:
        print(f"rewrote {', '.join(map(str, stale))}" if stale else "every generated region is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
