"""``python -m rsbench.published.importer`` on tiny repositories laid out as alinlab/smoothing-catrs and
locuslab/smoothing: what ships, what does not, the index, the numbers, duplicates and the alpha a log implies."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rsbench.published import importer

CERTIFICATION = (
    "idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t9\t9\t0.812\t1\t0:00:01.500000\n20\t2\t-1\t0.0\t0\t0:00:02.500000\n"
)
# Cohen's layout; the largest radius 0.978 at sigma 0.25 exceeds the alpha = 0.001 cap at n = 100,000 (0.953).
COHEN = "idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t3\t3\t0.978\t1\t0:00:10\n20\t8\t1\t0.4\t0\t0:00:12\n"
TRAINING = (
    "epoch\ttime\tlr\ttrain loss\ttrain acc\ttestloss\ttest acc\n"
    "0\t9.47\t0.01\t0.929\t65.9\t0.686\t74.1\n"
    "1\t7.54\t0.001\t0.627\t76.1\t0.602\t77.7\n"
    "2\t9.59\t0.001\t0.568\t78.2\t0.572\t78.1\n"
)


def commit_all(path: Path) -> str:
    """Commit everything under ``path`` in a fresh repository and return the commit."""
    for command in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data"],
    ):
        subprocess.run(["git", "-C", str(path), *command], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def catrs_repository(path: Path) -> str:
    """One Fashion-MNIST Consistency cell at sigma 0.5 (certification TSV and training log) and an MIT licence."""
    cell = path / "data" / "fmnist" / "noise_0.5" / "consistency"
    cell.mkdir(parents=True)
    (cell / "noise_0.5.tsv").write_text(CERTIFICATION)
    (cell / "log.txt").write_text(TRAINING)
    (path / "LICENSE").write_text("MIT License\n")
    return commit_all(path)


def cohen_repository(path: Path) -> str:
    """Two logs without a licence: one of its own, one byte-identical to the CAT-RS log."""
    folder = path / "data" / "certify" / "cifar10" / "resnet110" / "noise_0.25" / "test"
    folder.mkdir(parents=True)
    (folder / "sigma_0.25").write_text(COHEN)
    (folder / "sigma_0.50").write_text(CERTIFICATION)
    return commit_all(path)


def target(folder: Path, commits: dict[str, str]) -> Path:
    """A released/ folder whose sources.yaml pins the two fake repositories' commits."""
    cards = yaml.safe_load((importer.TARGET / "sources.yaml").read_text())
    kept = {name: {**cards[name], "commit": commit} for name, commit in commits.items()}
    folder.mkdir(parents=True)
    (folder / "sources.yaml").write_text(yaml.safe_dump(kept, sort_keys=False))
    return folder


@pytest.fixture
def imported(tmp_path: Path) -> Path:
    commits = {
        "catrs2023": catrs_repository(tmp_path / "catrs"),
        "cohen2019": cohen_repository(tmp_path / "cohen"),
    }
    released = target(tmp_path / "released", commits)
    assert importer.main([str(tmp_path / "catrs"), str(tmp_path / "cohen" / ".git"), "--target", str(released)]) == 0
    return released


