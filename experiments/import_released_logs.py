"""Rebuild ``rsbench/report/released/``: the authors' released per-image certification logs, as data.

The CAT-RS authors (alinlab/smoothing-catrs, MIT licence) released one Cohen-format certification TSV per method,
dataset and sigma of their tables. rsbench ships them, unchanged but for the ``time`` column (dropped: it is the
authors' wall clock, not a result) and gzip, so that a run can be paired with the authors' model image by image
(``python -m rsbench.report --against-released``) and the replay benchmark can use them. Every file is listed in
``index.csv`` with its repository, commit, path in the repository and the SHA-256 of the original file.

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
# MNIST and Fashion-MNIST follow the SmoothMix paper's plain MNIST recipe.
SMOOTHMIX_ONE_STEP = {("cifar10", 0.25): False, ("cifar10", 0.5): True, ("cifar10", 1.0): True}
COLUMNS = ["idx", "label", "predict", "radius", "correct"]


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


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``released/`` and its index from the repository given on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", type=Path, help="a clone of alinlab/smoothing-catrs (work tree or .git)")
    args = parser.parse_args(argv)
    commit = git(args.repository, "rev-parse", "HEAD").decode().strip()
    rows = []
    for folder, method_folder, sigma, path in logs_in(args.repository):
        original = git(args.repository, "show", f"HEAD:{path}")
        frame = pd.read_csv(io.BytesIO(original), sep="\t")[COLUMNS]
        dataset, arch = DATASETS[folder]
        method = METHODS[method_folder]
        local = Path(dataset) / method / f"sigma_{sigma:g}.tsv.gz"
        (TARGET / local).parent.mkdir(parents=True, exist_ok=True)
        text = frame.to_csv(sep="\t", index=False, lineterminator="\n").encode()
        with open(TARGET / local, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as out:
            out.write(text)
        variant = ""
        if method == "smoothmix":
            variant = f"one_step={str(SMOOTHMIX_ONE_STEP.get((dataset, sigma), False)).lower()}"
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
                "file": local.as_posix(),
            }
        )
    with open(TARGET / "index.csv", "w", newline="") as index:
        writer = csv.DictWriter(index, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} logs of {REPOSITORY}@{commit[:7]} to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
