"""Rebuild ``rsbench/report/released/``: the field's released per-image certification logs, as data.

Usage (after fetching the repositories, e.g. ``git clone https://github.com/locuslab/smoothing``)::

    python -m rsbench.published.importer path/to/smoothing path/to/smoothing-catrs ...

Each path is a clone (work tree, ``.git`` folder or bare repository) of a repository with a card in
``released/sources.yaml``; which card is told by the card's pinned commit, which the clone must hold. Every log is read
at that commit (``git show <commit>:<path>``), whatever the clone's HEAD, and what its path says
(:func:`rsbench.published.paths.parse`) goes into ``index.csv``, one line per log: the repository, commit, path and
SHA-256 of the original file, what it certifies in rsbench's names, the images (count and subset rule), the protocol
(n0, n and the alpha the log's largest radius is consistent with) and the authors' wall clock (the median and the sum of
its ``time`` column). ``summary.csv`` holds each distinct file's numbers (ACR with its sd over images, the images
certified correctly at every radius of a 1/16 grid up to 4), so that a log rsbench may not ship still has a leaderboard
row with its intervals. A file byte-identical to one listed earlier (cards in their order) is listed with ``same_as``
naming it.

Where the repository's licence allows (its card's ``licence`` is not ``none``) the log is shipped: gzipped (no time
stamp or name in the header, so a rerun changes no byte) without its wall-clock column, with the repository's LICENSE
beside it (``released/<source>/LICENSE``; the CAT-RS logs keep their first layout, ``released/<dataset>/<method>/`` and
``released/LICENSE``). The CAT-RS authors' training logs (``log.txt`` beside a TSV) go into ``training_logs.csv``
and ``sigma_<s>.training.tsv.gz``, as :func:`rsbench.published.catalogue.training_curve` reads them.

Paths of sources not given keep their lines, so one repository can be re-imported alone.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import math
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rsbench.published.logs import Card, consistent_alpha, seconds, subset_rule, summary
from rsbench.published.paths import Parsed, parse
from rsbench.runs.datasets import dataset_info
from rsbench.runs.floor import CommandParser, error_line

TARGET = Path(__file__).resolve().parents[1] / "report" / "released"
COLUMNS = ["idx", "label", "predict", "radius", "correct"]
LEGACY = "catrs2023"  # the first source rsbench shipped: its files keep their layout (<dataset>/<method>/sigma_<s>)
REPORT_DATASETS = ("cifar10", "mnist", "fashion_mnist")  # the CAT-RS logs the report pairs with (released_logs())
NOT_SHIPPED = {
    # Left out of the package to keep it small (each still has its index line and numbers; a clone reads it): the
    # single-run ablations of SmoothMix (Appendix H) and of Consistency on MNIST (lambda and m sweeps).
    "jeong2021": re.compile(
        r"data/certify/(ablation/|mnist/smoothmix/smix_1\.0_(2_m\d/tau_(1|2)\.0|3_m\d/tau_(2|5)\.0|"
        r"4_m\d/tau_2\.0|8_m\d/tau_2\.0))"
    ),
    "jeong2020": re.compile(
        r"data/certify/mnist/consistency/cohen/(num_[48]/|num_2/lbd_(1|15|20|25|30|50)\.0/|"
        r"num_2/lbd_5\.0/eta_0\.5/noise_0\.25_0$)"
    ),
}
TRAINING_COLUMNS = {
    "epoch": "epoch",
    "lr": "lr",
    "train loss": "train_loss",
    "train acc": "train_acc",
    "testloss": "test_loss",
    "test acc": "test_acc",
}


def cards(folder: Path = TARGET) -> list[Card]:
    """The cards of ``sources.yaml``, in its order (the order that decides which of two identical files is listed)."""
    from rsbench.published.catalogue import source_cards  # (torch, through the report's loader: after parsing)

    raw = source_cards(folder)
    return [
        Card(
            name,
            c["repository"],
            c["commit"],
            str(c["licence"]),
            c["protocol"]["n0"],
            c["protocol"]["n"],
            c["protocol"]["alpha"],
        )
        for name, c in raw.items()
    ]


def git(repo: Path, *args: str) -> bytes:
    """Run git in ``repo`` (a work tree, a ``.git`` folder or a bare repository) and return its output."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def holds(repo: Path, commit: str) -> bool:
    """Whether the clone at ``repo`` has ``commit``."""
    done = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    return done.returncode == 0


def local_file(card: Card, parsed: Parsed) -> Path:
    """Where the shipped copy of a log goes under ``released/``."""
    name = f"sigma_{parsed.sigma:g}"
    if card.name == LEGACY:
        return Path(parsed.dataset) / parsed.method / f"{name}.tsv.gz"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", parsed.setting).strip("-")
    if parsed.arch != dataset_info(parsed.dataset).arch:
        name += f"_{parsed.arch}"
    if parsed.trained_sigma != parsed.sigma:
        name += f"_trained_{parsed.trained_sigma:g}"
    if parsed.split != "test":
        name += f"_{parsed.split}"
    if parsed.seed:
        name += f"_run_{parsed.seed}"
    return Path(card.name) / parsed.dataset / parsed.method / f"{f'{slug}_' if slug else ''}{name}.tsv.gz"


