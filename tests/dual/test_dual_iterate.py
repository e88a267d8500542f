"""``python -m rsbench.dual stage=iterate`` (rsbench/dual/stages.py), one round on the embedded MNIST.

One round relabels with the experts, trains a router on the labels (``python -m rsbench method=router``), routes the
training images with it, and fine-tunes each expert an image was routed to (``method=routed_expert``). Behind a
denoiser (``model@router_denoiser=denoised``) the round's router is trained behind that DnCNN (its signature names
it) and routes behind it. A fresh DnCNN is the identity (its last convolution is zero), so what is checked is the
plumbing, not what a denoiser does to the routes. Every training is one epoch of 2 batches (seconds each).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from rsbench.archs.denoiser import DnCNN
from rsbench.checkpoint import SIGNATURE_KEY, TRAINED_BEHIND
from rsbench.dual import stages
from rsbench.loading import file_digest
from tests.classifiers import denoiser_checkpoint
from tests.helpers import compose_config

SIGMAS = (0.25, 0.5)
ROUTER_SIGMA = 0.5
SHORT = (
    '["trainer.max_epochs=1","+trainer.limit_train_batches=2","+trainer.limit_val_batches=1","dataset.batch_size=16"]'
)


def test_one_round_behind_a_denoiser_trains_and_routes_behind_it(tmp_path: Path, experts: list[Path]) -> None:
    identity = denoiser_checkpoint(DnCNN(1, depth=3, width=4), tmp_path / "identity.ckpt", ROUTER_SIGMA)
    cfg = compose_config(
        "stage=iterate",
        f"experts=[{experts[0]},{experts[1]}]",
        "iterate.rounds=1",
        f"iterate.router_sigma={ROUTER_SIGMA}",
        f"iterate.router_overrides={SHORT}",
        f"iterate.expert_overrides={SHORT}",
        "labels.max_images=24",
        "labels.n0=4",
        "labels.n=16",
        "route.max_images=24",
        "route.n=8",
        "model@router_denoiser=denoised",
        f"router_denoiser.denoiser_ckpt={identity}",
        output_dir=tmp_path / "iterate",
        config_name="dual",
    )
    result = stages.iterate_stage(cfg, tmp_path / "iterate")
    round1 = tmp_path / "iterate" / "round1"
    router = torch.load(result["router"], map_location="cpu", weights_only=True)
    assert router[SIGNATURE_KEY][TRAINED_BEHIND]["sha256"] == file_digest(identity)
    assert router[SIGNATURE_KEY]["sigmas"] == list(SIGMAS)
    routes = torch.load(round1 / "route" / stages.ROUTES, map_location="cpu", weights_only=True)["routes"]
    assert int((routes >= 0).sum()) > 0  # the router behind its denoiser routed images
    tuned = [k for k in range(len(SIGMAS)) if (round1 / f"expert{k}" / "checkpoints" / "last.ckpt").is_file()]
    assert {int(k) for k in routes[routes >= 0].unique()} == set(tuned)  # an expert images were routed to is tuned
    assert json.loads((tmp_path / "iterate" / "iterate.json").read_text())["router"] == result["router"]
