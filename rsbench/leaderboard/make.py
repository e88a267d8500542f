"""Build the boards (published entries and the user's runs, by dataset and threat model) and write them or the pages.

Python API::

    from rsbench.leaderboard.make import make_boards
    boards = make_boards(["cifar10"], runs=["outputs/my_run"], clones=["../smoothing"])
    boards[0].numbers[boards[0].entries[0].name].acr
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from rsbench.leaderboard.board import OTHER_RADII, STANDARD_RADII, Board, Settings, build
from rsbench.leaderboard.entries import L2, Entry, published_entries, run_entries
from rsbench.report.stats import MeanInterval

log = logging.getLogger("rsbench.leaderboard")

PUBLISHED = ("cifar10", "imagenet", "mnist", "fashion_mnist")
PAGES_COMMAND = "python -m rsbench.leaderboard pages=docs/leaderboard"


def make_boards(
    datasets: Sequence[str] | None = None,
    *,
    runs: Sequence[Path | str] = (),
    clones: Sequence[Path | str] = (),
    radii: Sequence[float] | None = None,
    confidence: float = 0.95,
    ci_method: str = "beta",
    acr_interval: MeanInterval = "t",
    sigma: float | None = None,
) -> list[Board]:
    """One board per dataset and threat model: the published entries and the runs of that dataset.

    Args:
        datasets: the datasets (None: every dataset with published entries, and those of the runs).
        runs: run or sweep folders, metrics.json files or certify TSVs.
        clones: clones of repositories whose logs rsbench does not ship (read per image, SHA-256 checked).
        radii: certified accuracy at these radii (default: the dataset's standard radii).
        confidence: the coverage of every interval.
        ci_method: the binomial interval of certified accuracy (statsmodels; ``beta``: Clopper-Pearson).
        acr_interval: the interval of ACR over the images, ``t`` or ``bootstrap`` (``rsbench.report.stats``).
        sigma: the noise level of certify TSVs in ``runs`` whose path names none (their dataset, when their path
            names none, is the one dataset of ``datasets``).
    """
    tsv_dataset = datasets[0] if datasets and len(datasets) == 1 else None
    mine = run_entries([Path(p) for p in runs], sigma, tsv_dataset) if runs else []
    wanted = list(datasets) if datasets else list(PUBLISHED) + sorted({e.dataset for e in mine} - set(PUBLISHED))
    for entry in mine:
        if entry.dataset not in wanted:
            log.warning("%s certifies %s, not %s: not on these boards", entry.name, entry.dataset, ", ".join(wanted))
    boards = []
    for dataset in wanted:
        published, notes = published_entries(dataset, [Path(c) for c in clones]) if dataset in PUBLISHED else ([], [])
        own = [e for e in mine if e.dataset == dataset]
        settings = Settings(
            tuple(radii) if radii else STANDARD_RADII.get(dataset, OTHER_RADII), confidence, ci_method, acr_interval
        )
        threats = [L2, *sorted({e.threat for e in own} - {L2})]
        for threat in threats:
            entries: list[Entry] = [e for e in published if e.threat == threat] + [e for e in own if e.threat == threat]
            if entries:
                boards.append(build(entries, dataset, threat, settings, notes if threat == L2 else ()))
    return boards


def write_pages(folder: Path, plot: bool = True) -> list[Path]:
    """The published boards of every dataset as ``<dataset>.md`` (and ``.png``) in ``folder``: the docs pages."""
    from rsbench.leaderboard.render import markdown

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for board in make_boards(PUBLISHED):
        page = folder / f"{board.dataset}.md"
        page.write_text(markdown(board, PAGES_COMMAND))
        written.append(page)
        if plot:
            from rsbench.leaderboard.plot import plot_board

            written.append(plot_board(board, folder / f"{board.dataset}.png"))
    return written
