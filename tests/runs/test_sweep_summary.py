"""The sweep summary when several commands share one sweep folder: a job another live process runs is no failure."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from rsbench.runs.lock import RunLock, is_held
from rsbench.runs.status import write_status
from rsbench.runs.sweep import ELSEWHERE, SUMMARY, SweepSummary


def summarise(sweep: Path) -> dict[str, str]:
    """Run the callback on ``sweep``; the status of each job in the summary file."""
    SweepSummary().on_multirun_end(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}}))
    with (sweep / SUMMARY).open() as file:
        return {row["job"]: row["status"] for row in csv.DictReader(file, delimiter="\t")}


def test_a_job_running_in_another_process_is_listed_and_is_no_failure(tmp_path: Path) -> None:
    write_status(tmp_path / "0_seed=0", "completed", ["seed=0"], objective=1.2)
    write_status(tmp_path / "1_seed=1", "running", ["seed=1"])
    with RunLock(tmp_path / "1_seed=1"):  # its process is alive: the lock is held
        assert is_held(tmp_path / "1_seed=1")
        assert summarise(tmp_path) == {"0_seed=0": "completed", "1_seed=1": ELSEWHERE}
    assert not is_held(tmp_path / "1_seed=1")
    with pytest.raises(SystemExit) as stopped:  # its process died without a final status: a failure
        summarise(tmp_path)
    assert stopped.value.code == 1
    assert not is_held(tmp_path / "0_seed=0")  # never locked: no lock file
