"""Shared fixtures: compose the real Hydra config (as `python -m rsbench` would) with overrides, offline."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict

from rsbench.runs.schemas import register_schemas

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"

register_schemas()  # as `python -m rsbench` does before composing a run: certify.* is checked against its schema
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

# Quiet, fast settings shared by in-process runs.
QUIET = ("trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "logger=none")

ComposeFn = Callable[..., DictConfig]


def quiet_trainer(root: Path, **kwargs: Any) -> pl.Trainer:
    """A CPU Lightning trainer that writes and prints nothing (no logger, checkpoints, bar or summary)."""
    return pl.Trainer(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
        accelerator="cpu",
        **kwargs,
    )


def compose_config(*overrides: str, output_dir: Path | None = None, config_name: str = "config") -> DictConfig:
    """Compose ``conf/<config_name>.yaml`` with ``overrides``; ``${hydra:...}`` resolves as in a real run.

    ``config_name``: ``config`` (``python -m rsbench``), ``certify_model`` (``python -m rsbench.certify``).
    """
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF_DIR)):
        cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(output_dir or ROOT / "outputs" / "pytest")
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


@pytest.fixture
def make_cfg(tmp_path: Path) -> Iterator[ComposeFn]:
    """``make_cfg(*overrides)`` composes the config with its output directory under ``tmp_path/run``."""

    def make(*overrides: str, output_dir: Path | None = None) -> DictConfig:
        return compose_config(*overrides, output_dir=output_dir or tmp_path / "run")

    yield make
    GlobalHydra.instance().clear()
