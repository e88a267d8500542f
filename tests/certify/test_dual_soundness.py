"""What a dual certification refuses (certify/pipeline/dual_checks.py): unsound expert records, other threat models.

A dual certificate is the smaller of two l2 radii of Gaussian smoothing at fixed sigmas, so an expert's own
certification may stand in for the routed expert only when it is one too: a DDRS record (per-input sigma), a Laplace
l1 record, a record of other grid noise, dataset or precision, or one with a row marked unsound must be refused by
name. The records here are tiny hand-built ones (one row each) with the protocol an rsbench certification stores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from omegaconf import DictConfig

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.pipeline.dual_checks import check_dual_threat
from rsbench.certify.pipeline.records import CertificationRow, write_protocol, write_record
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.errors import ConfigError
from rsbench.models import dual as dual_models
from tests.helpers import ROOT, compose_config

SIGMA = 0.5
DATASET = "mnist_embedded"
HEAVY = ("torch", "scipy", "pandas", "pytorch_lightning")


@pytest.fixture(scope="module")
def cfg() -> DictConfig:
    return compose_config("certify=smoke", config_name="dual")


@pytest.fixture(scope="module")
def expert() -> SimpleNamespace:
    torch.manual_seed(0)
    return SimpleNamespace(sigma=SIGMA, classifier=torch.nn.Linear(2, 2))


def good_row(idx: int = 0) -> CertificationRow:
    """A sound Gaussian l2 row: label and prediction 3, pA_lower 0.9, the radius it certifies at SIGMA."""
    radius = SIGMA * NormalDist().inv_cdf(0.9)
    return CertificationRow(idx, 3, 3, radius, True, 0.1, 195, 200, 0.9, SIGMA)


def write_expert(folder: Path, cfg: DictConfig, expert: Any, row: CertificationRow, **changes: Any) -> Path:
    """An expert's certification of image 0 as rsbench.certify stores it, with ``changes`` to its protocol.

    ``metrics.<key>`` changes go to metrics.json instead.
    """
    settings = CertifySettings.from_config(cfg.certify)
    protocol = {
        "n0": settings.protocol.n0,
        "n": settings.protocol.n,
        "alpha": settings.protocol.alpha,
        "seed": settings.protocol.seed,
        "mode": settings.mode,
        "sigma": SIGMA,
        "model_fingerprint": weights_fingerprint(expert.classifier),
        "dataset": DATASET,
        "precision": "fp32",
    }
    metrics: dict[str, Any] = {"sound": True, "sigma": SIGMA}
    for key, value in changes.items():
        target, name = (metrics, key.split(".", 1)[1]) if key.startswith("metrics.") else (protocol, key)
        target[name] = value
    write_protocol(folder, protocol)
    write_record(folder / "certify.tsv", [row])
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def read(folder: Path, cfg: DictConfig, expert: Any, *overrides: str) -> Any:
    certify = compose_config("certify=smoke", *overrides, config_name="dual").certify if overrides else cfg.certify
    settings = CertifySettings.from_config(certify)
    return dual_models.expert_record_reader([str(folder)], [expert], settings, [0], DATASET)(0)


def test_a_sound_expert_record_is_read_back(tmp_path: Path, cfg: DictConfig, expert: Any) -> None:
    """The fixture itself passes every check (so each refusal below is about its one change)."""
    certificates = read(write_expert(tmp_path, cfg, expert, good_row()), cfg, expert)
    assert (certificates[0].prediction, certificates[0].radius) == (3, good_row().radius)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"sigma_mode": "data_dependent"}, "sigma_mode 'data_dependent'"),
        ({"metrics.sigma_mode": "memory"}, "sigma_mode 'memory'"),
        ({"metrics.sound": False}, "sound False"),
        ({"noise": "laplace", "norm": "l1"}, "noise 'laplace' and norm 'l1'"),
        ({"norm": "linf"}, "norm 'linf'"),
        ({"noise_grid": 255}, "noise_grid 255 (allowed: None"),
        ({"dataset": "fashion_mnist"}, "dataset 'fashion_mnist' (allowed: 'mnist_embedded'"),
        ({"precision": "bf16"}, "precision 'bf16' (allowed: 'fp32'"),
    ],
)
def test_an_unsound_or_foreign_expert_record_is_refused_by_name(
    tmp_path: Path, cfg: DictConfig, expert: Any, changes: dict[str, Any], named: str
) -> None:
    folder = write_expert(tmp_path, cfg, expert, good_row(), **changes)
    with pytest.raises(ConfigError, match="not a sound Gaussian l2 certificate") as refused:
        read(folder, cfg, expert)
    assert named in str(refused.value)
    assert "allowed" in str(refused.value)


@pytest.mark.parametrize(
    ("row", "named"),
    [
        (replace(good_row(), sound=False), "image 0: sound false (allowed: true)"),
        (replace(good_row(), noise="laplace", norm="l1"), "image 0: noise 'laplace', norm 'l1'"),
    ],
)
def test_an_unsound_row_is_refused_by_its_image(
    tmp_path: Path, cfg: DictConfig, expert: Any, row: CertificationRow, named: str
) -> None:
    folder = write_expert(tmp_path, cfg, expert, row)
    with pytest.raises(ConfigError, match="not a sound Gaussian l2 certificate") as refused:
        read(folder, cfg, expert)
    assert named in str(refused.value)


def test_grid_noise_must_be_the_runs(tmp_path: Path, cfg: DictConfig, expert: Any) -> None:
    """A run on the 8-bit grid reuses a grid record and refuses one of continuous noise."""
    grid = write_expert(tmp_path / "grid", cfg, expert, good_row(), noise_grid=255)
    assert read(grid, cfg, expert, "certify.noise_grid=255")[0].prediction == 3
    plain = write_expert(tmp_path / "plain", cfg, expert, good_row())
    with pytest.raises(ConfigError, match=r"noise_grid '<missing>' \(allowed: 255"):
        read(plain, cfg, expert, "certify.noise_grid=255")


@pytest.mark.parametrize(
    ("certify", "named"),
    [({"noise": "laplace"}, "certify.noise='laplace'"), ({"noise": "gaussian", "norm": "l1"}, "certify.norm='l1'")],
)
def test_another_threat_model_is_refused(certify: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match="allowed") as refused:
        check_dual_threat(certify)
    assert named in str(refused.value)
    check_dual_threat({"noise": "gaussian", "norm": "l2", "noise_grid": 255})  # (honoured: no refusal)


def test_the_command_refuses_laplace_noise_before_torch(tmp_path: Path) -> None:
    """``python -m rsbench.dual certify.noise=laplace`` used to certify Gaussian noise and say nothing."""
    script = (
        "import runpy, sys\n"
        f"sys.argv = ['rsbench.dual', 'certify.noise=laplace', 'hydra.run.dir={tmp_path / 'run'}']\n"
        "try:\n    runpy.run_module('rsbench.dual', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as stop:\n    print('EXIT', stop.code)\n"
        f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "RSBENCH_KEEP_ALLOCATOR": "1"}  # (no re-exec)
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "EXIT 2" in result.stdout, result.stderr
    assert "certify.noise='laplace'" in result.stderr
    assert "HEAVY []" in result.stdout
