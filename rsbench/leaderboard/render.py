"""A board as Markdown, CSV, LaTeX and a PNG.

Markdown: one table per sigma, the envelope, the Pareto front, each run against the field, the sources and notes. CSV:
every number. LaTeX: the tables with booktabs rules, as the report writes them. PNG: the certified-accuracy curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rsbench.leaderboard.board import Board, column
from rsbench.leaderboard.entries import Entry
from rsbench.published.catalogue import source_cards
from rsbench.report.render import Section, latex
from rsbench.report.render import markdown as sections_markdown
from rsbench.report.tables import estimate_cells, p_text, sigma_text

TITLES = {"cifar10": "CIFAR-10", "imagenet": "ImageNet", "mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}


def title(board: Board) -> str:
    """``CIFAR-10, l2 (gaussian noise)``."""
    return f"{TITLES.get(board.dataset, board.dataset)}, {board.threat}"


def frame(board: Board) -> pd.DataFrame:
    """Every number of the board, one line per entry (the CSV): the entry's card, ACR, accuracies, pairs, cost."""
    lines = []
    for entry in board.entries:
        numbers = board.numbers[entry.name]
        line: dict[str, Any] = {
            "entry": entry.name,
            "kind": entry.kind,
            "source": entry.source,
            "method": entry.method,
            "label": entry.label,
            "dataset": entry.dataset,
            "arch": entry.arch,
            "sigma": entry.sigma,
            "trained_sigma": entry.trained_sigma,
            "training": entry.training,
            "threat": entry.threat,
            "images": entry.images,
            "subset": entry.subset,
            "n0": entry.n0,
            "n": entry.n,
            "alpha": entry.alpha,
            "runs": entry.runs,
            "run_ids": " ".join(entry.seeds),
            "per_image": entry.row is not None,
            "acr": numbers.acr.value,
            "acr_low": numbers.acr.low,
            "acr_high": numbers.acr.high,
            "acr_sd_runs": numbers.acr_sd,
        }
        for r in board.settings.radii:
            estimate = numbers.accuracy[r]
            line |= {
                column(r): estimate.value,
                f"{column(r)}_low": estimate.low,
                f"{column(r)}_high": estimate.high,
                f"{column(r)}_sd_runs": numbers.accuracy_sd[r],
            }
        for prefix, pairs in (("vs_leader", board.versus_leader), ("vs_gaussian", board.versus_gaussian)):
            compared = pairs.get(entry.name, {})
            line[f"{prefix}"] = compared.get("against", "")
            keys = ["images", "d_acr", "d_acr_low", "d_acr_high", "p_acr"]
            keys += [f"{d}_{column(r)}" for r in board.settings.radii for d in ("d", "p")]
            for key in keys:
                line[f"{prefix}_{key}"] = compared.get(key, math.nan)
        line |= {
            "pareto": entry.name in board.pareto,
            "certify_seconds_per_image": entry.cost.certify_seconds_per_image,
            "train_seconds": entry.cost.train_seconds,
            "device": entry.cost.device,
            "reference": entry.reference,
            "note": entry.note,
        }
        lines.append(line)
    return pd.DataFrame(lines)


def sections(board: Board) -> list[Section]:
    """The board's tables: one per sigma, the envelope, the Pareto front, each run against the field, the sources."""
    out: list[Section] = []
    level = f"{100 * board.settings.confidence:g}%"
    numbers_frame = frame(board)
    for sigma in board.sigmas:
        table = _sigma_section(board, sigma, level, numbers_frame)
        out.append(table)
        shown_radii = [c for c in table.table.columns if c.startswith("r=")]
        paired = _paired_section(board, sigma, board.ranked(sigma), shown_radii)
        if paired is not None:
            out.append(paired)
    if not board.envelope.empty:
        out.append(_envelope_section(board, level))
    if board.pareto:
        out.append(_pareto_section(board, numbers_frame))
    for run in (e for e in board.entries if e.kind == "run"):
        versus = _run_section(board, run, f"run_{len(out)}", level)
        if versus is not None:
            out.append(versus)
    return out