def write_gzipped(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` as a tab-separated file, gzipped reproducibly (no time stamp or name), at ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = frame.to_csv(sep="\t", index=False, lineterminator="\n").encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(text)


def training_log_facts(log: pd.DataFrame) -> dict[str, object]:
    """What one ``log.txt`` (read as a table) states.

    The epochs logged, each epoch's learning rate as logged (``first-last:lr;...``; the Jeong lineage logs
    ``scheduler.get_lr()``, which reads one epoch at each drop as twice dropped), the last epoch's noisy test
    accuracy (%) and the median seconds per epoch (3 significant digits).
    """
    runs: list[tuple[int, int, float]] = []
    for epoch, lr in zip(log["epoch"], log["lr"], strict=True):
        if runs and runs[-1][2] == lr and runs[-1][1] == epoch - 1:
            runs[-1] = (runs[-1][0], int(epoch), float(lr))
        else:
            runs.append((int(epoch), int(epoch), float(lr)))
    return {
        "first_epoch": int(log["epoch"].iloc[0]),
        "last_epoch": int(log["epoch"].iloc[-1]),
        "epochs_logged": len(log),
        "lr": ";".join(f"{a}-{b}:{lr:g}" if a != b else f"{a}:{lr:g}" for a, b, lr in runs),
        "last_test_acc": float(log["test acc"].iloc[-1]),
        "median_seconds_per_epoch": float(f"{log['time'].median():.3g}"),
    }


@dataclass
class Imported:
    """One log as read: its index line, its numbers and, if it ships, its table."""

    line: dict[str, Any]
    numbers: dict[str, Any]
    frame: pd.DataFrame


def import_source(repo: Path, card: Card) -> tuple[list[Imported], list[dict[str, Any]], dict[Path, bytes]]:
    """Every log of ``card`` in the clone at ``repo``: the logs, the CAT-RS training lines, and the training files."""
    commit = card.commit
    paths = git(repo, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
    listed = set(paths)
    logs: list[Imported] = []
    trainings: list[dict[str, Any]] = []
    curves: dict[Path, bytes] = {}
    for path in sorted(paths):
        parsed = parse(card.name, path)
        if parsed is None or f"{path}_o" in listed:  # a truncated copy beside the whole run (jeong2020)
            continue
        original = git(repo, "show", f"{commit}:{path}")
        frame = pd.read_csv(io.BytesIO(original), sep="\t")
        if frame.empty or "radius" not in frame.columns:
            continue
        frame = frame.sort_values("idx", kind="stable").reset_index(drop=True)
        times = seconds(frame["time"]) if "time" in frame.columns else np.array([math.nan])
        numbers = summary(frame)
        alpha, alpha_note = consistent_alpha(float(frame["radius"].max()), parsed.sigma, card)
        ships = card.licence != "none" and not (card.name in NOT_SHIPPED and NOT_SHIPPED[card.name].match(path))
        line = {
            "source": card.name,
            "repository": card.repository,
            "commit": commit,
            "path": path,
            "sha256": hashlib.sha256(original).hexdigest(),
            **{key: value for key, value in asdict(parsed).items() if key not in ("sigma", "trained_sigma")},
            "sigma": f"{parsed.sigma:g}",
            "trained_sigma": f"{parsed.trained_sigma:g}",
            "images": len(frame),
            "subset": subset_rule(frame["idx"].tolist(), parsed.dataset, parsed.split),
            "n0": card.n0,
            "n": card.n,
            "alpha": f"{alpha:g}",
            "alpha_note": alpha_note,
            "seconds_per_image": f"{np.median(times):.3g}",
            "certify_seconds": f"{np.sum(times):.0f}" if not np.isnan(times).all() else "",
            "report": card.name == LEGACY and parsed.dataset in REPORT_DATASETS,
            "file": local_file(card, parsed).as_posix() if ships else "",
            "same_as": "",
        }
        logs.append(Imported(line, numbers, frame[COLUMNS]))
        log_path = f"{path.rsplit('/', 1)[0]}/log.txt"
        if card.name == LEGACY and log_path in listed:
            text = git(repo, "show", f"{commit}:{log_path}").decode()
            if len(text.splitlines()) > 1:  # MNIST's logs hold the header only
                log = pd.read_csv(io.StringIO(text), sep="\t")
                curve = local_file(card, parsed).with_name(f"sigma_{parsed.sigma:g}.training.tsv.gz")
                buffer = log[list(TRAINING_COLUMNS)].rename(columns=TRAINING_COLUMNS)
                curves[curve] = buffer.to_csv(sep="\t", index=False, lineterminator="\n").encode()
                trainings.append(
                    {"method": parsed.method, "dataset": parsed.dataset, "sigma": f"{parsed.sigma:g}", "path": log_path}
                    | training_log_facts(log)
                    | {"file": curve.as_posix()}
                )
    return logs, trainings, curves


def mark_duplicates(lines: list[dict[str, Any]], order: Sequence[str]) -> None:
    """Set ``same_as`` (``repository:path`` of the first line with the same SHA-256, cards in ``order``) in place."""
    rank = {name: i for i, name in enumerate(order)}
    first: dict[str, dict[str, Any]] = {}
    for line in sorted(lines, key=lambda x: (rank[x["source"]], x["path"])):
        primary = first.setdefault(line["sha256"], line)
        if primary is not line:
            line["same_as"] = f"{primary['repository']}:{primary['path']}"
            line["file"] = ""


def main(argv: list[str] | None = None) -> int:
    """Import the cards held by the clones given; keep the other cards' lines; rewrite the index and summaries."""
    parser = CommandParser("python -m rsbench.published.importer", description=__doc__.splitlines()[0])
    parser.add_argument("clones", nargs="+", type=Path, help="clones of repositories with a card in sources.yaml")
    parser.add_argument(
        "--target", type=Path, default=TARGET, help="the released/ folder to write (default: rsbench's)"
    )
    args = parser.parse_args(argv)
    every = cards(args.target)
    found = _held_cards(args.clones, every)
    if found is None:
        return 2
    index_file, summary_file, training_file = (
        args.target / n for n in ("index.csv", "summary.csv", "training_logs.csv")
    )
    kept = _read(index_file)
    kept = [line for line in kept if line.get("source", LEGACY) not in found and "source" in line]
    imported: list[Imported] = []
    trainings: list[dict[str, Any]] = [] if LEGACY in found else _read(training_file)
    curves: dict[Path, bytes] = {}
    for clone, card in found.values():
        logs, training, curve = import_source(clone, card)
        imported += logs
        trainings += training
        curves.update(curve)
        print(f"{card.repository}@{card.commit[:7]}: {len(logs)} logs")
    lines = kept + [log.line for log in imported]
    order = [card.name for card in every]
    for line in lines:
        line["same_as"] = ""
    mark_duplicates(lines, order)
    files = [line["file"] for line in lines if line["file"]]
    if len(files) != len(set(files)):
        raise RuntimeError(f"two logs would ship as one file: {sorted({f for f in files if files.count(f) > 1})}")
    rank = {name: i for i, name in enumerate(order)}
    lines.sort(key=lambda x: (rank[x["source"]], _legacy_order(x)))
    numbers = {row["sha256"]: row for row in _read(summary_file)}
    for log in imported:
        numbers[log.line["sha256"]] = {"sha256": log.line["sha256"], **log.numbers}
        if log.line["file"]:
            write_gzipped(log.frame, args.target / log.line["file"])
    _write_licences(args.target, {line["source"] for line in lines if line["file"]} & set(found), found)
    for path, text in curves.items():
        with open(args.target / path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
            out.write(text)
    trainings.sort(key=lambda x: _legacy_order({"source": LEGACY, "path": x["path"], "sigma": x["sigma"]}))
    listed = {line["sha256"] for line in lines}
    _write(index_file, lines)
    _write(summary_file, [numbers[sha] for sha in dict.fromkeys(line["sha256"] for line in lines) if sha in listed])
    if trainings:
        _write(training_file, trainings)
    shipped = sum(1 for line in lines if line["file"])
    print(f"wrote {len(lines)} index lines ({shipped} shipped) to {args.target}")
    return 0


def _held_cards(clones: Sequence[Path], every: Sequence[Card]) -> dict[str, tuple[Path, Card]] | None:
    """Per card a clone holds (its pinned commit), the clone and the card.

    None, after printing the error, for a clone that holds none of the cards' commits.
    """
    found: dict[str, tuple[Path, Card]] = {}
    for clone in clones:
        held = [card for card in every if holds(clone, card.commit)]
        if not held:
            known = ", ".join(f"{c.repository}@{c.commit[:7]}" for c in every)
            error_line(f"{clone} holds none of the cards' commits ({known})")
            return None
        found.update({card.name: (clone, card) for card in held})
    return found


def _write_licences(target: Path, shipping: set[str], found: dict[str, tuple[Path, Card]]) -> None:
    """Each shipping source's LICENSE beside its logs (CAT-RS's at the top of ``released/``), from its clone."""
    for name in shipping:
        clone, card = found[name]
        licence = Path("LICENSE") if name == LEGACY else Path(name) / "LICENSE"
        (target / licence).parent.mkdir(parents=True, exist_ok=True)
        (target / licence).write_bytes(git(clone, "show", f"{card.commit}:LICENSE"))


def _legacy_order(line: dict[str, Any]) -> tuple[Any, ...]:
    """CAT-RS's lines in the order its first index had (dataset folder, sigma, method folder); others by path."""
    if line["source"] != LEGACY:
        return (line["path"],)
    parts = line["path"].split("/")
    folder = parts[3] if len(parts) == 5 else "cat-rs"  # data/mnist/noise_s/noise_s.tsv is CAT-RS
    return (parts[1], folder, float(line["sigma"]), line["path"])


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def _write(path: Path, table: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(table[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(table)


if __name__ == "__main__":
    sys.exit(main())
