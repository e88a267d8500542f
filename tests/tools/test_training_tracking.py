"""A run's training against the authors' released training log: the shipped curves, the run's log, the comparison.

Tolerance: ``pytest.approx``'s default (relative 1e-6) where a value is computed; each is a few float64 operations
on the inputs (100 x a fraction, a difference, a mean of three), whose rounding is about 1e-14, on any CPU and any
thread count (no reductions whose order depends on either). Values read from files are compared exactly.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
import yaml

from rsbench.published.catalogue import logged_rates, rates_trained_with, training_curve, training_logs
from rsbench.report.training_tracking import (
    compare_training,
    final_noisy_test_accuracy,
    run_training_log,
    summarize,
    track,
    train_loss_column,
)
from tests.scripts import tool_script


def test_every_shipped_curve_agrees_with_what_the_index_says_of_its_log() -> None:
    """Each ``*.training.tsv.gz`` holds the epochs, learning rates and last accuracy ``training_logs.csv`` lists."""
    logs = training_logs()
    assert len(logs) == 25  # 21 Fashion-MNIST, 3 CIFAR-10 (CAT-RS), 1 MNIST (CAT-RS at sigma 0.5)
    for row in logs.itertuples():
        curve = training_curve(str(row.method), str(row.dataset), float(row.sigma))
        assert curve is not None
        assert list(curve.columns) == ["epoch", "lr", "train_loss", "train_acc", "test_loss", "test_acc"]
        assert (curve["epoch"].iloc[0], curve["epoch"].iloc[-1], len(curve)) == (
            row.first_epoch,
            row.last_epoch,
            row.epochs_logged,
        )
        assert curve["lr"].tolist() == logged_rates(str(row.lr))
        assert curve["test_acc"].iloc[-1] == row.last_test_acc


def test_the_gaussian_fashion_mnist_curve_is_the_authors_log() -> None:
    """Values read off alinlab/smoothing-catrs@d4bc576 data/fmnist/noise_1.0/cohen/log.txt, first and last lines."""
    curve = training_curve("gaussian", "fashion_mnist", 1.0)
    assert curve is not None
    assert curve.iloc[0].tolist() == [0, 0.01, 1.230, 55.0, 0.924, 64.3]
    assert curve.iloc[-1][["epoch", "train_acc", "test_acc"]].tolist() == [89, 75.9, 74.7]
    assert training_curve("gaussian", "mnist", 0.5) is None  # no released log for that cell
    assert training_curve("gaussian", "fashion_mnist", 0.75) is None


def lightning_log(
    run: Path,
    epochs: list[tuple[float, float, float]],
    test_acc: float | None = None,
    rates: list[float | None] | None = None,
    term: str = "train/cross_entropy",
) -> None:
    """A Lightning CSV log like an rsbench run's: step rows, then one epoch row per (acc, loss, loss term).

    ``rates``: each epoch's logged ``train/lr`` (None: not logged); 0.01 in every epoch when not given. ``term``: the
    column of the loss term (the cross-entropy of Consistency and Stability, MACER's classification loss).
    """
    rows = []
    for epoch, (acc, loss, cross_entropy) in enumerate(epochs):
        rows.append({"epoch": epoch, "step": 10 * epoch + 9, "train/loss_step": 9.0})
        rate = 0.01 if rates is None else rates[epoch]
        if rate is not None:
            rows.append({"epoch": epoch, "step": 10 * epoch + 9, "train/lr": rate})
        rows.append(
            {
                "epoch": epoch,
                "step": 10 * epoch + 9,
                "train/acc": acc,
                "train/loss_epoch": loss,
                term: cross_entropy,
            }
        )
    if test_acc is not None:
        rows.append({"epoch": 0, "step": 0, "test/acc_noisy": test_acc})
    (run / "logs").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(run / "logs" / "metrics.csv", index=False)


def test_a_runs_log_gives_one_line_per_epoch_with_the_chosen_loss(tmp_path: Path) -> None:
    lightning_log(tmp_path, [(0.5, 2.0, 1.5), (0.75, 1.0, 0.5)], test_acc=0.8)
    log = run_training_log(tmp_path)
    assert log["epoch"].tolist() == [0, 1]
    assert log["train_acc"].tolist() == [50.0, 75.0]
    assert log["train_loss"].tolist() == [2.0, 1.0]
    assert log["lr"].tolist() == [0.01, 0.01]
    assert run_training_log(tmp_path, train_loss_column("consistency"))["train_loss"].tolist() == [1.5, 0.5]
    assert final_noisy_test_accuracy(tmp_path) == pytest.approx(80.0)  # 100 x 0.8, in float64


def test_a_run_without_a_csv_log_is_named_and_a_missing_column_too(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"has no training log .* logger=csv"):
        run_training_log(tmp_path)
    assert final_noisy_test_accuracy(tmp_path) is None
    lightning_log(tmp_path, [(0.5, 2.0, 1.5)])
    with pytest.raises(KeyError, match="no column 'train/loss_low'"):
        run_training_log(tmp_path, train_loss_column("catrs"))


def test_the_comparison_and_its_summary_on_a_hand_checked_case(tmp_path: Path) -> None:
    """Ours 50 / 75 / 80 %, theirs 49 / 76 / 80.5 % (epoch 3 only theirs): Δ +1, -1, -0.5 over 3 epochs."""
    lightning_log(tmp_path, [(0.50, 2.0, 0.0), (0.75, 1.0, 0.0), (0.80, 0.5, 0.0)], test_acc=0.7)
    theirs = pd.DataFrame(
        {
            "epoch": [0, 1, 2, 3],
            "lr": [0.01] * 4,
            "train_loss": [2.5, 1.0, 0.25, 0.2],
            "train_acc": [49.0, 76.0, 80.5, 81.0],
            "test_loss": [1.0] * 4,
            "test_acc": [60.0, 65.0, 68.0, 69.5],
        }
    )
    compared = compare_training(run_training_log(tmp_path), theirs)
    assert compared["epoch"].tolist() == [0, 1, 2]
    assert compared["d_train_acc"].tolist() == pytest.approx([1.0, -1.0, -0.5])
    assert compared["d_train_loss"].tolist() == pytest.approx([-0.5, 0.0, 0.25])
    summary = summarize(compared, final_noisy_test_accuracy(tmp_path), theirs)
    assert summary.epochs == 3
    assert summary.d_first == pytest.approx(1.0)
    assert summary.max_abs_d_later == pytest.approx(1.0)
    assert summary.mean_d == pytest.approx(-0.5 / 3)
    assert summary.loss_mean_d == pytest.approx(-0.25 / 3)
    assert summary.loss_max_abs_d_later == pytest.approx(0.25)
    assert summary.test_acc_rsbench == pytest.approx(70.0)
    assert summary.test_acc_authors == 68.0  # theirs at epoch 2, the run's last (their log goes on), read as written
    assert (summary.lr_epochs, summary.lr_differing) == (3, ())
    one_epoch = summarize(compared.iloc[:1], None, theirs)
    assert math.isnan(one_epoch.max_abs_d_later)
    with pytest.raises(ValueError, match="no epoch in common"):
        summarize(compared.iloc[:0], None, theirs)


def test_macer_is_compared_on_the_classification_loss_its_authors_log_not_on_their_zero_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """train_macer.py logs macer_train's classification loss and 0.0 for train accuracy (its first two epochs at
    sigma 0.5: 0.718 and 0.484, both 0.0): the accuracy is not compared, the loss is against rsbench's
    ``train/classification`` (here 0.818 and 0.584: +0.1 each), not its whole loss (9.0 here)."""
    theirs = training_curve("macer", "fashion_mnist", 0.5)
    assert theirs is not None
    assert theirs["train_loss"].iloc[:2].tolist() == [0.718, 0.484]
    assert set(theirs["train_acc"]) == {0.0}
    run = tmp_path / "macer_sigma0.5"
    hydra_run(run, "macer", "fashion_mnist", 0.5)
    lightning_log(run, [(0.70, 9.0, 0.818), (0.80, 9.0, 0.584)], test_acc=0.8, term="train/classification")
    compared, summary = track(run, "macer", theirs)
    assert compared["train_acc_authors"].isna().all()
    assert all(math.isnan(value) for value in (summary.d_first, summary.mean_d, summary.max_abs_d_later))
    assert summary.loss_mean_d == pytest.approx(0.1)
    assert summary.loss_max_abs_d_later == pytest.approx(0.1)
    assert tracking_script().main([str(run), "--epochs", "0"]) == 0
    printed = capsys.readouterr().out
    assert "| macer, sigma 0.5 | 0 | 70.0 / - | 0.818 / 0.718 |" in printed
    assert "| macer, sigma 0.5 | 2 | - | - | - | +0.100 | 80.0 / 77.1 | none of 2 |" in printed  # theirs at epoch 1


def test_a_first_epoch_check_of_smoothmix_compares_its_whole_loss_and_not_the_zero_its_script_logs_as_accuracy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """train_smoothmix.py writes 0.0 for train accuracy and its whole loss (cross-entropy + eta x warm-up x mix term)
    as "train loss" (sigma 0.5, epoch 0: 0.899, noisy test accuracy 74.2): a one-epoch run is compared on
    ``train/loss_epoch``, its accuracy not at all, its test accuracy against their epoch 0, and printed once."""
    theirs = training_curve("smoothmix", "fashion_mnist", 0.5)
    assert theirs is not None
    assert set(theirs["train_acc"]) == {0.0}
    run = tmp_path / "smoothmix_sigma0.5"
    hydra_run(run, "smoothmix", "fashion_mnist", 0.5)
    lightning_log(run, [(0.70, 0.909, 0.5)], test_acc=0.75)
    compared, summary = track(run, "smoothmix", theirs)
    assert compared["train_loss_rsbench"].tolist() == [0.909]  # the whole loss, not the cross-entropy term (0.5)
    assert math.isnan(summary.d_first)
    assert summary.loss_mean_d == pytest.approx(0.01)
    assert tracking_script().main([str(run)]) == 0  # epochs 0 and -1 chosen: the same epoch
    printed = capsys.readouterr().out
    assert printed.count("| smoothmix, sigma 0.5 | 0 | 70.0 / - | 0.909 / 0.899 |") == 1
    assert "| smoothmix, sigma 0.5 | 1 | - | - | - | +0.010 | 75.0 / 74.2 | none of 1 |" in printed


def test_the_authors_printed_double_drop_is_read_as_the_rate_they_trained_with() -> None:
    """Their get_lr() prints 1e-4 at epoch 31 of a 90-epoch log, between 1e-2 and 1e-3; they trained at 1e-3."""
    assert rates_trained_with([0.01, 0.0001, 0.001, 0.001, 0.00001, 0.0001]) == [
        0.01,
        0.001,
        0.001,
        0.001,
        0.0001,
        0.0001,
    ]
    assert rates_trained_with([0.01]) == [0.01]
    curve = training_curve("gaussian", "fashion_mnist", 0.5)
    assert curve is not None
    trained = rates_trained_with(curve["lr"].tolist())
    assert (curve["lr"][31], trained[31], curve["lr"][61], trained[61]) == (0.0001, 0.001, 0.00001, 0.0001)
    assert trained == [0.01] * 31 + [0.001] * 30 + [0.0001] * 29  # rsbench's recipe (test_published_recipes)


def test_a_run_at_another_rate_is_caught_epoch_by_epoch_and_an_unlogged_rate_is_not_compared(tmp_path: Path) -> None:
    """Theirs prints 0.01, 0.0001, 0.001 (trained 0.01, 0.001, 0.001); ours 0.01 (float32), 0.001, 0.01, then none."""
    theirs = pd.DataFrame(
        {
            "epoch": [0, 1, 2, 3],
            "lr": [0.01, 0.0001, 0.001, 0.001],
            "train_loss": [1.0] * 4,
            "train_acc": [50.0] * 4,
            "test_loss": [1.0] * 4,
            "test_acc": [50.0] * 4,
        }
    )
    lightning_log(tmp_path, [(0.5, 1.0, 0.0)] * 4, rates=[0.01000003, 0.001, 0.01, None])
    compared = compare_training(run_training_log(tmp_path), theirs)
    assert compared["lr_authors"].tolist() == [0.01, 0.001, 0.001, 0.001]
    summary = summarize(compared, None, theirs)
    assert (summary.lr_epochs, summary.lr_differing) == (3, (2,))


def tracking_script() -> ModuleType:
    return tool_script("training_tracking")


def hydra_run(run: Path, method: str, dataset: str, sigma: float) -> None:
    """The two ``.hydra`` files the script reads, as Hydra writes them (only the keys it needs)."""
    (run / ".hydra").mkdir(parents=True)
    choices = {"hydra": {"runtime": {"choices": {"method": method, "dataset": dataset}}}}
    (run / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(choices))
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"sigma": sigma}))


@pytest.mark.study
def test_the_script_prints_the_table_of_a_run_against_the_authors_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two epochs of a Gaussian run at sigma 1.0 against the authors' 55.0 / 68.0 % and 1.230 / 0.834; the noisy test
    accuracy after training beside theirs after the same two epochs (67.5), not after their 90 (74.7)."""
    run = tmp_path / "gaussian_sigma1.0"
    hydra_run(run, "gaussian", "fashion_mnist", 1.0)
    lightning_log(run, [(0.568, 1.170, 0.0), (0.68, 0.834, 0.0)], test_acc=0.757)
    assert tracking_script().main([str(run), "--epochs", "0", "-1"]) == 0
    printed = capsys.readouterr().out
    assert "| gaussian, sigma 1 | 0 | 56.8 / 55.0 | 1.170 / 1.230 |" in printed
    assert "| gaussian, sigma 1 | 1 | 68.0 / 68.0 | 0.834 / 0.834 |" in printed
    assert "| gaussian, sigma 1 | 2 | +1.80 | 0.00 | +0.90 | -0.030 | 75.7 / 67.5 | none of 2 |" in printed


