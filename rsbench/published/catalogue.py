"""The field's released per-image certification logs, as data: the ones rsbench ships and the cards of all of them.

``released/sources.yaml`` (next to this module) has one card per repository that released logs: the paper, the
repository and the commit read, its licence, the protocol it documents, the GPU where stated, and what it states
about training data, subsets and cost. ``released/index.csv`` lists every log: the repository, commit and path it was
taken from, the SHA-256 of the original file, what it certifies in rsbench's names (method, the authors' setting and
the hyperparameters in rsbench's names, run id, dataset, architecture, sigma, the sigma the model was trained at,
training data), the images (count and subset rule), the protocol (n0, n, alpha: the alpha its largest radius is
consistent with), the authors' wall clock (the median of the ``time`` column per image, and its sum) and the file under
``released/`` (a gzipped Cohen-format TSV, ``time`` column dropped) where the licence lets rsbench ship it. A log
byte-identical to one listed before it names that one in ``same_as``. ``summary.csv`` holds every distinct file's
numbers (by SHA-256): ACR and the sd of the per-image scores, and the images certified correctly at every radius of a
1/16 grid up to 4, so a log that is not shipped still has its ACR and certified accuracy with their intervals.
``training_logs.csv`` summarises the CAT-RS authors' training logs and names their copies
(``sigma_<s>.training.tsv.gz``: the authors' ``log.txt`` per epoch without its wall clock, :func:`training_curve`).
``python -m rsbench.published.importer <clones...>`` rebuilds the folder (:mod:`rsbench.published`: this room).

Licences: the CAT-RS (alinlab/smoothing-catrs), SmoothAdv (Hadisalman/smoothing-adversarial), Consistency
(jh-jeong/smoothing-consistency) and SmoothMix (jh-jeong/smoothmix) repositories are MIT-licensed: their logs ship
with their LICENSE (``released/LICENSE`` for CAT-RS, ``released/<source>/LICENSE`` for the others). Cohen et al.'s
(locuslab/smoothing) and Sun et al.'s (eth-sri/acr-weakness) repositories carry no licence: their logs are not
shipped; :meth:`ReleasedLog.read` reads them from a clone by path and checks the SHA-256 against the index.

:func:`released_logs` keeps its first meaning, the 44 CAT-RS logs of CIFAR-10, MNIST and Fashion-MNIST that the
report pairs rsbench's rows with (``--against-released``) and the replay benchmark replays; :func:`catalogue` is every
log, shipped or not.
"""

from __future__ import annotations

import functools
import hashlib
import math
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from rsbench.published.paths import Parsed
from rsbench.report.load import ReportError, Result, read_cohen_tsv

if TYPE_CHECKING:  # importlib.resources.abc is Python 3.11+; annotations only
    from importlib.resources.abc import Traversable


@dataclass(frozen=True)
class Summary:
    """A log's numbers without its per-image rows (``summary.csv``).

    Attributes:
        images: certified images.
        correct: images predicted correctly (radius 0 or more).
        abstained: images where CERTIFY abstained.
        acr: the mean of correct x radius over the images.
        acr_sd: the sample sd of correct x radius (for the t interval of ACR).
        largest_radius: the largest radius in the log.
        counts: (radius, images certified correctly at that radius or more) on the grid 0, 1/16, ..., 4.
    """

    images: int
    correct: int
    abstained: int
    acr: float
    acr_sd: float
    largest_radius: float
    counts: tuple[tuple[float, int], ...] = field(repr=False)

    def certified(self, radius: float) -> int | None:
        """Images certified correctly at ``radius`` or more; None for a radius off the grid."""
        for grid, count in self.counts:
            if math.isclose(grid, radius, abs_tol=1e-9):
                return count
        return None