def _sigma_section(board: Board, sigma: float, level: str, numbers_frame: pd.DataFrame) -> Section:
    """The table of the entries certified at ``sigma``, in their order, with the numbers of those entries."""
    ranked = board.ranked(sigma)
    shown = pd.DataFrame([_row(board, i + 1, entry) for i, entry in enumerate(ranked)])
    shown = shown.drop(columns=[c for c in ("training", "note") if (shown[c] == "").all()])
    shown = shown.drop(columns=[c for c in shown.columns if c.startswith("r=") and (shown[c] == "-").all()])
    leader = board.leader.get(sigma)
    caption = (
        f"Entries certified at σ = {sigma_text(sigma)}, best ACR first. ACR: mean of correct × radius over the "
        f"images [{level} {'t' if board.settings.acr_interval == 't' else 'BCa bootstrap'} interval over the "
        f"images]; r = ...: certified accuracy (%) at that radius [{level} Clopper-Pearson interval] ('-': "
        "beyond the largest radius the entry's protocol can certify, sigma * Phi^-1(alpha^(1/n)); radii beyond "
        "every entry's are left out); with several runs the mean ± the sd over runs, the interval being that of "
        "one run with the mean count. Order: best ACR first, except that an entry certified on a subset of "
        "another's images goes below the last entry with at least its ACR on its images (the paired comparison); "
        "entries on images neither holds are ordered as published. "
        + (
            f"ΔACR vs best: paired on the images both certified against {leader} (the best published entry of "
            f"this σ with per-image records trained on the dataset's own training set), with its {level} paired t "
            "interval; '-' where the two share no image or an entry has no per-image records. "
            if leader
            else ""
        )
        + "‡: not shipped (its repository has no licence, or a single-run ablation left out to keep rsbench "
        "small): its numbers only, unpaired unless clones=[path] "
        "gives a clone. cost: the authors' certification wall clock per image on their GPU (the source's card "
        "names it where they do) and training time where logged; for runs, metrics.json's cost (or the sum of "
        "certify.tsv's time) and the device."
    )
    names = set(e.name for e in ranked)
    numbers = numbers_frame[numbers_frame["entry"].isin(names)]
    return Section(f"sigma_{sigma:g}", f"σ = {sigma_text(sigma)}", shown, caption, numbers)


def _pareto_section(board: Board, numbers_frame: pd.DataFrame) -> Section:
    """The Pareto front over the radii: its entries by sigma and ACR, their rows and point estimates."""
    front = [e for e in board.entries if e.name in board.pareto]
    front.sort(key=lambda e: (e.sigma, -board.numbers[e.name].acr.value))
    shown = pd.DataFrame(
        {
            "entry": [e.name for e in front],
            "row": [board.position(e.name) for e in front],
            "ACR": [f"{board.numbers[e.name].acr.value:.3f}" for e in front],
            **{
                f"r={r:g}": [
                    "-" if r > e.cap * (1 + 1e-9) else _percent(board.numbers[e.name].accuracy[r].value) for e in front
                ]
                for r in board.settings.radii
            },
        }
    )
    return Section(
        "pareto",
        "Pareto front over the radii",
        shown,
        "The entries that no other entry matches or beats at every radius of the table and beats at one "
        "(point estimates): the trade-off between small and large radii that one ACR hides (Sun et al. 2025).",
        numbers_frame[numbers_frame["pareto"]],
    )


def _run_section(board: Board, run: Entry, name: str, level: str) -> Section | None:
    """A user's run against every published entry of its sigma (None when it shares images with none)."""
    lines = [line for line in board.runs_against_field if line["run"] == run.name]
    same_sigma = [line for line in lines if math.isclose(line["sigma"], run.sigma)]
    if not same_sigma:
        return None
    same_sigma.sort(key=lambda line: -board.numbers[line["against"]].acr.value)
    shown = pd.DataFrame([_versus(board, line) for line in same_sigma])
    return Section(
        name,
        f"{run.name} against the field",
        shown,
        f"The run against every published entry of its σ on the images both certified: ΔACR (run minus "
        f"entry) with its {level} paired t interval and p; Δ r: certified accuracy difference in points "
        "with McNemar's exact p (paired t over the images with several runs). Every σ is in the CSV.",
        pd.DataFrame(lines),
    )