@pytest.mark.study
def test_the_script_refuses_a_cell_the_authors_released_no_log_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    hydra_run(run, "gaussian", "mnist_embedded", 0.5)
    lightning_log(run, [(0.5, 1.0, 0.0)])
    assert tracking_script().main([str(run)]) == 2
    assert "released no training log for gaussian on mnist_embedded at sigma 0.5" in capsys.readouterr().out


@pytest.mark.study
def test_the_script_names_a_run_that_has_logged_no_epoch_yet_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run in flight before its first epoch ends has a CSV log without the epoch's loss column: one line, status 2;
    a run without a CSV log (another logger) likewise."""
    run = tmp_path / "macer_in_flight"
    hydra_run(run, "macer", "fashion_mnist", 0.5)
    lightning_log(run, [(0.5, 1.0, 0.0)])  # a log with train/loss_epoch but not MACER's train/classification
    assert tracking_script().main([str(run)]) == 2
    printed = capsys.readouterr().out
    assert printed.count("\n") == 1
    assert f"{run / 'logs' / 'metrics.csv'} has no column 'train/classification'" in printed
    assert f"has {run} finished its first epoch?" in printed
    (run / "logs" / "metrics.csv").unlink()
    assert tracking_script().main([str(run)]) == 2
    assert "has no training log" in capsys.readouterr().out
