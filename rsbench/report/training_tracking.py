"""A run's training, epoch by epoch, against the authors' released training log of the same cell.

A paired certification (:mod:`rsbench.report.against_released`) compares two trained models; this compares how they
were trained. The authors' ``log.txt`` (shipped as ``sigma_<s>.training.tsv.gz`` beside the released TSV, see
:func:`rsbench.published.catalogue.training_curve`) has one line per epoch with the learning rate, the train loss and
accuracy on noisy training images, and the loss and accuracy on noisy test images; an rsbench run's Lightning CSV
log (``logs/metrics.csv``, or ``logs/training_metrics.csv`` in a copy of its records) has the epoch's train loss
and accuracy (``train/loss_epoch``, ``train/acc``) and, after training, the noisy test accuracy of the test step
(``test/acc_noisy``). Each side draws one noise sample per image per epoch, so neither number is exact: the
standard error of one epoch's train accuracy over 60,000 images is at most 0.2 points. The learning rates are
compared too: the authors' log prints the rate of the epoch after each drop as dropped twice, which
:func:`rates_trained_with` undoes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rsbench.methods.card import find_card
from rsbench.published.catalogue import rates_trained_with

LR_RTOL = 1e-4
"""Relative tolerance for "the same learning rate": rsbench logs the rate in float32 (0.01 reads 0.01000003, a
relative error of 3e-6); a StepLR drop changes it by a factor 10."""

LOG_NAMES = ("logs/metrics.csv", "logs/training_metrics.csv")
"""Where a run folder (or a copy of its records, :file:`tools/copy_records.sh`) keeps its CSV training log."""

DEFAULT_LOSS_COLUMN = "train/loss_epoch"
"""The whole loss, per epoch: the authors' "train loss" unless the method's card names one of its terms."""


def train_loss_column(method: str) -> str:
    """The column of an rsbench run's CSV log comparable with the authors' "train loss" for ``method``.

    The method's card says it (:attr:`rsbench.methods.card.MethodCard.train_loss_column`): Consistency, Stability,
    CAT-RS and MACER's released scripts log only their cross-entropy term (alinlab/smoothing-catrs@d4bc576,
    ``code/``); a method without a card is compared on its whole loss.
    """
    card = find_card(method)
    return card.train_loss_column if card is not None else DEFAULT_LOSS_COLUMN


def authors_log_train_accuracy(method: str) -> bool:
    """Whether the authors' training log of ``method`` has a train accuracy, as its card says.

    ``train_macer.py`` and ``train_smoothmix.py`` write 0.0 in its column (neither loop measures it), which is read
    as missing, not compared.
    """
    card = find_card(method)
    return card.logs_train_accuracy if card is not None else True


def run_training_log(run: Path, loss_column: str = DEFAULT_LOSS_COLUMN) -> pd.DataFrame:
    """The run's training per epoch: ``epoch``, ``train_acc`` (%), ``train_loss`` (from ``loss_column``), ``lr``.

    Raises:
        FileNotFoundError: the run folder has no CSV training log (it was run with another logger).
        KeyError: the log has no ``loss_column``.
    """
    return _per_epoch(*_read_log(run), loss_column)


def final_noisy_test_accuracy(run: Path) -> float | None:
    """The noisy test accuracy (%) the run's test step logged after training, if it logged one."""
    try:
        return _noisy_test_accuracy(_read_log(run)[1])
    except FileNotFoundError:
        return None


def compare_training(ours: pd.DataFrame, theirs: pd.DataFrame) -> pd.DataFrame:
    """The epochs both logged: each side's train accuracy, loss and learning rate, and the differences.

    Differences are rsbench minus the authors; the authors' learning rate is the one each epoch trained with, as
    :func:`rates_trained_with` reads their log.

    Columns: epoch, train_acc_rsbench, train_acc_authors, d_train_acc, train_loss_rsbench, train_loss_authors,
    d_train_loss, lr_rsbench, lr_authors.
    """
    theirs = theirs.assign(lr=rates_trained_with(theirs["lr"].tolist()))
    merged = ours.merge(theirs, on="epoch", suffixes=("_rsbench", "_authors"))
    merged["d_train_acc"] = merged["train_acc_rsbench"] - merged["train_acc_authors"]
    merged["d_train_loss"] = merged["train_loss_rsbench"] - merged["train_loss_authors"]
    accuracy = ["train_acc_rsbench", "train_acc_authors", "d_train_acc"]
    loss = ["train_loss_rsbench", "train_loss_authors", "d_train_loss"]
    return merged[["epoch", *accuracy, *loss, "lr_rsbench", "lr_authors"]]


