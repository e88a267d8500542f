"""The leaderboard's entries: every published setting (its released logs, one per run) and every run a user names.

An entry is one setting: a method with one configuration, architecture, training data and sigma, certified under
one protocol on one set of images, with one or more runs (seeds). A published entry groups the released logs of a
card that differ only in the run id; a user's entry is a row of ``rsbench.report`` (runs grouped over seeds by
:func:`rsbench.report.rows.group_rows`). An entry has per-image records (``row``: shipped logs, logs read from a clone,
a user's runs) or, for a log rsbench may not ship and no clone was given, only its numbers (``summaries``), from
which its ACR and certified accuracy and their intervals still follow (the t interval of ACR needs the sd of the
per-image scores, which ``summary.csv`` keeps); pairing needs the records.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rsbench.methods.card import shown_name
from rsbench.published.catalogue import ReleasedLog, Summary, catalogue, source_cards, training_logs
from rsbench.report.load import Result
from rsbench.report.rows import Row, group_rows
from rsbench.runs.datasets import find_dataset, path_names

L2 = "l2 (gaussian noise)"


@dataclass(frozen=True)
class Cost:
    """What an entry cost, where known: certification seconds per image, training seconds, on which device."""

    certify_seconds_per_image: float = math.nan
    train_seconds: float = math.nan
    device: str = ""

    def text(self) -> str:
        """``8.1 s/img, 14.7 h train`` (the parts known, and the device where recorded), ``-`` when nothing is."""
        parts = []
        if not math.isnan(self.certify_seconds_per_image):
            parts.append(f"{self.certify_seconds_per_image:.3g} s/img")
        if not math.isnan(self.train_seconds):
            parts.append(f"{self.train_seconds / 3600:.3g} h train")
        text = ", ".join(parts) or "-"
        return f"{text} ({self.device})" if parts and self.device else text


@dataclass(frozen=True)
class Entry:
    """One row of the leaderboard.

    Attributes:
        name: unique on its board: label, source and sigma.
        label: the method and its configuration, as shown.
        kind: ``published`` or ``run``.
        source: the card id (``salman2019``) or ``run``.
        source_text: the card's short name, or the run folder.
        method, dataset, arch, sigma, threat: what it certifies.
        trained_sigma: the sigma the model was trained at.
        training: the training data, "" for the dataset's training set.
        subset, images: which images were certified and how many.
        n0, n, alpha: the protocol (None where unknown).
        seeds: the run ids (empty for one run without an id).
        row: the per-image records over seeds, None when only the numbers are known.
        summaries: per run, the numbers (published entries).
        logs: the released logs (published entries).
        cost: what it cost, where known.
        reference: where the data is (``repository@commit path`` of the first log, or the run folder).
        note: anything a reader must know (a duplicate in another repository, a non-shipped log).
    """

    name: str
    label: str
    kind: str
    source: str
    source_text: str
    method: str
    dataset: str
    arch: str
    sigma: float
    trained_sigma: float
    threat: str
    training: str
    subset: str
    images: int
    n0: int | None
    n: int | None
    alpha: float | None
    seeds: tuple[str, ...] = ()
    row: Row | None = field(default=None, repr=False)
    summaries: tuple[Summary, ...] = field(default=(), repr=False)
    logs: tuple[ReleasedLog, ...] = field(default=(), repr=False)
    cost: Cost = Cost()
    reference: str = ""
    note: str = ""

    @property
    def cap(self) -> float:
        """The largest radius the protocol can certify, sigma * Phi^-1(alpha^(1/n)) (inf when n or alpha is unknown)."""
        from rsbench.certify.algorithm.caps import fixed_n_cap

        return fixed_n_cap(self.sigma, int(self.n), float(self.alpha)) if self.n and self.alpha else math.inf

    @property
    def runs(self) -> int:
        """How many runs (seeds) the entry averages."""
        return len(self.row.results) if self.row is not None else max(len(self.summaries), 1)

    @property
    def indices(self) -> tuple[int, ...]:
        """The certified image indices (empty when only the numbers are known)."""
        return self.row.images if self.row is not None else ()

    @cached_property
    def index_set(self) -> frozenset[int]:
        """The certified image indices as a set (for finding the images two entries share)."""
        return frozenset(self.indices)


def published_entries(
    dataset: str, clones: Sequence[Path] = (), sources: Sequence[str] | None = None
) -> tuple[list[Entry], list[str]]:
    """The published entries of ``dataset`` (``sources``' only, if given), and notes on what they leave out.

    The notes say which logs could not be read per image. Logs certified on training images are left out (a note says
    so); logs byte-identical to one listed before are folded into it (its note names the copies).
    """
    cards = source_cards()
    every = [log for log in catalogue(dataset=dataset, duplicates=True) if sources is None or log.source in sources]
    copies: dict[str, list[ReleasedLog]] = {}
    for log in every:
        if log.same_as:
            copies.setdefault(log.same_as, []).append(log)
    groups, notes = _settings_of(every)
    entries = [_published_entry(logs, copies, cards, dataset, clones) for logs in groups.values()]
    unread = sum(len(logs) for logs in groups.values() if not all(log.located(clones) for log in logs))
    notes += _unreleased(cards, dataset, sources)
    if unread:
        names = sorted({f"{log.repository}" for group in groups.values() for log in group if not log.located(clones)})
        notes.append(
            f"{unread} logs are not shipped (their repository has no licence, or they were left out to keep rsbench "
            "small) and no clone holds them: their rows come from their numbers, "
            f"unpaired; clone {', '.join(names)} and pass clones=[path,...] to pair them"
        )
    return _named(entries), notes


def _settings_of(logs: Sequence[ReleasedLog]) -> tuple[dict[tuple[Any, ...], list[ReleasedLog]], list[str]]:
    """The logs of each published setting (the runs of one configuration), and a note per log left out.

    Copies (``same_as``) are left out silently (their first is listed); logs of training images with a note.
    """
    notes: list[str] = []
    groups: dict[tuple[Any, ...], list[ReleasedLog]] = {}
    for log in logs:
        if log.same_as:
            continue
        if log.split != "test":
            notes.append(f"left out: {log.reference} certifies {log.subset}, not test images")
            continue
        key = (log.source, log.method, log.setting, log.hparams, log.arch, log.sigma, log.trained_sigma, log.training)
        groups.setdefault(key, []).append(log)
    return groups, notes


def _published_entry(
    logs: Sequence[ReleasedLog],
    copies: dict[str, list[ReleasedLog]],
    cards: dict[str, dict[str, Any]],
    dataset: str,
    clones: Sequence[Path],
) -> Entry:
    """The entry of one published setting's logs (per-image records when every log can be read, else numbers)."""
    first = logs[0]
    readable = all(log.located(clones) for log in logs)
    row = Row(tuple(log.read(clones) for log in logs), ()) if readable else None
    copied = [c for log in logs for c in copies.get(f"{log.repository}:{log.path}", [])]
    note = f"also released as {'; '.join(f'{c.repository}:{c.path}' for c in copied)}" if copied else ""
    note = "; ".join(filter(None, [note, first.alpha_note, *_card_notes(cards, [*logs, *copied])]))
    return Entry(
        name="",
        label=_label(first, copied),
        kind="published",
        source=first.source,
        source_text=str(cards[first.source]["short"]),
        method=first.method,
        dataset=dataset,
        arch=first.arch,
        sigma=first.sigma,
        trained_sigma=first.trained_sigma,
        threat=L2,
        training=_short_training(first.training, dataset),
        subset=first.subset,
        images=first.images,
        n0=first.n0,
        n=first.n,
        alpha=first.alpha,
        seeds=tuple(log.seed for log in logs if log.seed),
        row=row,
        summaries=tuple(log.summary for log in logs if log.summary is not None),
        logs=tuple(logs),
        cost=_published_cost(logs),
        reference=f"{first.repository}@{first.commit[:7]} {first.path}" + (" ..." if len(logs) > 1 else ""),
        note=note,
    )


def _card_notes(cards: dict[str, dict[str, Any]], logs: Sequence[ReleasedLog]) -> list[str]:
    """What the logs' cards say about where these logs come from (``log_notes`` in ``sources.yaml``), once each."""
    found = [str(cards[log.source].get("log_notes", {}).get(log.path, "")) for log in logs]
    return list(dict.fromkeys(note for note in found if note))


def _unreleased(cards: dict[str, dict[str, Any]], dataset: str, sources: Sequence[str] | None) -> list[str]:
    """The rows of the sources' papers on ``dataset`` that no released log backs (``unreleased`` in the cards)."""
    return [
        f"no released log ({cards[name]['short']}, σ={float(row['sigma']):g}): {row['note']}"
        for name in cards
        if sources is None or name in sources
        for row in cards[name].get("unreleased", [])
        if row["dataset"] == dataset
    ]


def run_entries(paths: Iterable[Path], sigma: float | None = None, dataset: str | None = None) -> list[Entry]:
    """The user's runs (run or sweep folders, metrics.json files or certify TSVs), one entry per setting.

    A certify TSV carries no metadata: its sigma and dataset come from its path (``noise_0.25``, ``sigma_0.5``, a
    folder named after the dataset) or from ``sigma`` and ``dataset``.

    Raises:
        ReportError: a TSV whose path names no sigma (or no dataset) and none was given; the message says which key
            to pass.
    """
    from rsbench.report.load import find_results

    paths = list(paths)
    for path in paths:
        _check_tsv_path(path, sigma, dataset)
    results = find_results(paths, sigma=sigma, dataset=dataset)
    rows, _, _ = group_rows(results)
    entries = []
    for row in rows:
        first = row.first
        settings = " ".join(f"{k}={v}" for k, v in _run_settings(row))
        label = f"{shown_name(first.method)}{' ' + first.variant if first.variant else ''}"
        label += f" ({settings})" if settings else ""
        source = ", ".join(sorted({_run_name(r) for r in row.results}))
        entries.append(
            Entry(
                name="",
                label=label,
                kind="run",
                source="run",
                source_text=source,
                method=first.method,
                dataset=first.dataset,
                arch=first.arch,
                sigma=first.sigma,
                trained_sigma=first.sigma,
                threat=first.threat,
                training="",
                subset=_run_subset(first),
                images=len(row.images),
                n0=first.protocol.get("n0"),
                n=first.protocol.get("n"),
                alpha=first.protocol.get("alpha"),
                seeds=tuple("?" if r.seed is None else str(r.seed) for r in row.results)
                if len(row.results) > 1
                else (),
                row=row,
                cost=_run_cost(row.results),
                reference="; ".join(str(r.source) for r in row.results),
                note="" if first.sound else "NOT sound (data-dependent sigma)",
            )
        )
    return _named(entries)


_UNSET = object()


def _run_settings(row: Row) -> list[tuple[str, str]]:
    """The settings that set a row apart, as the run has them.

    A key the run did not override reads ``?`` in the row; the run's own config says what it was (``null`` for a key
    left at null, as one would type it to rerun: ``certify.max_images=null``); a key the run has no value for at all
    (a TSV) is left out rather than shown as ``?``.
    """
    from omegaconf import OmegaConf

    shown = []
    for key, value in row.stated_settings:
        if value == "?":
            config = row.first.config
            try:
                found = OmegaConf.select(config, key, default=_UNSET) if config is not None else _UNSET
            except Exception:  # an interpolation only a live Hydra run resolves
                found = _UNSET
            if found is not None:
                continue
            value = "null"
        shown.append((key, value))
    return shown


def _check_tsv_path(path: Path, sigma: float | None, dataset: str | None) -> None:
    """Refuse a certify TSV whose sigma or dataset is neither in its path nor given, naming the key to pass."""
    from rsbench.report.load import ReportError, sigma_from_path

    if not path.is_file() or path.name == "metrics.json":
        return
    if sigma is None and sigma_from_path(path) is None:
        raise ReportError(
            f"runs: {path} is a certify TSV whose path names no sigma (noise_0.25, sigma_0.5, sigma=1.0); "
            "pass sigma=<s>"
        )
    if dataset is None and not any(d in [p.lower() for p in path.parts] for d in path_names()):
        raise ReportError(
            f"runs: {path} is a certify TSV whose path names no dataset (a folder {', '.join(path_names())}); "
            "pass dataset=<name> (one dataset)"
        )


def _named(entries: list[Entry]) -> list[Entry]:
    """The entries with unique names: label, source and sigma, then the architecture, the training data, a number.

    The architecture is named when it is not the dataset's usual one, the training data when two entries would
    otherwise share a name (Salman et al.'s self-trained models with and without ImageNet32 pre-training), and a
    number (``#2``) only when nothing else tells them apart.
    """
    from dataclasses import replace

    def base(entry: Entry, training: bool) -> str:
        info = find_dataset(entry.dataset)
        arch = f", {entry.arch}" if info is not None and entry.arch != info.arch else ""
        data = f", {entry.training}" if training and entry.training else ""
        return f"{entry.label} [{entry.source_text}{arch}{data}, σ={entry.sigma:g}]"

    plain = [base(e, False) for e in entries]
    names = [base(e, plain.count(name) > 1) for e, name in zip(entries, plain, strict=True)]
    counts: dict[str, int] = {}
    named = []
    for entry, name in zip(entries, names, strict=True):
        if names.count(name) > 1:
            counts[name] = counts.get(name, 0) + 1
            name = f"{name} #{counts[name]}"
        named.append(replace(entry, name=name))
    return named


def _label(log: ReleasedLog, copies: Sequence[ReleasedLog] = ()) -> str:
    """The method and the configuration that sets it apart, in the papers' symbols (:func:`describe`).

    A log without a stated configuration takes the one of an identical copy that states it (CAT-RS's SmoothAdv logs
    are Salman et al.'s files).
    """
    label = shown_name(log.method)
    hparams, setting = log.hparams, log.setting
    for copy in copies:
        if not hparams and not setting and (copy.hparams or copy.setting):
            hparams, setting = copy.hparams, copy.setting
    detail = describe(hparams, setting)
    if detail:
        label += f" ({detail})"
    if not math.isnan(log.trained_sigma) and log.trained_sigma != log.sigma:
        label += f", trained at σ={log.trained_sigma:g}"
    return label


SYMBOLS = {"lbd": "λ", "eta": "η", "gamma": "γ", "beta": "β", "alpha": "α", "num_noise": "m", "mix_epsilon": "ε_mix"}


def describe(hparams: str, setting: str = "") -> str:
    """A configuration in the papers' symbols, from rsbench's hyperparameters and the authors' setting name.

    >>> describe("attack=pgd;num_steps=10;num_noise=4;epsilon=1")
    'PGD 10 steps, m=4, ε=1'
    >>> describe("num_noise=2;lbd=1;eta=0.5;adversarial=true;epsilon=2.00784;num_steps=10")
    'on SmoothAdv (PGD 10 steps, ε=512/255), m=2, λ=1, η=0.5'
    >>> describe("num_noise=1;attack=pgd;num_steps=2;epsilon=0.25098", "self_training/PGD_2steps/weight_0.5/eps_64")
    'PGD 2 steps, m=1, ε=64/255, self-training weight 0.5'
    """
    values = dict(item.split("=", 1) for item in hparams.split(";") if "=" in item)
    parts = []
    steps = values.pop("num_steps", None)
    epsilon = values.pop("epsilon", None)
    attack = values.pop("attack", "pgd" if values.get("adversarial") == "true" else None)
    radius = _epsilon(epsilon) if epsilon else ""
    if values.pop("adversarial", None) == "true":
        parts.append(f"on SmoothAdv (PGD {steps} steps{', ε=' + radius if radius else ''})")
    elif attack:
        name = attack.upper() if attack in ("pgd", "ddn") else attack
        parts.append(f"{name} {steps} step{'s' if steps != '1' else ''}")
        if radius:
            values["_epsilon"] = radius
    elif steps:
        values["T"] = steps
    if "num_noise" in values:
        parts.append(f"m={values.pop('num_noise')}")
    if "_epsilon" in values:
        parts.append(f"ε={values.pop('_epsilon')}")
    for key in ("lbd", "eta", "alpha", "gamma", "beta", "T", "mix_epsilon"):
        if key in values:
            parts.append(f"{SYMBOLS.get(key, key)}={values.pop(key)}")
    if values.pop("lbd_schedule", "") == "deferred":
        parts.append("deferred λ")
    if values.pop("one_step", "") == "true":
        parts.append("one-step adversary")
    parts += [f"{k}={v}" for k, v in values.items()]
    weight = re.search(r"self_training.*weight_([\d.]+)", setting)
    if weight:
        parts.append(f"self-training weight {weight.group(1)}")
    if setting.startswith("ablation/"):
        parts.insert(0, f"{setting.split('/')[1]} ablation")
    if not parts and setting and setting not in ("cohen", "replication"):
        parts.append(setting)  # the authors' name of a configuration rsbench cannot spell in its hyperparameters
    return ", ".join(parts)


def _epsilon(text: str) -> str:
    """An l2 attack radius as the papers write it.

    In 1/255 units where it is one (Salman et al.'s 64/255, 512/255), else as a number (``1``, Sun et al.'s ``0.25``).

    >>> _epsilon("0.25098"), _epsilon("2.00784"), _epsilon("1"), _epsilon("2"), _epsilon("0.25")
    ('64/255', '512/255', '1', '2', '0.25')
    """
    value = float(text)
    units = value * 255
    if float(value * 4).is_integer() or abs(units - round(units)) > 1e-3:
        return f"{value:g}"
    return f"{round(units)}/255"


def _short_training(training: str, dataset: str) -> str:
    """What was added to the dataset's own training set, in a few words ("" for nothing)."""
    from rsbench.published.paths import PRETRAINED, SELF_TRAINED

    info = find_dataset(dataset)
    if info is not None and training == info.training_set:
        return ""
    if training.startswith(PRETRAINED) and "self-training" in training:
        return "ImageNet32 pre-training + self-training"
    return {PRETRAINED: "ImageNet32 pre-training", SELF_TRAINED: "self-training (500K Tiny Images)"}.get(
        training, training
    )


def _published_cost(logs: Sequence[ReleasedLog]) -> Cost:
    """The authors' wall clock per image (mean of the logs' medians) and, from CAT-RS's training logs, training time.

    Their GPU is on the source's card (``sources.yaml``, ``gpu``) where they state it.
    """
    per_image = [log.seconds_per_image for log in logs if not math.isnan(log.seconds_per_image)]
    train = math.nan
    first = logs[0]
    if first.source == "catrs2023":
        trainings = training_logs()
        match = trainings[(trainings["method"] == first.method) & (trainings["dataset"] == first.dataset)]
        match = match[[math.isclose(float(s), first.sigma) for s in match["sigma"]]]
        if not match.empty:
            line = match.iloc[0]
            train = float(line["median_seconds_per_epoch"]) * int(line["epochs_logged"])
    return Cost(float(np.mean(per_image)) if per_image else math.nan, train)


def _run_name(result: Result) -> str:
    source = Path(result.source)
    return source.name if source.is_dir() else str(source)


def _run_subset(result: Result) -> str:
    """The rule of a run's images, when it is a regular one (``every 20th test image (500)``), else its digest."""
    from rsbench.published.logs import subset_rule

    size = result.protocol.get("test_size")
    if find_dataset(result.dataset) is None and not size:
        return f"{len(result.images):,} test images (subset {result.protocol.get('subset')})"
    return subset_rule(list(result.images), result.dataset, size=int(size) if size else None)


def _run_cost(results: Sequence[Result]) -> Cost:
    """From each run's ``metrics.json`` ``cost`` object; for older runs the sum of ``certify.tsv``'s ``time``."""
    per_image, train, devices = [], [], set()
    for result in results:
        folder = Path(result.source)
        metrics = _json(folder / "metrics.json") if folder.is_dir() else {}
        cost = metrics.get("cost") or {}
        images = cost.get("images") or len(result.images)
        seconds = cost.get("certify_seconds")
        if seconds is None:
            seconds = _time_sum(folder / "certify.tsv" if folder.is_dir() else folder)
        if seconds is not None and images:
            per_image.append(float(seconds) / images)
        if cost.get("train_seconds") is not None:
            train.append(float(cost["train_seconds"]))
        device = cost.get("device_name") or (metrics.get("environment") or {}).get("device_name")
        if device:
            devices.add(str(device))
    return Cost(
        float(np.mean(per_image)) if per_image else math.nan,
        float(np.mean(train)) if train else math.nan,
        ", ".join(sorted(devices)),
    )


def _json(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return content if isinstance(content, dict) else {}


def _time_sum(path: Path) -> float | None:
    """The sum of a certify TSV's ``time`` column in seconds (``0:00:01.5`` or seconds), None without one."""
    from rsbench.published.logs import seconds

    try:
        frame = pd.read_csv(path, sep="\t", usecols=["time"])
    except (OSError, ValueError):
        return None
    return float(np.nansum(seconds(frame["time"]))) if len(frame) else None