@dataclass(frozen=True, kw_only=True)
class ReleasedLog(Parsed):
    """One released log: where it came from, what it certifies, its numbers, and the file rsbench ships (if any).

    What its path says it certifies (method, variant, dataset, arch, sigma, trained_sigma, setting, hparams, seed,
    training, split) are the fields of :class:`~rsbench.published.paths.Parsed`, in rsbench's names.

    Attributes:
        repository: ``owner/name`` on GitHub.
        commit: the commit the file was read at.
        path: the file's path in that repository.
        images: the number of certified images.
        n0, n, alpha: the certification protocol (alpha: the one its largest radius is consistent with).
        seconds_per_image: the median of the original's ``time`` column: the authors' wall clock per image (their
            GPU), for estimating what certifying costs on one.
        file: the shipped copy, None where the licence does not let rsbench ship it.
        source: its card in ``sources.yaml``.
        sha256: of the original file.
        subset: which images, as a rule (``every 20th test image (500)``).
        alpha_note: why alpha differs from the card's, if it does.
        certify_seconds: the sum of the ``time`` column (nan where the log has none).
        report: the report pairs rows with it and the replay benchmark replays it (:func:`released_logs`).
        same_as: ``repository:path`` of an identical file listed before it, else "".
        summary: its numbers.
    """

    repository: str
    commit: str
    path: str
    images: int
    n0: int
    n: int
    alpha: float
    seconds_per_image: float
    file: Path | None
    source: str = ""
    sha256: str = ""
    subset: str = ""
    alpha_note: str = ""
    certify_seconds: float = math.nan
    report: bool = False
    same_as: str = ""
    summary: Summary | None = field(default=None, repr=False)

    @property
    def reference(self) -> str:
        """``owner/name@commit path``: enough to find the original file."""
        return f"{self.repository}@{self.commit[:7]} {self.path}"

    @property
    def shipped(self) -> bool:
        """Whether rsbench ships the per-image rows."""
        return self.file is not None

    def read(self, clones: Iterable[Path] = ()) -> Result:
        """The log as a report result (method, dataset, sigma and protocol from the index).

        A shipped log is read from the package; any other from the first of ``clones`` (clones of its repository:
        work trees, ``.git`` folders or bare repositories) that holds the file with its SHA-256: the work tree's
        file at ``path``, else ``git show <commit>:<path>``. Read once per process (per log and clones): the result
        is shared, so treat it (its ``records`` frame too) as read-only.

        Raises:
            ReportError: the log is not shipped and no clone holds it (the message says which repository to clone).
        """
        return _read_released(self, tuple(Path(c) for c in clones) if not self.shipped else ())

    def located(self, clones: Iterable[Path]) -> bool:
        """Whether the log can be read per image: shipped, or held by one of ``clones`` with its SHA-256."""
        return self.shipped or _original(self, tuple(Path(c) for c in clones)) is not None


@functools.cache
def _read_released(log: ReleasedLog, clones: tuple[Path, ...]) -> Result:
    if log.file is not None:
        result = _as_result(log, log.file)
    else:
        original = _original(log, clones)
        if original is None:
            raise ReportError(
                f"{log.reference} is not shipped with rsbench (its repository has no licence that allows it); "
                f"clone https://github.com/{log.repository} and pass the clone (clones=[path]) to read it per image"
            )
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / "log.tsv"
            copy.write_bytes(original)
            result = _as_result(log, copy)
    return result


def _as_result(log: ReleasedLog, path: Path) -> Result:
    result = read_cohen_tsv(path, label=log.method, sigma=log.sigma, dataset=log.dataset, n=log.n, alpha=log.alpha)
    protocol = {**result.protocol, "n0": log.n0}
    trained = log.trained_sigma
    variant = "" if math.isnan(trained) or trained == log.sigma else f"trained at sigma {trained:g}"
    return replace(result, arch=log.arch, protocol=protocol, source=log.file or Path(log.path), variant=variant)


@functools.cache
def _original(log: ReleasedLog, clones: tuple[Path, ...]) -> bytes | None:
    """The original file from the first clone that holds it with the index's SHA-256, else None."""
    for clone in clones:
        candidates = []
        if (clone / log.path).is_file():
            candidates.append((clone / log.path).read_bytes())
        shown = subprocess.run(["git", "-C", str(clone), "show", f"{log.commit}:{log.path}"], capture_output=True)
        if shown.returncode == 0:
            candidates.append(shown.stdout)
        for content in candidates:
            if hashlib.sha256(content).hexdigest() == log.sha256:
                return content
    return None


def catalogue(
    *,
    dataset: str | None = None,
    source: str | None = None,
    method: str | None = None,
    sigma: float | None = None,
    duplicates: bool = False,
    report: bool = False,
) -> list[ReleasedLog]:
    """Every released log with a card, shipped or not, in the index's order, keeping those that match every argument.

    Args:
        dataset: keep this dataset's logs only.
        source: keep this card's logs only (``cohen2019``, ...).
        method: keep this method's logs only.
        sigma: keep the logs certified at this sigma only.
        duplicates: also the logs byte-identical to one listed before them (``same_as``).
        report: only the logs the report pairs rows with and the replay benchmark replays (``ReleasedLog.report``).
    """
    return [
        log
        for log in _index()
        if (dataset is None or log.dataset == dataset)
        and (source is None or log.source == source)
        and (method is None or log.method == method)
        and (sigma is None or math.isclose(log.sigma, sigma))
        and (duplicates or not log.same_as)
        and (log.report or not report)
    ]


def released_logs(
    *, dataset: str | None = None, method: str | None = None, sigma: float | None = None
) -> list[ReleasedLog]:
    """The CAT-RS logs the report pairs with and the replay benchmark replays, keeping those that match every argument.

    These are the 44 logs of the CAT-RS authors' CIFAR-10, MNIST and Fashion-MNIST tables (all shipped), in the
    index's order: :func:`catalogue` with ``report=True``.
    """
    return catalogue(dataset=dataset, method=method, sigma=sigma, duplicates=True, report=True)


def source_cards(folder: Traversable | None = None) -> dict[str, dict[str, Any]]:
    """The cards of ``sources.yaml``, in its order: per source, its paper, repository, commit, licence, protocol, gpu.

    ``folder`` is the released data's folder: by default the shipped one; the importer reads its target's.
    """
    with (folder or _released_folder()).joinpath("sources.yaml").open() as file:
        cards: dict[str, dict[str, Any]] = yaml.safe_load(file)
    return cards


