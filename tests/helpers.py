"""What several test modules use: the real config composed in process, quiet trainers, small models, rows, files.

Test modules import from here, or from the modules beside it that have one job each (``classifiers.py``: known-answer
base classifiers; ``stats.py``: the coverage protocol, p-values and noise laws; ``run_folders.py``: run folders for
the report), never from each other or from ``conftest.py`` (which holds the fixtures only).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, open_dict
from torch import nn

from rsbench.archs import Classifier
from rsbench.certify.pipeline.records import CertificationRow, read_rows
from rsbench.checkpoint import make_checkpoint, write_checkpoint
from rsbench.runs.certify_model import certify_model

if TYPE_CHECKING:
    from rsbench.methods import SmoothingModule

ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = ROOT / "conf"

# Quiet, fast settings shared by in-process runs.
QUIET = ("trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "logger=none")
SMOKE = ("experiment=smoke", *QUIET)  # a seconds-long run: 4 training batches, certify=smoke (8 images)

ComposeFn = Callable[..., DictConfig]

SGD = functools.partial(torch.optim.SGD, lr=0.1)

# the modules a torch-free start must not load
HEAVY = ("torch", "scipy", "pandas", "statsmodels", "pytorch_lightning", "optuna", "submitit")


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


def certify(output_dir: Path, *overrides: str) -> dict:
    """Run ``python -m rsbench.certify`` in process with ``certify=smoke``; return its metrics.json."""
    certify_model(compose_config("certify=smoke", *overrides, output_dir=output_dir, config_name="certify_model"))
    return json.loads((output_dir / "metrics.json").read_text())


def rows(output_dir: Path) -> list[tuple]:
    """The rows of ``certify.tsv`` without their timing: what two certifications of one model must share."""
    return [(r.idx, r.label, r.predict, r.radius, r.count, r.n, r.sigma) for r in read_rows(output_dir / "certify.tsv")]


def untimed(tsv: Path) -> list[tuple]:
    """Every column of every row of the record ``tsv`` but ``time``: what two certifications of one subset share."""
    return [tuple(v for k, v in dataclasses.asdict(r).items() if k != "time") for r in read_rows(tsv)]


def row(idx: int, radius: float = 0.5, correct: bool = True, predict: int | None = None) -> CertificationRow:
    """A certification row of image ``idx``: label 3, predicted 3 when correct (else 5), 1000 of 1000 samples at sigma
    0.25, pA_lower the one that certifies ``radius`` (Phi(radius / sigma); 0.4 at an abstention)."""
    predict = (3 if correct else 5) if predict is None else predict
    lower = NormalDist().cdf(radius / 0.25) if predict >= 0 else 0.4
    return CertificationRow(idx, 3, predict, radius, correct, 0.5, 1000, 1000, lower, 0.25)


def identity_linear(weight: list[list[float]], bias: list[float]) -> Classifier:
    """A 2-pixel image [1, 1, 2] -> logits = W x + b, behind an identity input layer."""
    linear = nn.Linear(2, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight))
        linear.bias.copy_(torch.tensor(bias))
    return Classifier("linear2", nn.Sequential(nn.Flatten(), linear), {"kind": "identity"})


def save_checkpoint(net: nn.Module, path: Path, sigma: float = 0.25, method: str = "standard") -> Path:
    """An rsbench checkpoint of ``net`` trained at ``sigma`` by ``method``, written by rsbench's checkpoint writer."""
    return write_checkpoint(make_checkpoint(net, sigma, method), path)


def fixed_noise(module: SmoothingModule, noise: torch.Tensor) -> list[int]:
    """Make every noise draw of ``module`` return the first rows of ``noise`` (as many as the draw asks for, in its
    dtype, sigma not applied); the returned list gets one entry per draw."""
    draws: list[int] = []

    def sample(like: torch.Tensor, sigma: Any = None, generator: Any = None) -> torch.Tensor:
        draws.append(1)
        return noise[: like.shape[0]].to(like.dtype).clone()

    module.sample_noise = sample  # type: ignore[method-assign]
    return draws


def environment(**extra: str) -> dict[str, str]:
    """The test environment for a child: this checkout first on the path, no allocator re-exec, W&B offline."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "RSBENCH_KEEP_ALLOCATOR": "1", "WANDB_MODE": "offline", **extra}


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
