"""Rebuild ``rsbench/report/released/``: the authors' released per-image certification logs, as data.

The CAT-RS authors (alinlab/smoothing-catrs, MIT licence) released one Cohen-format certification TSV per method,
dataset and sigma of their tables. rsbench ships them, unchanged but for the ``time`` column (dropped: it is the
authors' wall clock, not a result; its median per file goes into the index) and gzip, so that a run can be paired with
the authors' model image by image (``python -m rsbench.report --against-released``) and the replay benchmark can use
them. Every file is listed in ``index.csv`` with its repository, commit, path in the repository and the SHA-256 of the
original file. What the training log beside a TSV (``log.txt``: one line per epoch with its seconds, learning rate,
train and noisy test loss and accuracy) states goes into ``training_logs.csv``: the epochs logged, the learning rate of
every epoch (run-length coded), the last epoch's noisy test accuracy and the median seconds per epoch on the authors'
GPU; the log itself, without its wall-clock column, is shipped beside the TSV (``sigma_<s>.training.tsv.gz``: epoch,
lr, train_loss, train_acc, test_loss, test_acc) so that a run's training can be compared with theirs epoch by epoch.

Usage (after fetching the repository, e.g. ``git clone https://github.com/alinlab/smoothing-catrs``)::

    python experiments/import_released_logs.py path/to/smoothing-catrs[/.git]

The commit read is the repository's HEAD; the index records it.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import subprocess
import sys
from pathlib import Path

import pandas as pd

REPOSITORY = "alinlab/smoothing-catrs"
TARGET = Path(__file__).resolve().parents[1] / "rsbench" / "report" / "released"
# The authors' folder names -> rsbench method names (the same map as rsbench.report.load.LOG_FOLDERS).
METHODS = {
    "cohen": "gaussian",
    "stab": "stability",
    "salman": "smoothadv",
    "macer": "macer",
    "consistency": "consistency",
    "smoothmix": "smoothmix",
    "cat-rs": "catrs",
}
DATASETS = {
    "cifar10": ("cifar10", "cifar_resnet110"),
    "mnist": ("mnist", "lenet"),
    "fmnist": ("fashion_mnist", "lenet"),
}
# The SmoothMix variant of each released CIFAR-10 log (CAT-RS EXPERIMENTS.MD: --mix_step 1 at sigma 0.5 and 1.0);
# nothing states the variant of the Fashion-MNIST logs, so they match either.
SMOOTHMIX_ONE_STEP = {("cifar10", 0.25): False, ("cifar10", 0.5): True, ("cifar10", 1.0): True}
COLUMNS = ["idx", "label", "predict", "radius", "correct"]
# The training log's columns as shipped (the authors' names -> rsbench's; their ``time`` column is dropped).
TRAINING_COLUMNS = {
    "epoch": "epoch",
    "lr": "lr",
    "train loss": "train_loss",
    "train acc": "train_acc",
    "testloss": "test_loss",
    "test acc": "test_acc",
}


def git(repo: Path, *args: str) -> bytes:
    """Run git in ``repo`` (a work tree or a bare git directory) and return its output."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True).stdout


def logs_in(repo: Path) -> list[tuple[str, str, float, str]]:
    """Every released certification TSV in the repository: (dataset folder, method folder, sigma, path)."""
    found = []
    for path in git(repo, "ls-tree", "-r", "--name-only", "HEAD", "data").decode().splitlines():
        parts = path.split("/")
        if not path.endswith(".tsv") or parts[1] not in DATASETS:
            continue
        sigma = float(parts[2].removeprefix("noise_"))
        method = parts[3] if len(parts) == 5 else "cat-rs"  # data/mnist/noise_s/noise_s.tsv: CAT-RS (App. C)
        found.append((parts[1], method, sigma, path))
    return sorted(found)


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


def write_gzipped(frame: pd.DataFrame, local: Path) -> None:
    """Write ``frame`` as a tab-separated file, gzipped reproducibly (no time stamp or name), at ``TARGET / local``."""
    (TARGET / local).parent.mkdir(parents=True, exist_ok=True)
    text = frame.to_csv(sep="\t", index=False, lineterminator="\n").encode()
    with open(TARGET / local, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
        out.write(text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``released/`` and its index from the repository given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path, help="a clone of alinlab/smoothing-catrs (work tree or .git)")
    args = parser.parse_args(argv)
    commit = git(args.repository, "rev-parse", "HEAD").decode().strip()
    rows, trainings = [], []
    paths = set(git(args.repository, "ls-tree", "-r", "--name-only", "HEAD", "data").decode().splitlines())
    for folder, method_folder, sigma, path in logs_in(args.repository):
        original = git(args.repository, "show", f"HEAD:{path}")
        frame = pd.read_csv(io.BytesIO(original), sep="\t")
        seconds = pd.to_timedelta(frame["time"]).dt.total_seconds().median()
        frame = frame[COLUMNS]
        dataset, arch = DATASETS[folder]
        method = METHODS[method_folder]
        local = Path(dataset) / method / f"sigma_{sigma:g}.tsv.gz"
        write_gzipped(frame, local)
        one_step = SMOOTHMIX_ONE_STEP.get((dataset, sigma)) if method == "smoothmix" else None
        variant = "" if one_step is None else f"one_step={str(one_step).lower()}"
        rows.append(
            {
                "repository": REPOSITORY,
                "commit": commit,
                "path": path,
                "sha256": hashlib.sha256(original).hexdigest(),
                "method": method,
                "variant": variant,
                "dataset": dataset,
                "arch": arch,
                "sigma": f"{sigma:g}",
                "images": len(frame),
                "n0": 100,
                "n": 100000,
                "alpha": 0.001,
                "seconds_per_image": f"{seconds:.3g}",
                "file": local.as_posix(),
            }
        )
        log_path = f"{path.rsplit('/', 1)[0]}/log.txt"
        text = git(args.repository, "show", f"HEAD:{log_path}").decode() if log_path in paths else ""
        if len(text.splitlines()) > 1:  # MNIST's logs hold the header only
            log = pd.read_csv(io.StringIO(text), sep="\t")
            facts = training_log_facts(log)
            curve = Path(dataset) / method / f"sigma_{sigma:g}.training.tsv.gz"
            write_gzipped(log[list(TRAINING_COLUMNS)].rename(columns=TRAINING_COLUMNS), curve)
            trainings.append(
                {"method": method, "dataset": dataset, "sigma": f"{sigma:g}", "path": log_path, **facts}
                | {"file": curve.as_posix()}
            )
    for name, table in (("index.csv", rows), ("training_logs.csv", trainings)):
        with open(TARGET / name, "w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=list(table[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(table)
    print(f"wrote {len(rows)} logs of {REPOSITORY}@{commit[:7]} to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