@dataclass(frozen=True)
class TrackingSummary:
    """How closely one run's training followed the authors' log.

    Attributes:
        epochs: epochs both logged.
        d_first: train accuracy difference (points) at the first epoch both logged; NaN where the authors' log
            has no train accuracy (:func:`authors_log_train_accuracy`), as the next two.
        max_abs_d_later: the largest absolute train accuracy difference over the later epochs.
        mean_d: the mean train accuracy difference over all compared epochs.
        loss_mean_d: the mean train loss difference over all compared epochs (the loss the authors log,
            :func:`train_loss_column`).
        loss_max_abs_d_later: the largest absolute train loss difference over the later epochs.
        test_acc_rsbench: the run's noisy test accuracy after training (%), if logged.
        test_acc_authors: the authors' noisy test accuracy (%) at the last epoch compared: their last logged one
            for a whole run, the run's last epoch for one stopped early (e.g. a first-epoch check).
        lr_epochs: epochs where both sides' learning rate is known (rsbench logs ``train/lr``, the epoch's mean).
        lr_differing: those of them whose rates differ (beyond :data:`LR_RTOL`), in order.
    """

    epochs: int
    d_first: float
    max_abs_d_later: float
    mean_d: float
    loss_mean_d: float
    loss_max_abs_d_later: float
    test_acc_rsbench: float | None
    test_acc_authors: float
    lr_epochs: int
    lr_differing: tuple[int, ...]


def summarize(compared: pd.DataFrame, test_acc_rsbench: float | None, theirs: pd.DataFrame) -> TrackingSummary:
    """The summary of :func:`compare_training`'s table (at least one epoch)."""
    if compared.empty:
        raise ValueError("the run and the authors' log have no epoch in common")
    differences, losses = compared["d_train_acc"], compared["d_train_loss"]
    rates = compared.dropna(subset=["lr_rsbench", "lr_authors"])
    same = [math.isclose(a, b, rel_tol=LR_RTOL) for a, b in zip(rates["lr_rsbench"], rates["lr_authors"], strict=True)]
    return TrackingSummary(
        epochs=len(compared),
        d_first=float(differences.iloc[0]),
        max_abs_d_later=_largest_after_the_first(differences),
        mean_d=float(differences.mean()),
        loss_mean_d=float(losses.mean()),
        loss_max_abs_d_later=_largest_after_the_first(losses),
        test_acc_rsbench=test_acc_rsbench,
        test_acc_authors=float(theirs.loc[theirs["epoch"] == compared["epoch"].iloc[-1], "test_acc"].iloc[0]),
        lr_epochs=len(rates),
        lr_differing=tuple(int(epoch) for epoch, agree in zip(rates["epoch"], same, strict=True) if not agree),
    )


def _largest_after_the_first(differences: pd.Series) -> float:
    """The largest absolute difference after the first epoch compared; NaN for one epoch or none known."""
    later = differences.iloc[1:]
    return float(later.abs().max()) if len(later) else math.nan


def track(run: Path, method: str, theirs: pd.DataFrame) -> tuple[pd.DataFrame, TrackingSummary]:
    """The run's training against the authors' log ``theirs`` of its cell: :func:`compare_training` and its summary.

    The run's loss is the one the authors log for ``method`` (:func:`train_loss_column`); the authors' train
    accuracy is missing (NaN) where their log has none (:func:`authors_log_train_accuracy`).

    Raises:
        FileNotFoundError, KeyError: as :func:`run_training_log`.
        ValueError: the run and the log have no epoch in common.
    """
    path, log = _read_log(run)
    if not authors_log_train_accuracy(method):
        theirs = theirs.assign(train_acc=math.nan)
    compared = compare_training(_per_epoch(path, log, train_loss_column(method)), theirs)
    return compared, summarize(compared, _noisy_test_accuracy(log), theirs)


def _read_log(run: Path) -> tuple[Path, pd.DataFrame]:
    """The run's CSV training log (the first of :data:`LOG_NAMES` present): its path and its table.

    Raises:
        FileNotFoundError: the run folder has none.
    """
    path = next((run / name for name in LOG_NAMES if (run / name).is_file()), None)
    if path is None:
        raise FileNotFoundError(f"{run} has no training log ({' or '.join(LOG_NAMES)}): was it run with logger=csv?")
    return path, pd.read_csv(path)


def _per_epoch(path: Path, log: pd.DataFrame, loss_column: str) -> pd.DataFrame:
    """:func:`run_training_log`'s table from the log read from ``path``."""
    if loss_column not in log:
        raise KeyError(f"{path} has no column {loss_column!r}")
    epochs = log.dropna(subset=["train/loss_epoch"])
    losses = log.dropna(subset=[loss_column]).groupby("epoch")[loss_column].last()
    rates = log.dropna(subset=["train/lr"]).groupby("epoch")["train/lr"].last() if "train/lr" in log else None
    frame = pd.DataFrame(
        {
            "epoch": epochs["epoch"].astype(int).to_numpy(),
            "train_acc": 100 * epochs["train/acc"].to_numpy(),
        }
    )
    frame["train_loss"] = frame["epoch"].map(losses)
    frame["lr"] = frame["epoch"].map(rates) if rates is not None else math.nan
    return frame.drop_duplicates("epoch", keep="last").reset_index(drop=True)


def _noisy_test_accuracy(log: pd.DataFrame) -> float | None:
    """:func:`final_noisy_test_accuracy` from the read log."""
    if "test/acc_noisy" not in log:
        return None
    values = log["test/acc_noisy"].dropna()
    return float(100 * values.iloc[-1]) if len(values) else None
