"""The authors' released per-image certification logs that ship with rsbench, as data.

``released/index.csv`` (next to this module) lists every log: the repository, commit and path it was taken from, the
SHA-256 of the original file, the method (rsbench's name), the variant, dataset, architecture, sigma, the number of
images and the protocol (n0, n, alpha), the median of the ``time`` column (seconds per image on the authors' GPU) and
the file under ``released/`` (a gzipped Cohen-format TSV, ``time`` column dropped).
``training_logs.csv`` summarises the training log beside each TSV and names its copy (``sigma_<s>.training.tsv.gz``:
the authors' ``log.txt`` per epoch without its wall clock, :func:`training_curve`).
``experiments/import_released_logs.py`` rebuilds the folder from a clone of the repository.

These are the CAT-RS authors' logs (alinlab/smoothing-catrs, MIT licence, ``released/LICENSE``): every method of
their CIFAR-10 and Fashion-MNIST tables and CAT-RS on MNIST, all test images at n = 100,000, alpha = 0.001.
Cohen et al.'s logs (locuslab/smoothing) carry no licence and are not shipped; read them from a clone by path.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from rsbench.report.load import Result, read_cohen_tsv

if TYPE_CHECKING:  # importlib.resources.abc is Python 3.11+; annotations only
    from importlib.resources.abc import Traversable


@dataclass(frozen=True)
class ReleasedLog:
    """One released log: where it came from, what it certifies, and the file rsbench ships.

    Attributes:
        repository: ``owner/name`` on GitHub.
        commit: the commit the file was read at.
        path: the file's path in that repository.
        method, variant, dataset, arch, sigma: what it certifies, in rsbench's names (variant as ``key=value``).
        images: the number of certified test images.
        n0, n, alpha: the certification protocol.
        seconds_per_image: the median of the original's ``time`` column: the authors' wall clock per image (their
            GPU), for estimating what certifying costs on one.
        file: the shipped copy.
    """

    repository: str
    commit: str
    path: str
    method: str
    variant: str
    dataset: str
    arch: str
    sigma: float
    images: int
    n0: int
    n: int
    alpha: float
    seconds_per_image: float
    file: Path

    @property
    def reference(self) -> str:
        """``owner/name@commit path``: enough to find the original file."""
        return f"{self.repository}@{self.commit[:7]} {self.path}"

    def read(self) -> Result:
        """The log as a report result (method, dataset, sigma and protocol from the index).

        Read once per process: a report pairs a row with its log and also recomputes the published number from it.
        The result is shared, so treat it (its ``records`` frame too) as read-only.
        """
        return _read_released(self)


@functools.cache
def _read_released(log: ReleasedLog) -> Result:
    result = read_cohen_tsv(log.file, label=log.method, sigma=log.sigma, dataset=log.dataset, n=log.n, alpha=log.alpha)
    protocol = {**result.protocol, "n0": log.n0}
    return Result(**{**result.__dict__, "arch": log.arch, "protocol": protocol, "source": log.file})


def released_logs(
    *, dataset: str | None = None, method: str | None = None, sigma: float | None = None
) -> list[ReleasedLog]:
    """The shipped logs, in the index's order, keeping those that match every argument given."""
    folder = _released_folder()
    index = pd.read_csv(str(folder.joinpath("index.csv")), dtype={"variant": str}, keep_default_na=False)
    logs = [
        ReleasedLog(
            repository=row.repository,
            commit=row.commit,
            path=row.path,
            method=row.method,
            variant=row.variant,
            dataset=row.dataset,
            arch=row.arch,
            sigma=float(row.sigma),
            images=int(row.images),
            n0=int(row.n0),
            n=int(row.n),
            alpha=float(row.alpha),
            seconds_per_image=float(row.seconds_per_image),
            file=Path(str(folder.joinpath(row.file))),
        )
        for row in index.itertuples()
    ]
    return [
        log
        for log in logs
        if (dataset is None or log.dataset == dataset)
        and (method is None or log.method == method)
        and (sigma is None or math.isclose(log.sigma, sigma))
    ]


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
