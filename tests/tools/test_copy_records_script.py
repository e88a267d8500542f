"""``tools/copy_records.sh``: the records of every run are copied with their layout; checkpoints, logs and status
files never are."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "copy_records.sh"

RECORDS = [
    "certify.tsv",
    "attack.tsv",
    "metrics.json",
    "certify_protocol.json",
    "attack_protocol.json",
    ".hydra/config.yaml",
    ".hydra/overrides.yaml",
]
NOT_RECORDS = [
    "status.json",  # names the machine's folders (its resume command), the host and the process
    "certified_accuracy.png",  # remade by the report from certify.tsv
    ".rsbench/lock",
    "checkpoints/last.ckpt",
    "checkpoints/best.ckpt",
    "rsbench.log",
    "logs/hparams.yaml",
    "wandb/offline-run-1/files/config.yaml",
    "wandb/offline-run-1/files/metrics.json",
]


def make_run(folder: Path) -> None:
    """A run folder with every kind of file a run writes, each holding its own path."""
    for name in [*RECORDS, *NOT_RECORDS, "logs/metrics.csv"]:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{folder.name}/{name}\n")


def copy(source: Path, target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(source), str(target)], capture_output=True, text=True, timeout=60)


def copied(target: Path) -> set[str]:
    return {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()}


def test_a_sweep_of_runs_is_copied_with_its_layout_and_without_checkpoints(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for run in ("l2/gaussian/seed0", "l2/gaussian/seed1"):
        make_run(sweep / run)
    result = copy(sweep, tmp_path / "records")
    assert result.returncode == 0, result.stderr
    expected = {f"l2/gaussian/seed{seed}/{name}" for seed in (0, 1) for name in [*RECORDS, "logs/training_metrics.csv"]}
    assert copied(tmp_path / "records") == expected
    training_log = tmp_path / "records" / "l2/gaussian/seed1/logs/training_metrics.csv"
    assert training_log.read_text() == "seed1/logs/metrics.csv\n"


def test_one_run_folder_is_copied_into_the_named_folder(tmp_path: Path) -> None:
    make_run(tmp_path / "0_method-consistency_sigma-0.5")
    result = copy(tmp_path / "0_method-consistency_sigma-0.5", tmp_path / "runs" / "consistency_sigma0.5")
    assert result.returncode == 0, result.stderr
    assert copied(tmp_path / "runs" / "consistency_sigma0.5") == {*RECORDS, "logs/training_metrics.csv"}


def test_a_missing_source_is_refused_naming_it(tmp_path: Path) -> None:
    result = copy(tmp_path / "nowhere", tmp_path / "records")
    assert result.returncode == 2
    assert f"got: {tmp_path / 'nowhere'} {tmp_path / 'records'}" in result.stderr
    assert not (tmp_path / "records").exists()
