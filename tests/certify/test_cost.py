"""Cost as data (issue 41): every run's ``metrics.json["cost"]`` in the fixed schema, and the report's cost column."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from rsbench.certify.pipeline.certification import Certification
from rsbench.certify.pipeline.cost import certification_cost
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.report.cost import Cost, run_cost, total_cost
from rsbench.runs.run import run
from tests.classifiers import IMAGES, SUBJECT
from tests.helpers import SMOKE, compose_config
from tests.run_folders import make_run, radii_of, run_report

SCHEMA = {
    "device",
    "device_name",
    "torch",
    "precision",
    "threads",
    "train_seconds",
    "certify_seconds",
    "samples",
    "images",
}  # the preamble's, which the leaderboard reads too
CPU = {"device": "cpu", "device_name": "AMD EPYC", "torch": "2.14.1", "threads": 2}


def row(idx: int, n: int, seconds: float) -> CertificationRow:
    return CertificationRow(idx, 1, 1, 0.5, True, seconds, n, n, 0.9, 0.25)


def test_the_cost_object_has_the_schema_and_sums_the_rows() -> None:
    rows = [row(0, 1000, 1.5), row(5, 400, 0.5)]
    cost = certification_cost({"certify": rows}, n0=100, environment=CPU, precision="bf16", train_seconds=60.0)
    assert set(cost) == SCHEMA
    assert (cost["certify_seconds"], cost["samples"], cost["images"]) == (2.0, 100 + 1000 + 100 + 400, 2)
    assert (cost["precision"], cost["threads"], cost["train_seconds"]) == ("bf16", 2, 60.0)
    sharded = certification_cost(
        {"certify": rows}, n0=100, environment=CPU, precision="fp32", shards={0: CPU, 1: {**CPU, "device": "cuda"}}
    )
    assert [(s["shard"], s["samples"], s["device"]) for s in sharded["shards"]] == [(0, 1100, "cpu"), (1, 500, "cuda")]


def test_every_certification_records_its_cost(tmp_path: Path) -> None:
    settings = CertifySettings.from_keys(n0=20, n=200, alpha=0.01, batch_size=100, skip=2)
    Certification(settings, tmp_path, train_seconds=12.5).run(SUBJECT, IMAGES)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    cost = metrics["cost"]
    assert set(cost) == SCHEMA
    times = [float(line.split("\t")[5]) for line in (tmp_path / "certify.tsv").read_text().splitlines()[1:]]
    assert cost["certify_seconds"] == pytest.approx(sum(times), abs=1e-3)  # rounded to the millisecond
    assert (cost["samples"], cost["images"], cost["train_seconds"]) == (6 * (20 + 200), 6, 12.5)
    assert cost["device"] == "cpu"
    assert cost["threads"] == metrics["environment"]["threads"]


def test_a_certification_resumed_on_another_machine_says_which_rows_each_certified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 of 6 images on machine A, stopped; resumed on A (nothing new recorded), stopped again; finished on B."""
    from rsbench.certify.pipeline import certification

    settings = CertifySettings.from_keys(n0=20, n=200, alpha=0.01, batch_size=100, skip=2)
    machines = {"A": {**CPU, "device_name": "A"}, "B": {**CPU, "device_name": "B", "threads": 1}}
    calls: list[int] = []

    def certify_on(machine: str, stop_at: int | None) -> None:
        monkeypatch.setattr(certification, "environment", lambda device: dict(machines[machine]))
        calls.clear()
        stop = (lambda: (calls.append(1), len(calls) == stop_at)[1]) if stop_at else None
        Certification(settings, tmp_path).run(SUBJECT, IMAGES, should_stop=stop)

    certify_on("A", 3)
    certify_on("A", 1)  # the same machine again: one more row, no new segment
    certify_on("B", None)
    segments = certification.read_segments(tmp_path)
    assert [(s["device_name"], s["rows"]) for s in segments] == [("A", {"certify": 0}), ("B", {"certify": 4})]
    cost = json.loads((tmp_path / "metrics.json").read_text())["cost"]
    assert cost["device_name"] == "A + B"
    assert [(s["device_name"], s["threads"], s["images"]) for s in cost["segments"]] == [("A", 2, 4), ("B", 1, 2)]
    times = [float(line.split("\t")[5]) for line in (tmp_path / "certify.tsv").read_text().splitlines()[1:]]
    assert [s["certify_seconds"] for s in cost["segments"]] == pytest.approx([sum(times[:4]), sum(times[4:])], abs=2e-3)
    assert sum(s["samples"] for s in cost["segments"]) == cost["samples"]
    assert (
        certification_cost({"certify": []}, n0=1, environment=CPU, precision="fp32", segments=segments[:1]).keys()
        == SCHEMA
    )


