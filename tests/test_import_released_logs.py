"""``experiments/import_released_logs.py`` on a tiny repository laid out as alinlab/smoothing-catrs."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from tests.scripts import experiment_script

CERTIFICATION = (
    "idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t9\t9\t0.812\t1\t0:00:01.500000\n20\t2\t-1\t0.0\t0\t0:00:02.500000\n"
)
TRAINING = (
    "epoch\ttime\tlr\ttrain loss\ttrain acc\ttestloss\ttest acc\n"
    "0\t9.47\t0.01\t0.929\t65.9\t0.686\t74.1\n"
    "1\t7.54\t0.001\t0.627\t76.1\t0.602\t77.7\n"
    "2\t9.59\t0.001\t0.568\t78.2\t0.572\t78.1\n"
)


def importer() -> ModuleType:
    return experiment_script("import_released_logs")


def fake_repository(path: Path) -> Path:
    """One Fashion-MNIST Consistency cell at sigma 0.5: its certification TSV and its training log, committed."""
    cell = path / "data" / "fmnist" / "noise_0.5" / "consistency"
    cell.mkdir(parents=True)
    (cell / "noise_0.5.tsv").write_text(CERTIFICATION)
    (cell / "log.txt").write_text(TRAINING)
    for command in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data"],
    ):
        subprocess.run(["git", "-C", str(path), *command], check=True, capture_output=True)
    return path


def test_a_cell_becomes_a_gzipped_tsv_its_training_curve_and_two_index_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importer()
    monkeypatch.setattr(module, "TARGET", tmp_path / "released")
    repository = fake_repository(tmp_path / "repo")
    assert module.main([str(repository)]) == 0

    released = tmp_path / "released" / "fashion_mnist" / "consistency"
    with gzip.open(released / "sigma_0.5.tsv.gz", "rt") as file:
        assert file.read() == "idx\tlabel\tpredict\tradius\tcorrect\n0\t9\t9\t0.812\t1\n20\t2\t-1\t0.0\t0\n"
    with gzip.open(released / "sigma_0.5.training.tsv.gz", "rt") as file:
        curve = pd.read_csv(file, sep="\t")
    assert list(curve.columns) == ["epoch", "lr", "train_loss", "train_acc", "test_loss", "test_acc"]
    assert curve["train_acc"].tolist() == [65.9, 76.1, 78.2]

    index = pd.read_csv(tmp_path / "released" / "index.csv")
    assert index.loc[0, ["method", "dataset", "arch", "sigma", "images"]].tolist() == [
        "consistency",
        "fashion_mnist",
        "lenet",
        0.5,
        2,
    ]
    assert index.loc[0, "seconds_per_image"] == 2.0  # the median of 1.5 s and 2.5 s
    assert index.loc[0, "file"] == "fashion_mnist/consistency/sigma_0.5.tsv.gz"
    trainings = pd.read_csv(tmp_path / "released" / "training_logs.csv")
    assert trainings.loc[0, ["epochs_logged", "lr", "last_test_acc", "median_seconds_per_epoch"]].tolist() == [
        3,
        "0:0.01;1-2:0.001",
        78.1,
        9.47,
    ]
    assert trainings.loc[0, "file"] == "fashion_mnist/consistency/sigma_0.5.training.tsv.gz"


def test_the_gzipped_files_are_byte_identical_when_imported_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No time stamp or file name in the gzip header: a rerun of the importer changes no shipped byte."""
    module = importer()
    repository = fake_repository(tmp_path / "repo")
    contents = []
    for attempt in ("first", "second"):
        monkeypatch.setattr(module, "TARGET", tmp_path / attempt)
        assert module.main([str(repository)]) == 0
        contents.append(
            sorted((p.relative_to(tmp_path / attempt), p.read_bytes()) for p in (tmp_path / attempt).rglob("*.gz"))
        )
    assert contents[0] == contents[1]
    assert len(contents[0]) == 2
