"""``tools/run_facts.py``: a run's settings, epochs, restarts and certification machine, read from its records."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.scripts import tool_script

pytestmark = pytest.mark.study


def training_log(run: Path, steps: list[tuple[int, int]], epochs: int) -> None:
    """A Lightning CSV log: per-step rows (epoch, step), then one row per epoch with its loss."""
    rows = [{"epoch": e, "step": s, "train/loss_step": 0.5} for e, s in steps]
    rows += [{"epoch": e, "step": 100 * e + 99, "train/loss_epoch": 0.4} for e in range(epochs)]
    rows.append({"epoch": 0, "step": 0, "test/acc_noisy": 0.9})  # evaluation rows reuse step numbers: not a restart
    (run / "logs").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(run / "logs" / "training_metrics.csv", index=False)


def hydra(run: Path, overrides: list[str]) -> None:
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))


def test_a_run_cut_during_an_epoch_and_resumed_from_the_epoch_before_shows_the_steps_trained_twice(
    tmp_path: Path,
) -> None:
    run = tmp_path / "runs" / "gaussian_sigma0.5"
    hydra(run, ["method=gaussian", "sigma=0.5", "data_dir=/somewhere", "hydra.run.dir=/x", "dataset.num_workers=0"])
    steps = [(0, 9), (0, 19), (1, 109), (1, 119), (1, 129), (1, 109), (1, 119), (1, 129), (1, 139), (2, 209)]
    training_log(run, steps, epochs=3)
    row = tool_script("run_facts").facts(run, tmp_path / "runs")
    assert row["run"] == "gaussian_sigma0.5"
    assert row["overrides"] == "method=gaussian sigma=0.5"  # where files were is not a setting
    assert row["epochs"] == "3 (0-2)"
    assert row["restarts"] == "epoch 1: steps 109-129 trained again"
    assert row["certified on"] == "-"  # training only


def test_a_certified_run_names_its_machine_its_hyperparameters_and_its_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "macer_sigma0.25"
    hydra(run, ["method=macer", "sigma=0.25"])
    training_log(run, [(0, 9), (0, 19), (1, 109)], epochs=2)
    environment = {"device": "cpu", "device_name": "Intel Xeon", "threads": 2, "torch": "2.14.1"}
    summary = {"num_images": 3, "acr": 0.72856, "hparams": {"sigma": 0.25, "lbd": 16.0}, "environment": environment}
    (run / "metrics.json").write_text(json.dumps({**summary, "precision": "fp32", "channels_last": True}))
    pd.DataFrame({"idx": [0, 20, 40], "time": [4.0, 5.0, 9.0]}).to_csv(run / "certify.tsv", sep="\t", index=False)
    assert tool_script("run_facts").main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if "macer_sigma0.25" in line)
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells == [
        "macer_sigma0.25",
        "method=macer sigma=0.25 (lbd=16.0)",
        "2 (0-1)",
        "none seen",
        "Intel Xeon, 2 threads, torch 2.14.1",
        "fp32+channels-last",
        "3",
        "0.729",
        "5",
    ]


def test_a_folder_without_runs_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool_script("run_facts").main([str(tmp_path)]) == 2
    assert capsys.readouterr().out == f"run_facts: error: no run folder (one with .hydra/) under {tmp_path}\n"
