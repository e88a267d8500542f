"""Shared fixtures: the real Hydra config composed as `python -m rsbench` would (offline), and one smoke-trained run.

Helpers that tests call directly live in ``tests/helpers.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from rsbench.runs.run import run
from rsbench.runs.schemas import register_schemas
from tests.helpers import SMOKE, ComposeFn, compose_config

register_schemas()  # as `python -m rsbench` does before composing a run: certify.* is checked against its schema
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture
def make_cfg(tmp_path: Path) -> Iterator[ComposeFn]:
    """``make_cfg(*overrides)`` composes the config with its output directory under ``tmp_path/run``."""

    def make(*overrides: str, output_dir: Path | None = None) -> DictConfig:
        return compose_config(*overrides, output_dir=output_dir or tmp_path / "run")

    yield make
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run directory of one smoke-trained model shared by the whole session: read it, never write into it.

    ``python -m rsbench experiment=smoke``: a LeNet trained by Gaussian augmentation at sigma 0.25 on 4 batches of the
    embedded MNIST subset, certified with ``certify=smoke`` (8 images); ``checkpoints/best.ckpt`` and ``last.ckpt``.
    """
    output_dir = tmp_path_factory.mktemp("smoke_run")
    run(compose_config(*SMOKE, output_dir=output_dir))
    return output_dir


@pytest.fixture(scope="session")
def smoke_checkpoint(smoke_run: Path) -> Path:
    """The smoke run's best checkpoint (a sigma 0.25 Gaussian LeNet: also a CAT-RS teacher)."""
    return smoke_run / "checkpoints" / "best.ckpt"


@pytest.fixture(autouse=True)
def no_system_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read a dataset installed on the machine (Debian's Fashion-MNIST): only files they generate."""
    from rsbench.data import sources

    monkeypatch.setattr(sources, "SYSTEM_IDX_FOLDERS", {name: () for name in sources.SYSTEM_IDX_FOLDERS})
