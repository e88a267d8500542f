"""The results table built from metrics.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rsbench.table import main

METRICS = {
    "acr": 0.5123,
    "certified_accuracy": {"0.0": 0.9, "0.25": 0.8, "0.5": 0.5, "0.75": 0.25},
    "num_images": 100,
    "method": "gaussian",
    "dataset": "cifar10",
    "arch": "cifar_resnet110",
    "sigma": 0.25,
    "n": 100000,
    "alpha": 0.001,
}


def test_table_lists_every_run_and_marks_unsound_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dependent = {
        "sigma": 0.5,
        "sound": False,
        "sigma_mode": "data_dependent",
        "fixed_sigma": {**METRICS, "acr": 0.4},
    }
    for job, extra in (("0", {}), ("1", data_dependent)):
        (tmp_path / job).mkdir()
        (tmp_path / job / "metrics.json").write_text(json.dumps({**METRICS, **extra}))
    main([str(tmp_path), "--radii", "0", "0.5", "1"])
    lines = capsys.readouterr().out.splitlines()
    header = "| method | dataset | arch | sigma | n | alpha | images | samples/img | ACR | r=0 | r=0.5 | r=1 | run |"
    assert lines[0] == header
    expected = (
        "| gaussian | cifar10 | cifar_resnet110 | 0.25 | 100,000 | 0.001 | 100 | 100,000 | 0.512 | 90.0 | 50.0 | - |"
    )
    assert lines[2] == f"{expected} {tmp_path / '0'} |"
    assert lines[3].startswith("| gaussian (fixed sigma, sound) | cifar10 | cifar_resnet110 | 0.25 |")
    assert "| 0.400 |" in lines[3]
    assert lines[4].startswith("| gaussian (data_dependent sigma, not sound) | cifar10 | cifar_resnet110 | 0.5 |")


def test_table_without_runs_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