@functools.cache
def _index() -> tuple[ReleasedLog, ...]:
    folder = _released_folder()
    index = pd.read_csv(str(folder.joinpath("index.csv")), dtype=str, keep_default_na=False)
    summaries = _summaries()
    return tuple(_log(line, folder, summaries) for line in index.to_dict("records"))


_TYPES: dict[str, Callable[[str], Any]] = {
    "sigma": float,
    "images": int,
    "n0": int,
    "n": int,
    "alpha": float,
    "seconds_per_image": lambda text: _float(text),
    "trained_sigma": float,
    "certify_seconds": lambda text: _float(text),
    "report": lambda text: text == "True",
}
"""How ``index.csv``'s text reads as each typed field of :class:`ReleasedLog` (any other field is the text)."""


def _log(line: dict[str, str], folder: Traversable, summaries: dict[str, Summary]) -> ReleasedLog:
    """One line of ``index.csv`` as a record: every field from its column, the file under ``released/``, the numbers."""
    names = [f.name for f in fields(ReleasedLog) if f.name not in ("file", "summary")]
    values = {name: _TYPES.get(name, str)(line[name]) for name in names}
    file = Path(str(folder.joinpath(line["file"]))) if line["file"] else None
    return ReleasedLog(**values, file=file, summary=summaries.get(line["sha256"]))


def _summaries() -> dict[str, Summary]:
    frame = pd.read_csv(str(_released_folder().joinpath("summary.csv")))
    grid = [c for c in frame.columns if c.startswith("n@")]
    return {
        row["sha256"]: Summary(
            images=int(row["images"]),
            correct=int(row["correct"]),
            abstained=int(row["abstained"]),
            acr=float(row["acr"]),
            acr_sd=float(row["acr_sd"]),
            largest_radius=float(row["largest_radius"]),
            counts=tuple((float(c[2:]), int(row[c])) for c in grid),
        )
        for row in frame.to_dict("records")
    }


def _float(text: str) -> float:
    return float(text) if text else math.nan


def training_logs() -> pd.DataFrame:
    """What the authors' training logs beside the released TSVs state, one line per run (``training_logs.csv``).

    Columns: method, dataset, sigma, path (in the repository), first_epoch, last_epoch, epochs_logged, lr (each
    epoch's learning rate as logged, run-length coded ``first-last:lr;...``), last_test_acc (the last epoch's noisy
    test accuracy, %), median_seconds_per_epoch (on the authors' GPU), file (the log itself under ``released/``).
    """
    folder = _released_folder()
    return pd.read_csv(str(folder.joinpath("training_logs.csv")))


def training_curve(method: str, dataset: str, sigma: float) -> pd.DataFrame | None:
    """The authors' training log of one cell, epoch by epoch, or None when they released none.

    Columns (as their ``log.txt``, without its wall-clock column): epoch, lr, train_loss, train_acc (%), test_loss,
    test_acc (%); train on noisy training images, test on noisy test images, one noise draw per image per epoch.
    """
    logs = training_logs()
    match = logs[(logs["method"] == method) & (logs["dataset"] == dataset)]
    match = match[[math.isclose(float(value), sigma) for value in match["sigma"]]]
    if match.empty:
        return None
    folder = _released_folder()
    return pd.read_csv(str(folder.joinpath(str(match["file"].iloc[0]))), sep="\t")


def logged_rates(coded: str) -> list[float]:
    """Each epoch's learning rate from ``training_logs()["lr"]``, from the first epoch logged.

    >>> logged_rates("0-2:0.1;3:0.001;4-5:0.01")
    [0.1, 0.1, 0.1, 0.001, 0.01, 0.01]
    """
    rates: list[float] = []
    for part in coded.split(";"):
        span, rate = part.split(":")
        first, _, last = span.partition("-")
        rates += [float(rate)] * (int(last or first) - int(first) + 1)
    return rates


def rates_trained_with(logged: Sequence[float]) -> list[float]:
    """The learning rate each epoch trained with, from the rates the authors' training log prints for it.

    Their loops print ``scheduler.get_lr()`` before calling ``scheduler.step(epoch)`` (alinlab/smoothing-catrs,
    ``code/train_*.py``); at the epoch after each StepLR boundary ``get_lr()`` returns the rate dropped twice, an
    isolated dip below both neighbours (1e-4 at epoch 31 between 1e-2 and 1e-3). The rate trained with there is the
    next epoch's; every other epoch trained with the rate printed.

    >>> rates_trained_with([0.01, 0.01, 0.0001, 0.001, 0.001])
    [0.01, 0.01, 0.001, 0.001, 0.001]
    """
    trained = list(logged)
    for epoch in range(1, len(logged) - 1):
        if logged[epoch] < logged[epoch - 1] and logged[epoch] < logged[epoch + 1]:
            trained[epoch] = logged[epoch + 1]
    return trained


def _released_folder() -> Traversable:
    """``released/`` beside this module, as package data (works from a wheel as from a checkout)."""
    return resources.files("rsbench.report").joinpath("released")