def test_run_cost_reads_new_and_old_records() -> None:
    new = {"cost": {**CPU, "train_seconds": 3600.0, "certify_seconds": 1800.0}}
    assert run_cost(new) == Cost(core_hours=3.0)  # (3600 + 1800) s x 2 threads
    gpu = {"cost": {"device": "cuda", "threads": 16, "train_seconds": None, "certify_seconds": 7200.0}}
    assert run_cost(gpu) == Cost(gpu_hours=2.0, train_known=False)  # threads do not multiply GPU time
    shards = {"cost": {**CPU, "train_seconds": None, "shards": [{**CPU, "certify_seconds": 3600.0}, gpu["cost"]]}}
    assert run_cost(shards) == Cost(gpu_hours=2.0, core_hours=2.0, train_known=False)
    old = {"environment": {"device": "cpu", "threads": 4}}  # before the cost object: the rows' time column
    assert run_cost(old, time_sum=900.0) == Cost(core_hours=1.0, train_known=False, recorded=False)
    assert run_cost({}, time_sum=None) is None
    assert total_cost([Cost(core_hours=1.0), Cost(gpu_hours=0.5)]) == Cost(gpu_hours=0.5, core_hours=1.0)
    assert total_cost([Cost(core_hours=1.0), None]) is None


def test_the_report_shows_what_each_row_cost(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    recorded = {"cost": {**CPU, "precision": "fp32", "train_seconds": 1800.0, "certify_seconds": 1800.0}}
    make_run(tmp_path / "runs" / "new", radii_of(rng), extra=recorded)
    make_run(tmp_path / "runs" / "new_seed", radii_of(rng), seed=1, extra=recorded)
    make_run(tmp_path / "runs" / "old", radii_of(rng), method="macer")  # no cost: 60 rows of 0.1 s, one core
    frame = run_report(tmp_path, str(tmp_path / "runs")).set_index("method")
    assert frame.at["gaussian", "cost"] == "4 core-h"  # two seeds x 3600 s x 2 threads
    assert frame.at["macer", "cost"] == "0.0017 core-h*"  # 6 s, training unknown
    assert math.isclose(frame.at["macer", "core_hours"], 6 / 3600)
    table = (tmp_path / "report" / "report.md").read_text()
    assert "| cost " in table
    assert "core-hours (seconds x threads) on a CPU" in table


def clock(run_dir: Path, name: str) -> float:
    """The training seconds a checkpoint's clock recorded (Lightning's ``Timer`` state)."""
    state = torch.load(run_dir / "checkpoints" / name, map_location="cpu", weights_only=False)
    return float(state["callbacks"]["Timer"]["time_elapsed"]["train"])


def assert_trained_seconds_are_the_epochs_own(run_dir: Path) -> None:
    """metrics.json's training seconds are last.ckpt's clock (saved at the end of the last epoch) plus only the
    moments between that save and the end of training: far less than half of best.ckpt's, which the test stage's
    reload of best.ckpt used to add once more (the bound that tells the two apart)."""
    trained = json.loads((run_dir / "metrics.json").read_text())["cost"]["train_seconds"]
    last, best = clock(run_dir, "last.ckpt"), clock(run_dir, "best.ckpt")
    assert 0 < best < last
    assert -5e-4 <= trained - last < best / 2, (trained, last, best)  # (metrics.json keeps milliseconds)


def test_training_seconds_are_the_epochs_trained_when_the_best_epoch_is_not_the_last(tmp_path: Path) -> None:
    # lr = 0: the validation accuracy never improves after the first epoch, so best.ckpt is epoch 0 and last.ckpt 2
    run(compose_config(*SMOKE, "trainer.max_epochs=3", "optimizer.lr=0.0", output_dir=tmp_path))
    assert torch.load(tmp_path / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)["epoch"] == 0
    assert_trained_seconds_are_the_epochs_own(tmp_path)


def test_training_seconds_sum_the_sessions_of_a_resumed_run_and_survive_a_rerun_after_training(tmp_path: Path) -> None:
    """Two epochs, then two more resumed from last.ckpt (best stays epoch 0 of the first session): the sum of both
    sessions, not the second plus best.ckpt's. Run again once training is done (straight to testing): last.ckpt's."""
    overrides = (*SMOKE, "optimizer.lr=0.0")
    run(compose_config(*overrides, "trainer.max_epochs=2", "certify=off", output_dir=tmp_path))
    first = clock(tmp_path, "last.ckpt")
    run(compose_config(*overrides, "trainer.max_epochs=4", output_dir=tmp_path))
    assert clock(tmp_path, "last.ckpt") > first  # the second session's epochs came on top of the first's
    assert_trained_seconds_are_the_epochs_own(tmp_path)
    run(compose_config(*overrides, "trainer.max_epochs=4", output_dir=tmp_path))  # finished: certification only
    trained = json.loads((tmp_path / "metrics.json").read_text())["cost"]["train_seconds"]
    assert trained == pytest.approx(clock(tmp_path, "last.ckpt"), abs=5e-4 + 1e-9)  # last.ckpt's, in ms (rounded)