def _paired_section(board: Board, sigma: float, ranked: Sequence[Entry], shown_radii: Sequence[str]) -> Section | None:
    """Per radius, each entry of ``sigma`` against the best one (the pairs of the ΔACR column): Δ points, McNemar p."""
    leader = board.leader.get(sigma)
    lines = []
    for rank, entry in enumerate(ranked, start=1):
        compared = board.versus_leader.get(entry.name)
        if not compared:
            continue
        cells = {
            "#": str(rank),
            "entry": _entry_cell(entry),
            "source": entry.source_text,
            "images": f"{compared['images']:,}",
        }
        cells["ΔACR (p)"] = f"{compared['d_acr']:+.3f} ({p_text(compared['p_acr'])})"
        for name in shown_radii:
            r = float(name.removeprefix("r="))
            key = f"d_{column(r)}"
            beyond = r > min(entry.cap, _cap_of(board, str(compared["against"]))) * (1 + 1e-9)
            value = compared.get(key, math.nan)
            cells[f"Δ {name} (p)"] = (
                "-" if beyond or pd.isna(value) else f"{100 * value:+.1f} ({p_text(compared[f'p_{column(r)}'])})"
            )
        lines.append(cells)
    if not lines or leader is None:
        return None
    caption = (
        f"Each entry of σ = {sigma_text(sigma)} minus {leader} ('best' in the table above), on the images both "
        "certified: ΔACR with its paired t p, and per radius the difference of certified accuracy in points with "
        "McNemar's exact p (paired t over the images of the run-averaged indicators when an entry has several runs); "
        "'-': beyond the radius either protocol can certify. The same pairs against a Gaussian entry of the σ and "
        "architecture are in the CSV (vs_gaussian_*)."
    )
    numbers = pd.DataFrame(
        [{"entry": e.name, **board.versus_leader[e.name]} for e in ranked if e.name in board.versus_leader]
    )
    title = f"σ = {sigma_text(sigma)}: paired with the best, per radius"
    return Section(f"sigma_{sigma:g}_paired", title, pd.DataFrame(lines), caption, numbers)


def _cap_of(board: Board, name: str) -> float:
    return next(e.cap for e in board.entries if e.name == name)


def _envelope_section(board: Board, level: str) -> Section:
    """The envelope: per radius the best entry that can certify it, where its row is, and the entries tied with it."""
    env = board.envelope
    entries = [
        name + (f" (tied with {tied})" if tied else "") for name, tied in zip(env["entry"], env["tied"], strict=True)
    ]
    rows = [row + (f"; {tied}" if tied else "") for row, tied in zip(env["row"], env["tied_rows"], strict=True)]
    shown = pd.DataFrame(
        {
            "radius": [f"{r:g}" for r in env["radius"]],
            "best certified accuracy (%)": [
                f"{100 * a:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]"
                for a, lo, hi in zip(env["accuracy"], env["low"], env["high"], strict=True)
            ],
            "entry": entries,
            "row": rows,
        }
    )
    caption = (
        f"At each radius the highest certified accuracy of any entry of any σ whose protocol can certify that radius, "
        f"with its {level} Clopper-Pearson interval; row: the entry's line in its σ's table. Entries with the same "
        "accuracy tie (the one with the most images is named first). Entries certified on different images (all test "
        "images, every 20th, every 100th) are compared as published."
    )
    return Section("envelope", "Best certified accuracy per radius (the envelope)", shown, caption, env)


def sources_section(board: Board) -> Section | None:
    """The cards of the sources on the board: paper, repository@commit, licence, whether the logs ship."""
    cards = source_cards()
    used = sorted({e.source for e in board.entries if e.kind == "published"}, key=list(cards).index)
    if not used:
        return None
    lines = []
    for name in used:
        card = cards[name]
        logs = [log for e in board.entries if e.source == name for log in e.logs]
        lines.append(
            {
                "source": card["short"],
                "paper": card["paper"],
                "repository@commit": f"{card['repository']}@{card['commit'][:7]}",
                "licence": card["licence"],
                "logs": f"{len(logs)} ({sum(log.shipped for log in logs)} shipped)",
                "protocol": "n0={n0}, n={n:,}, α={alpha:g}".format(**card["protocol"]),
            }
        )
    shown = pd.DataFrame(lines)
    caption = (
        "Each source's card is in rsbench/report/released/sources.yaml and each log's line (path, SHA-256, subset, "
        "protocol, wall clock) in index.csv. Logs of repositories without a licence are not shipped: their rows come "
        "from their numbers (summary.csv); pass a clone (clones=[path]) to pair them."
    )
    return Section("sources", "Sources", shown, caption, shown)


def markdown(board: Board, command: str) -> str:
    """The board's page: a heading, what it is and how it was made, then the tables and the notes."""
    published = [e for e in board.entries if e.kind == "published"]
    runs = [e for e in board.entries if e.kind == "run"]
    head = [
        f"# Leaderboard: {title(board)}",
        "",
        f"Generated by `{command}` from the released per-image certification logs rsbench indexes "
        f"(rsbench/report/released/): {len(published)} published entries"
        + (f" and {len(runs)} run{'s' if len(runs) != 1 else ''}" if runs else "")
        + f" at {len(board.sigmas)} noise levels. Do not edit: regenerate it.",
        "",
    ]
    if any(e.name in board.pareto for e in board.entries):
        head += ["![certified accuracy against radius](" + f"{board.dataset}.png)", ""]
    tables = sections(board)
    cards = sources_section(board)
    notes = list(board.notes) + [f"{e.name}: {e.note}" for e in board.entries if e.note]
    return "\n".join(head) + "\n" + sections_markdown([*tables, *([cards] if cards else [])], notes)


