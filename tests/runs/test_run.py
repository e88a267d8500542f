"""End to end on the embedded MNIST subset: train, certify, the output contract, checkpoints, resume, W&B."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import wandb
from omegaconf import DictConfig

from rsbench.certify.algorithm.bounds import radius_cap
from rsbench.certify.pipeline.records import COLUMNS, read_rows
from rsbench.errors import CheckpointMismatchError, ProtocolMismatchError
from rsbench.runs.run import describe_method, run
from tests.helpers import ROOT, SMOKE, ComposeFn, compose_config


def certify_cfg(checkpoint: Path, output_dir: Path, *overrides: str) -> DictConfig:
    return compose_config(*SMOKE, "train=false", f"ckpt_path={checkpoint}", *overrides, output_dir=output_dir)


def test_smoke_run_writes_the_output_contract(smoke_run: Path) -> None:
    tsv = (smoke_run / "certify.tsv").read_text().splitlines()
    assert tuple(tsv[0].split("\t")) == COLUMNS
    assert tsv[0].split("\t")[:6] == ["idx", "label", "predict", "radius", "correct", "time"]
    rows = read_rows(smoke_run / "certify.tsv")
    assert [r.idx for r in rows] == list(range(8))  # certify=smoke: max_images=8

    metrics = json.loads((smoke_run / "metrics.json").read_text())
    for key in ("acr", "certified_accuracy", "abstain_rate", "num_images", "method", "dataset", "arch", "sigma"):
        assert key in metrics
    assert (metrics["n0"], metrics["n"], metrics["alpha"]) == (16, 200, 0.01)
    assert (metrics["method"], metrics["dataset"], metrics["arch"]) == ("gaussian", "mnist_embedded", "lenet")
    assert metrics["num_images"] == 8
    assert metrics["subset"]["indices"] == list(range(8))
    assert metrics["sound"] is True
    assert (metrics["certified_epoch"], metrics["method_epoch"]) == (0, 0)  # best.ckpt of the one epoch; Gaussian

    radii = np.array([r.radius for r in rows])
    correct = np.array([r.correct for r in rows])
    assert metrics["acr"] == pytest.approx(float(np.mean(correct * radii)), abs=1e-12)
    cap = radius_cap(0.25, 200, 0.01)
    assert radii.max() <= cap
    expected_grid = [str(0.25 * k) for k in range(math.floor(cap / 0.25) + 1)]
    assert list(metrics["certified_accuracy"]) == expected_grid
    for key, value in metrics["certified_accuracy"].items():
        assert value == pytest.approx(float(np.mean(correct & (radii >= float(key)))))
    assert metrics["abstain_rate"] == pytest.approx(float(np.mean([r.predict == -1 for r in rows])))

    assert (smoke_run / "certified_accuracy.png").stat().st_size > 1000
    assert (smoke_run / "checkpoints" / "best.ckpt").is_file()
    assert (smoke_run / "checkpoints" / "last.ckpt").is_file()


def test_checkpoint_records_signature(smoke_run: Path) -> None:
    checkpoint = torch.load(smoke_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert checkpoint["rsbench"] == {
        "arch": "lenet",
        "num_classes": 10,
        "input_layer": {"kind": "identity", "mean": [], "std": []},
        "sigma": 0.25,
        "method": "gaussian",
        "dataset": "mnist_embedded",  # what rsbench.certify warns about when asked to certify another dataset
    }


def test_certify_a_checkpoint_without_training_on_a_chosen_subset(smoke_run: Path, tmp_path: Path) -> None:
    overrides = ("certify.start=3", "certify.skip=2", "certify.max_images=5")
    acr = run(certify_cfg(smoke_run / "checkpoints" / "best.ckpt", tmp_path, *overrides))
    rows = read_rows(tmp_path / "certify.tsv")
    assert [r.idx for r in rows] == [3, 5, 7, 9, 11]
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert acr == pytest.approx(metrics["acr"], rel=1e-6)
    assert metrics["certified_epoch"] == 0  # the given checkpoint's epoch
    assert not (tmp_path / "checkpoints").exists()


def test_certification_is_reproducible_and_extends_without_recomputing(smoke_run: Path, tmp_path: Path) -> None:
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    run(certify_cfg(checkpoint, tmp_path / "a", "certify.max_images=3"))
    first = (tmp_path / "a" / "certify.tsv").read_text()
    run(certify_cfg(checkpoint, tmp_path / "a", "certify.max_images=6"))
    extended = read_rows(tmp_path / "a" / "certify.tsv")
    assert (tmp_path / "a" / "certify.tsv").read_text().startswith(first)  # old rows untouched
    run(certify_cfg(checkpoint, tmp_path / "b", "certify.max_images=6"))
    fresh = read_rows(tmp_path / "b" / "certify.tsv")
    strip = [(r.idx, r.predict, r.radius, r.count) for r in extended]
    assert strip == [(r.idx, r.predict, r.radius, r.count) for r in fresh]


def test_other_protocol_in_the_same_directory_is_refused_and_nothing_is_lost(smoke_run: Path, tmp_path: Path) -> None:
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    run(certify_cfg(checkpoint, tmp_path, "certify.max_images=2"))
    before = (tmp_path / "certify.tsv").read_text()
    with pytest.raises(ProtocolMismatchError, match="n: stored 200, requested 300"):
        run(certify_cfg(checkpoint, tmp_path, "certify.max_images=2", "certify.n=300"))
    assert (tmp_path / "certify.tsv").read_text() == before


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("arch=cifar_resnet20", "arch: checkpoint has 'lenet', this run expects 'cifar_resnet20'"),
        ("sigma=0.5", "sigma: checkpoint has 0.25, this run expects 0.5"),
        ("dataset.input_layer.kind=center dataset.input_layer.mean=[0.1307]", "input_layer: checkpoint has"),
        ("dataset.num_classes=7", "num_classes: checkpoint has 10, this run expects 7"),
    ],
)
def test_mismatched_checkpoint_is_refused_by_name(smoke_run: Path, tmp_path: Path, override: str, message: str) -> None:
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    with pytest.raises(CheckpointMismatchError, match=message) as error:
        run(certify_cfg(checkpoint, tmp_path, *override.split()))
    assert str(checkpoint) in str(error.value)


def test_sigma_mismatch_can_be_allowed_on_purpose(smoke_run: Path, tmp_path: Path) -> None:
    cfg = certify_cfg(smoke_run / "checkpoints" / "best.ckpt", tmp_path, "sigma=0.5", "allow_sigma_mismatch=true")
    run(cfg)
    assert json.loads((tmp_path / "metrics.json").read_text())["sigma"] == 0.5


def test_training_resumes_from_a_checkpoint(smoke_run: Path, tmp_path: Path) -> None:
    last = smoke_run / "checkpoints" / "last.ckpt"
    cfg = compose_config(*SMOKE, f"ckpt_path={last}", "trainer.max_epochs=2", "certify=off", output_dir=tmp_path)
    run(cfg)
    first = torch.load(last, map_location="cpu", weights_only=False)
    resumed = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert resumed["epoch"] == first["epoch"] + 1  # one more epoch on top of the restored one
    assert resumed["global_step"] == first["global_step"] + 4  # limit_train_batches=4, earlier steps restored


def test_last_checkpoint_is_the_latest_epoch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # lr = 0: the validation accuracy never improves after the first epoch, so the best epoch (0) is not the last (2)
    overrides = ("trainer.max_epochs=3", "optimizer.lr=0.0", "certify=off", "test_ckpt=last")
    with caplog.at_level(logging.INFO, logger="rsbench.runs.run"):
        run(compose_config(*SMOKE, *overrides, output_dir=tmp_path))
    best = torch.load(tmp_path / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    assert (best["epoch"], last["epoch"]) == (0, 2)
    assert f"testing and certifying {tmp_path / 'checkpoints' / 'last.ckpt'}" in caplog.text
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]


def test_wandb_logger_gets_config_curve_table_and_artifact(smoke_run: Path, tmp_path: Path, monkeypatch) -> None:
    """A real offline W&B run; its calls are recorded on the way through (nothing is mocked out)."""
    seen: dict[str, object] = {"logged": set(), "artifacts": []}
    original_log, original_artifact, original_finish = wandb.Run.log, wandb.Run.log_artifact, wandb.Run.finish

    def log(self, data, *args, **kwargs):
        seen["logged"] |= set(data)
        return original_log(self, data, *args, **kwargs)

    def log_artifact(self, artifact, *args, **kwargs):
        seen["artifacts"].append((artifact.type, sorted(artifact.manifest.entries)))
        return original_artifact(self, artifact, *args, **kwargs)

    def finish(self, *args, **kwargs):
        seen["config"] = dict(self.config)
        seen["summary"] = dict(self.summary)
        return original_finish(self, *args, **kwargs)

    monkeypatch.setattr(wandb.Run, "log", log)
    monkeypatch.setattr(wandb.Run, "log_artifact", log_artifact)
    monkeypatch.setattr(wandb.Run, "finish", finish)
    cfg = compose_config(*SMOKE, "logger=wandb", "trainer.max_epochs=1", output_dir=tmp_path)
    run(cfg)
    assert {"certify/curve", "certify/curve_table", "certify/plot"} <= seen["logged"]
    assert ("certification", ["certify.tsv", "metrics.json"]) in seen["artifacts"]
    assert seen["config"]["dataset"]["name"] == "mnist_embedded"
    assert seen["config"]["sigma"] == 0.25
    assert "certify/acr" in seen["summary"]
    assert any(key.startswith("certify/acc@") for key in seen["summary"])
    assert "train/loss_epoch" in seen["summary"]
    assert list((tmp_path / "wandb").glob("offline-run-*"))


def rsbench_command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "rsbench", *overrides]


@pytest.mark.slow  # 30-60 s on a quiet 2-core machine: make test-all
def test_interrupted_certification_resumes_without_losing_or_duplicating_rows(smoke_run: Path, tmp_path: Path) -> None:
    """kill -9 a certification in the middle, rerun it into the same directory, compare to an uninterrupted run."""
    checkpoint = smoke_run / "checkpoints" / "best.ckpt"
    overrides = (
        "train=false",
        f"ckpt_path={checkpoint}",
        "logger=none",
        "certify=smoke",
        "certify.n=2000",
        "certify.batch_size=1000",
        "certify.max_images=30",
        "trainer.enable_progress_bar=false",
    )
    env = {**os.environ, "RSBENCH_KEEP_ALLOCATOR": "1"}
    interrupted = tmp_path / "interrupted"
    tsv = interrupted / "certify.tsv"
    process = subprocess.Popen(
        rsbench_command(*overrides, f"hydra.run.dir={interrupted}"),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if tsv.exists() and len(tsv.read_text().splitlines()) > 5:
            break
        if process.poll() is not None:
            pytest.fail("certification ended before it could be interrupted")
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = len(read_rows(tsv))
    assert 4 <= written < 30, written

    subprocess.run(
        rsbench_command(*overrides, f"hydra.run.dir={interrupted}"), cwd=ROOT, env=env, check=True, capture_output=True
    )
    resumed = read_rows(tsv)
    assert [r.idx for r in resumed] == list(range(30))

    reference = tmp_path / "reference"
    run(certify_cfg(checkpoint, reference, "certify.n=2000", "certify.batch_size=1000", "certify.max_images=30"))
    expected = read_rows(reference / "certify.tsv")
    assert [(r.idx, r.predict, r.radius, r.count) for r in resumed] == [
        (r.idx, r.predict, r.radius, r.count) for r in expected
    ]
    assert json.loads((interrupted / "metrics.json").read_text())["acr"] == pytest.approx(
        json.loads((reference / "metrics.json").read_text())["acr"]
    )


@pytest.mark.slow  # 35 s on 2 idle cores: a sweep of full runs with the W&B logger
def test_multirun_sweep_makes_one_wandb_run_per_job(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    subprocess.run(
        rsbench_command(
            "-m",
            "experiment=smoke",
            "logger=wandb",
            "sigma=0.25,0.5",
            "trainer.enable_progress_bar=false",
            f"hydra.sweep.dir={sweep}",
        ),
        cwd=ROOT,
        env={**os.environ, "WANDB_MODE": "offline", "RSBENCH_KEEP_ALLOCATOR": "1"},
        check=True,
        capture_output=True,
    )
    runs = sorted(p.name for p in sweep.glob("*/wandb/offline-run-*"))
    assert len(runs) == 2
    assert runs[0].split("-")[-1] != runs[1].split("-")[-1]  # two distinct run ids
    jobs = sorted(p.parent.name for p in sweep.glob("*/metrics.json"))
    assert jobs == ["0_experiment-smoke_sigma-0.25", "1_experiment-smoke_sigma-0.5"]  # folders say what they vary
    sigmas = [json.loads((sweep / job / "metrics.json").read_text())["sigma"] for job in jobs]
    assert sigmas == [0.25, 0.5]


def test_the_method_line_says_whose_values_a_family_lookup_took(make_cfg: ComposeFn) -> None:
    """Fashion-MNIST takes MNIST's published hyperparameters (``dataset.family``): the run's log says so."""
    fashion = describe_method(make_cfg("dataset=fashion_mnist", "method=stability", "sigma=0.5"))
    assert fashion.startswith("StabilityTraining on fashion_mnist at sigma=0.5: lbd=2.0*")
    assert "looked up for mnist (the family of fashion_mnist) at this sigma" in fashion
    mnist = describe_method(make_cfg("dataset=mnist", "method=stability", "sigma=0.5"))
    assert "looked up for mnist at this sigma" in mnist
