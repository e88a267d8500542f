"""The Lightning-free certification pipeline: grouped settings, and stopping cleanly between images."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rsbench.certify.pipeline.certification import Certification
from rsbench.certify.pipeline.records import read_rows
from rsbench.certify.pipeline.settings import CertifySettings, Protocol, SequentialSchedule, Speed, Subset
from tests.classifiers import IMAGES, SUBJECT

SETTINGS = CertifySettings(Protocol(n0=20, n=200, alpha=0.01), Subset(skip=2), Speed(batch_size=100))


def test_flat_config_keys_are_grouped() -> None:
    settings = CertifySettings.from_keys(n=500, skip=3, precision="bf16", mode="sequential", first_look=50, growth=3.0)
    assert settings.protocol == Protocol(n=500)
    assert settings.subset == Subset(skip=3)
    assert settings.speed == Speed(precision="bf16")
    assert settings.sequential == SequentialSchedule(first_look=50, growth=3.0)
    assert settings.mode == "sequential"
    assert settings.data_dependent is None
    dependent = CertifySettings.from_keys(sigma_mode="memory", sigma_iters=7, sigma_lr=0.01)
    assert dependent.data_dependent is not None
    assert (dependent.sigma_mode, dependent.data_dependent.search.iterations) == ("memory", 7)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"nn": 5}, r"unknown certify keys \['nn'\]"),
        ({"n": 0}, "certify.n must be an integer >= 1, got 0"),
        ({"batch_size": 1.5}, "certify.batch_size must be an integer >= 1"),
        ({"seed": -1}, "certify.seed must be an integer >= 0"),
        ({"growth": 1.0}, "certify.growth must be > 1"),
        ({"radius_cap": -1.0}, "certify.radius_cap must be > 0"),
        ({"precision": "int8"}, "certify.precision must be one of"),
        ({"mode": "fast"}, "certify.mode must be 'standard' or 'sequential'"),
        ({"sigma_mode": "adaptive"}, "certify.sigma_mode must be one of"),
        ({"sigma_mode": "data_dependent", "mode": "sequential"}, "set mode=standard"),
        ({"sigma_iters": -1}, "sigma_iters must be >= 0"),
    ],
)
def test_bad_values_are_refused_naming_the_key(keys: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CertifySettings.from_keys(**keys)


def test_stopping_between_images_keeps_every_row_and_resumes_to_the_same_result(tmp_path: Path) -> None:
    calls = []

    def stop_after_three() -> bool:
        calls.append(1)
        return len(calls) == 3

    stopped = Certification(SETTINGS, tmp_path / "stopped").run(SUBJECT, IMAGES, should_stop=stop_after_three)
    assert stopped.stopped
    assert stopped.summary is None
    assert [r.idx for r in read_rows(tmp_path / "stopped" / "certify.tsv")] == [0, 2, 4]
    assert not (tmp_path / "stopped" / "metrics.json").exists()

    resumed = Certification(SETTINGS, tmp_path / "stopped").run(SUBJECT, IMAGES)
    whole = Certification(SETTINGS, tmp_path / "whole").run(SUBJECT, IMAGES)
    assert not resumed.stopped
    key = lambda r: (r.idx, r.label, r.predict, r.radius, r.count)  # noqa: E731
    assert [key(r) for r in resumed.rows["certify"]] == [key(r) for r in whole.rows["certify"]]
    assert resumed.summary is not None
    assert whole.summary is not None
    assert resumed.summary["acr"] == whole.summary["acr"]
    metrics = json.loads((tmp_path / "stopped" / "metrics.json").read_text())
    assert (metrics["method"], metrics["dataset"], metrics["num_images"]) == ("test", "brightness", 6)
    assert "model" not in metrics  # no provenance given: nothing recorded


def test_metrics_record_the_environment_that_certified(tmp_path: Path) -> None:
    Certification(SETTINGS, tmp_path).run(SUBJECT, IMAGES)
    recorded = json.loads((tmp_path / "metrics.json").read_text())["environment"]
    assert recorded["torch"] == torch.__version__
    assert recorded["device"] == "cpu"  # where Brightness's parameter lives
    assert recorded["device_name"]  # the CPU's model name, whatever the machine
    assert recorded["threads"] == torch.get_num_threads()
