"""The embedded-MNIST study scripts' last step: every run's records copied under ``COMMIT`` and the reports made from
that copy, so that anyone can remake them from the repository and they name no folder of the machine that trained.

The runs are finished run folders written with rsbench's own writers (a script skips a run whose ``metrics.json``
exists), so only the copy-and-report tail runs here; the training each script does is the package's, tested elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rsbench.certify.pipeline.records import CertificationRow, write_record
from rsbench.certify.pipeline.summary import summarize, write_metrics

pytestmark = pytest.mark.study

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
IMAGES = 30


def finished_run(folder: Path, method: str, sigma: float, seed: int, shift: float, **hparams: float) -> None:
    """A run folder as a finished run leaves it: its certify.tsv rows, metrics.json, .hydra/ and training log."""
    rng = np.random.default_rng(seed)
    rows = [
        CertificationRow(
            idx=index,
            label=index % 10,
            predict=index % 10,
            radius=float(rng.uniform(0.0, sigma) + shift),
            correct=True,
            time=0.1,
            count=9_990,
            n=10_000,
            pA_lower=0.9,
            sigma=sigma,
        )
        for index in range(0, 10 * IMAGES, 10)
    ]
    folder.mkdir(parents=True)
    write_record(folder / "certify.tsv", rows)
    meta = {"method": method, "dataset": "mnist_embedded", "arch": "lenet", "seed": seed, "mode": "standard"}
    summary = summarize(rows, sigma=sigma, n0=100, n=10_000, alpha=0.001, extra=meta)
    summary["hparams"] = hparams
    write_metrics(summary, folder / "metrics.json")
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(f"- method={method}\n- sigma={sigma}\n- seed={seed}\n")
    (folder / ".hydra" / "config.yaml").write_text(f"seed: {seed}\nsigma: {sigma}\n")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "best.ckpt").write_text("not a record")
    (folder / "logs").mkdir()
    (folder / "logs" / "metrics.csv").write_text("epoch,train_acc\n0,0.5\n")


def run_script(name: str, root: Path, commit: str, **env: str) -> None:
    """``bash experiments/<name> <root>`` with ``COMMIT=<commit>``, this interpreter first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    result = subprocess.run(
        ["bash", str(EXPERIMENTS / name), str(root)],
        env={**os.environ, **env, "PATH": path, "COMMIT": commit},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_full_recipe_study_reports_from_its_committed_records(tmp_path: Path) -> None:
    root, commit = tmp_path / "study", tmp_path / "commit"
    for seed in (0, 1, 2):
        for method, shift in (("gaussian", 0.0), ("stability", 0.05), ("macer", 0.1)):
            finished_run(root / f"{method}_sigma1.0_seed{seed}", method, 1.0, seed, shift)
    run_script("embedded_mnist_full_recipe/run.sh", root, str(commit), SIGMAS="1.0")
    paired = pd.read_csv(commit / "report" / "paired.csv")
    assert sorted(paired["method"]) == ["macer", "stability"]  # each paired against Gaussian over its 3 seeds
    copied = {str(p.relative_to(commit / "runs")) for p in (commit / "runs").rglob("*") if p.is_file()}
    assert "gaussian_sigma1.0_seed2/certify.tsv" in copied
    assert "macer_sigma1.0_seed0/logs/training_metrics.csv" in copied
    assert not any("checkpoints" in name for name in copied)
    report = (commit / "report" / "report.md").read_text()
    assert str(root) not in report  # made from the copy, not from the output root
    assert not (root / "report").exists()


def test_the_catrs_lambda_study_reports_each_sigma_from_its_committed_records(tmp_path: Path) -> None:
    root, commit = tmp_path / "study", tmp_path / "commit"
    (root / "teacher_gaussian_sigma0.25" / "checkpoints").mkdir(parents=True)
    (root / "teacher_gaussian_sigma0.25" / "checkpoints" / "best.ckpt").write_text("a teacher")
    for sigma in (1.0, 0.5):
        finished_run(root / f"gaussian_sigma{sigma}", "gaussian", sigma, 0, 0.0)
        for lbd, shift in ((1.0, 0.05), (2.0, 0.1)):
            finished_run(root / f"catrs_sigma{sigma}_lbd{lbd}", "catrs", sigma, 0, shift, lbd=lbd)
    run_script("embedded_mnist_catrs_lambda/run.sh", root, str(commit), SIGMAS="1.0")  # one sigma: half the time
    assert (commit / "runs" / "catrs_sigma0.5_lbd1.0" / "certify.tsv").is_file()  # every run's records are copied
    assert not (commit / "report" / "sigma0.5").exists()
    for sigma in (1.0,):
        against_gaussian = pd.read_csv(commit / "report" / f"sigma{sigma}" / "paired.csv")
        assert len(against_gaussian) == 2  # both lambdas against Gaussian
        against_lambda_1 = pd.read_csv(commit / "report" / f"sigma{sigma}_vs_lbd1" / "paired.csv")
        assert len(against_lambda_1) == 1  # lambda 2 against lambda 1
        for report in (f"sigma{sigma}", f"sigma{sigma}_vs_lbd1"):
            assert str(root) not in (commit / "report" / report / "report.md").read_text()
        assert (commit / "runs" / f"catrs_sigma{sigma}_lbd2.0" / "certify.tsv").is_file()
    assert not (root / "report").exists()  # nothing written beside the machine's runs
