"""How each run's training followed the authors' own training log of the same cell, epoch by epoch.

For every run folder given (or copy of its records), reads its method, dataset and sigma from ``.hydra/`` and its
per-epoch train accuracy and loss from its CSV log (the loss the authors log: the cross-entropy term alone for
Consistency, Stability, CAT-RS and MACER, :func:`rsbench.report.training_tracking.train_loss_column`), pairs them with
the authors' released ``log.txt`` of the same cell (shipped with rsbench,
:func:`rsbench.published.catalogue.training_curve`) and prints, as markdown, the train
accuracy and loss of both at the chosen epochs, then one line per run: the difference at the first epoch, the
largest one after it, the mean over all epochs (none for MACER and SmoothMix, whose scripts log no train
accuracy), the mean train loss difference, the noisy test accuracy after training beside the authors' at the run's
last epoch (their last for a whole run), and the epochs (of those whose rate both logged) trained at another
learning rate than the authors'. Several runs of one cell (lambda runs, seeds) are told apart by their folder's name.
The training tables of the Fashion-MNIST studies (``experiments/fashion_mnist_*/report/``) are this script's output:

    python tools/training_tracking.py experiments/fashion_mnist_table/runs/*/
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import yaml

from rsbench.published.catalogue import training_curve
from rsbench.report.training_tracking import track


def cell(run: Path) -> tuple[str, str, float]:
    """The run's (method, dataset, sigma), from the config Hydra stored in it."""
    hydra = yaml.safe_load((run / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]["choices"]
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    return str(hydra["method"]), str(hydra["dataset"]), float(config["sigma"])


def shown(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``; '-' where the authors' log has none (NaN: MACER's, SmoothMix's accuracy)."""
    return "-" if math.isnan(value) else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    """Print the tables for the runs on the command line.

    Returns 0, or 2 (after one line saying why) when a run has no released log to compare with, no CSV training log,
    or no epoch logged yet.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="rsbench run folders (or copies of their records)")
    parser.add_argument("--epochs", nargs="+", type=int, default=[0, 10, 30, 60, -1], help="-1: the last compared")
    args = parser.parse_args(argv)
    rows, summaries = [], []
    cells = [cell(run) for run in args.runs]
    for run, (method, dataset, sigma) in zip(args.runs, cells, strict=True):
        theirs = training_curve(method, dataset, sigma)
        if theirs is None:
            print(f"{run}: the authors released no training log for {method} on {dataset} at sigma {sigma:g}")
            return 2
        try:
            compared, summary = track(run, method, theirs)
        except FileNotFoundError as error:  # run with another logger
            print(error)
            return 2
        except KeyError as error:  # the epoch's loss column is written when the first epoch ends
            print(f"{error.args[0]}: has {run} finished its first epoch?")
            return 2
        name = f"{method}, sigma {sigma:g}"
        if cells.count((method, dataset, sigma)) > 1:  # several runs of one cell (another lambda, seed): by folder
            name += f" ({run.resolve().name})"
        # each chosen epoch once (a one-epoch run's first and last are the same)
        chosen = {int(compared["epoch"].iloc[e]) if e < 0 else e for e in args.epochs if e >= -len(compared)}
        for _, line in compared[compared["epoch"].isin(chosen)].iterrows():
            accuracy = f"{line['train_acc_rsbench']:.1f} / {shown(line['train_acc_authors'], '.1f')}"
            loss = f"{line['train_loss_rsbench']:.3f} / {line['train_loss_authors']:.3f}"
            rows.append(f"| {name} | {int(line['epoch'])} | {accuracy} | {loss} |")
        test = "-" if summary.test_acc_rsbench is None else f"{summary.test_acc_rsbench:.1f}"
        differing = ", ".join(str(epoch) for epoch in summary.lr_differing) or "none"
        summaries.append(
            f"| {name} | {summary.epochs} | {shown(summary.d_first, '+.2f')} | {shown(summary.max_abs_d_later, '.2f')} "
            f"| {shown(summary.mean_d, '+.2f')} | {summary.loss_mean_d:+.3f} | {test} / {summary.test_acc_authors:.1f} "
            f"| {differing} of {summary.lr_epochs} |"
        )
    print("| cell | epoch | train accuracy, rsbench / authors | train loss, rsbench / authors |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    print()
    print(
        "| cell | epochs compared | Δ train accuracy, first epoch | largest abs Δ after it | mean Δ | mean Δ train "
        "loss | noisy test accuracy after training, rsbench / authors | epochs at another learning rate |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