def test_a_licensed_log_ships_gzipped_without_its_clock_and_with_its_licence(imported: Path) -> None:
    index = pd.read_csv(imported / "index.csv", dtype=str, keep_default_na=False).set_index("path")
    line = index.loc["data/fmnist/noise_0.5/consistency/noise_0.5.tsv"]
    assert line["file"] == "fashion_mnist/consistency/sigma_0.5.tsv.gz"  # the CAT-RS layout, as before
    with gzip.open(imported / line["file"], "rt") as file:
        assert file.read() == "idx\tlabel\tpredict\tradius\tcorrect\n0\t9\t9\t0.812\t1\n20\t2\t-1\t0.0\t0\n"
    assert line["sha256"] == hashlib.sha256(CERTIFICATION.encode()).hexdigest()
    assert (line["method"], line["dataset"], line["arch"], line["sigma"], line["images"]) == (
        "consistency",
        "fashion_mnist",
        "lenet",
        "0.5",
        "2",
    )
    assert line["seconds_per_image"] == "2"  # the median of 1.5 s and 2.5 s
    assert line["certify_seconds"] == "4"
    assert line["report"] == "True"  # a CAT-RS Fashion-MNIST log: the report pairs rows with it
    assert (imported / "LICENSE").read_text() == "MIT License\n"
    with gzip.open(imported / "fashion_mnist/consistency/sigma_0.5.training.tsv.gz", "rt") as file:
        curve = pd.read_csv(file, sep="\t")
    assert list(curve.columns) == ["epoch", "lr", "train_loss", "train_acc", "test_loss", "test_acc"]
    trainings = pd.read_csv(imported / "training_logs.csv")
    assert trainings.loc[0, ["epochs_logged", "lr", "last_test_acc", "median_seconds_per_epoch"]].tolist() == [
        3,
        "0:0.01;1-2:0.001",
        78.1,
        9.47,
    ]


def test_a_log_without_a_licence_keeps_its_card_and_numbers_but_not_its_rows(imported: Path) -> None:
    index = pd.read_csv(imported / "index.csv", dtype=str, keep_default_na=False).set_index("path")
    line = index.loc["data/certify/cifar10/resnet110/noise_0.25/test/sigma_0.25"]
    assert line["file"] == ""
    assert not (imported / "cohen2019").exists()
    assert (line["method"], line["arch"], line["trained_sigma"], line["subset"]) == (
        "gaussian",
        "cifar_resnet110",
        "0.25",
        "every 20th test image, the first 2 of 500 (stopped early)",
    )
    # 0.978 > 0.25 * Phi^-1(0.001^(1/100000)) = 0.953: certified at alpha = 0.01, whose cap is 0.977
    assert line["alpha"] == "0.01"
    assert "exceeds the alpha = 0.001 cap" in line["alpha_note"]
    numbers = pd.read_csv(imported / "summary.csv").set_index("sha256").loc[line["sha256"]]
    assert (numbers["images"], numbers["correct"], numbers["abstained"]) == (2, 1, 0)
    assert numbers["acr"] == pytest.approx(0.489, abs=1e-6)  # (0.978 + 0) / 2
    assert numbers["acr_sd"] == pytest.approx(0.978 / 2**0.5, abs=1e-6)
    assert (numbers["n@0"], numbers["n@0.5"], numbers["n@0.9375"], numbers["n@1"]) == (1, 1, 1, 0)


def test_a_file_identical_to_one_listed_before_names_it_and_is_not_shipped_twice(imported: Path) -> None:
    index = pd.read_csv(imported / "index.csv", dtype=str, keep_default_na=False).set_index("path")
    copy = index.loc["data/certify/cifar10/resnet110/noise_0.25/test/sigma_0.50"]
    assert copy["same_as"] == "alinlab/smoothing-catrs:data/fmnist/noise_0.5/consistency/noise_0.5.tsv"
    assert copy["file"] == ""
    assert len(pd.read_csv(imported / "summary.csv")) == 2  # one line of numbers per distinct file


def test_the_gzipped_files_are_byte_identical_when_imported_twice(tmp_path: Path) -> None:
    """No time stamp or file name in the gzip header: a rerun of the importer changes no shipped byte."""
    commit = catrs_repository(tmp_path / "repo")
    contents = []
    for attempt in ("first", "second"):
        released = target(tmp_path / attempt, {"catrs2023": commit})
        assert importer.main([str(tmp_path / "repo"), "--target", str(released)]) == 0
        contents.append(sorted((p.relative_to(released), p.read_bytes()) for p in released.rglob("*.gz")))
    assert contents[0] == contents[1]
    assert len(contents[0]) == 2


def test_a_folder_holding_no_card_commit_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catrs_repository(tmp_path / "repo")
    released = target(tmp_path / "released", {"catrs2023": "0" * 40})
    assert importer.main([str(tmp_path / "repo"), "--target", str(released)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error:")
    assert "holds none of the cards' commits" in error
    assert error.count("\n") == 1