def write(board: Board, out: Path, command: str, plot: bool = True) -> list[Path]:
    """Write ``<dataset>.md``, ``<dataset>.csv``, ``<dataset>.tex``, ``<dataset>_runs.csv`` and the PNG into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stem = board.dataset if board.threat == "l2 (gaussian noise)" else f"{board.dataset}_{board.threat.split()[0]}"
    written = [out / f"{stem}.md", out / f"{stem}.csv", out / f"{stem}.tex"]
    written[0].write_text(markdown(board, command))
    frame(board).to_csv(written[1], index=False)
    written[2].write_text(latex(sections(board)))
    if board.runs_against_field:
        path = out / f"{stem}_runs.csv"
        pd.DataFrame(board.runs_against_field).to_csv(path, index=False)
        written.append(path)
    if plot:
        from rsbench.leaderboard.plot import plot_board

        written.append(plot_board(board, out / f"{stem}.png"))
    return written


def _row(board: Board, rank: int, entry: Entry) -> dict[str, str]:
    numbers = board.numbers[entry.name]
    runs = entry.runs
    cells: dict[str, str] = {
        "#": str(rank),
        "entry": _entry_cell(entry),
        "source": entry.source_text
        + (f", {entry.arch}" if entry.arch not in ("cifar_resnet110", "resnet50", "lenet") else ""),
        "training": entry.training,
        "images": _compact_subset(entry.subset),
        "runs": str(runs),
    }
    radii, accuracy = board.settings.radii, numbers.accuracy
    accuracies = {r: (accuracy[r].value, numbers.accuracy_sd[r], accuracy[r].low, accuracy[r].high) for r in radii}
    acr = (numbers.acr.value, numbers.acr_sd, numbers.acr.low, numbers.acr.high)
    cells |= estimate_cells(acr, accuracies, lambda r: r > entry.cap * (1 + 1e-9), unknown="?", sd_digits=(4, 2))
    compared = board.versus_leader.get(entry.name)
    if board.leader.get(entry.sigma) == entry.name:
        cells["ΔACR vs best"] = "best"
    elif compared:
        cells["ΔACR vs best"] = (
            f"{compared['d_acr']:+.3f} [{compared['d_acr_low']:+.3f}, {compared['d_acr_high']:+.3f}]"
            + (f" on {compared['images']:,}" if compared["images"] != entry.images else "")
        )
    else:
        cells["ΔACR vs best"] = "-"
    cells["n, α"] = f"{entry.n:,}, {entry.alpha:g}" if entry.n and entry.alpha else "?"
    cells["cost"] = entry.cost.text()
    cells["note"] = "trained at σ=" + f"{entry.trained_sigma:g}" if entry.trained_sigma != entry.sigma else ""
    return cells


def _entry_cell(entry: Entry) -> str:
    """The entry's label as its table shows it: a run in bold, an entry without per-image records marked ‡."""
    return f"**{entry.label}** (your run)" if entry.kind == "run" else entry.label + ("" if entry.row else " ‡")


def _versus(board: Board, line: dict[str, Any]) -> dict[str, str]:
    cells = {
        "published entry": line["against"],
        "images": f"{line['images']:,}",
        "ΔACR (p)": (
            f"{line['d_acr']:+.3f} [{line['d_acr_low']:+.3f}, {line['d_acr_high']:+.3f}] ({p_text(line['p_acr'])})"
        ),
    }
    for r in board.settings.radii:
        key = f"d_{column(r)}"
        if key in line and not pd.isna(line[key]):
            cells[f"Δ r={r:g} (p)"] = f"{100 * line[key]:+.1f} ({p_text(line[f'p_{column(r)}'])})"
    return cells


def _percent(value: float) -> str:
    return "?" if math.isnan(value) else f"{100 * value:.1f}"


def _compact_subset(subset: str) -> str:
    """``every 20th test image (500)`` as ``every 20th (500)``, ``all 10,000 test images`` as ``all 10,000``."""
    for words in (" test images", " test image", " validation images", " validation image"):
        subset = subset.replace(words, "")
    return subset


def latex_tables(boards: Sequence[Board]) -> str:
    """Every board's tables as LaTeX."""
    return "\n".join(latex(sections(board)) for board in boards)
