"""Fixtures shared by the dual randomized-smoothing tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rsbench.archs.registry import build_classifier
from tests.helpers import save_checkpoint

EXPERT_SIGMAS = (0.25, 0.5)


@pytest.fixture(scope="module")
def experts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two LeNets (random weights, seeded) saved as Gaussian checkpoints at sigma 0.25 and 0.5."""
    folder = tmp_path_factory.mktemp("experts")
    paths = []
    for k, sigma in enumerate(EXPERT_SIGMAS):
        torch.manual_seed(k)
        net = build_classifier("lenet", 10, {"kind": "identity"}, 1)
        paths.append(save_checkpoint(net, folder / f"expert{k}.ckpt", sigma=sigma, method="gaussian"))
    return paths
