"""``experiments/embedded_mnist_study/run.sh`` end to end on the smoke recipe: its run modes give the same job
folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.study

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "experiments" / "embedded_mnist_study" / "run.sh"


def study(sweep: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    """The study script on the smoke recipe (Gaussian, sigma 0.5, seeds 0 and 1) into ``sweep``."""
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),  # its `python`
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
        "RSBENCH_KEEP_ALLOCATOR": "1",
        "WANDB_MODE": "offline",
        "SWEEP": str(sweep),
        "EXPERIMENT": "smoke",
        "METHODS": "gaussian",
        "SIGMAS": "0.5",
        "SEEDS": "0,1",
        **settings,
    }
    command = ["bash", str(SCRIPT), "trainer.enable_progress_bar=false", "logger=none"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # 44 s on 2 idle cores: several runs, one process each, then the report
def test_one_process_per_run_fills_the_folders_one_sweep_would_and_ends_in_the_report(tmp_path: Path) -> None:
    result = study(tmp_path / "runs", PARALLEL="runs")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs = sorted(p.name for p in (tmp_path / "runs" / "gaussian" / "sigma0.5").iterdir() if p.is_dir())
    assert jobs == [  # the names `-m seed=0,1` gives its jobs 0 and 1
        "0_experiment-smoke_method-gaussian_seed-0_sigma-0.5",
        "1_experiment-smoke_method-gaussian_seed-1_sigma-0.5",
    ]
    assert all((tmp_path / "runs" / "gaussian" / "sigma0.5" / job / "metrics.json").is_file() for job in jobs)
    assert sorted(p.name for p in (tmp_path / "runs" / "logs").iterdir()) == [
        "gaussian_sigma0.5.log",
        "gaussian_sigma0.5_seed0.log",
        "gaussian_sigma0.5_seed1.log",
    ]
    assert "| gaussian " in (tmp_path / "runs" / "report" / "report.md").read_text()


def test_an_unknown_parallel_mode_is_refused_before_any_run(tmp_path: Path) -> None:
    result = study(tmp_path / "runs", PARALLEL="yes")
    assert result.returncode == 2
    assert "PARALLEL=yes: use 0 (one sweep after another), 1 (every sweep at once) or runs" in result.stderr
    assert not (tmp_path / "runs").exists()
