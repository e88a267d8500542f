"""Denoised smoothing: the denoiser objectives on a hand-checkable case, the frozen classifier, the checkpoints.

The loss tests use a fresh DnCNN, which is exactly the identity (its last convolution starts at zero, as in the
authors' code), a linear classifier on 2x2 images and noise fed in through ``NoiseMixin.standard_normal``, so every
expected value below is computed by hand from the numbers written in the test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from torch import Tensor, nn

from rsbench.archs import Classifier
from rsbench.archs.denoiser import DenoisedClassifier, DnCNN
from rsbench.certify.pipeline.certification import Subject
from rsbench.certify.pipeline.records import read_rows
from rsbench.checkpoint import make_checkpoint, write_checkpoint
from rsbench.errors import CheckpointMismatchError
from rsbench.methods.base import Batch
from rsbench.methods.denoiser import DenoiserTraining
from rsbench.methods.standard import StandardTraining
from rsbench.models.builders import denoised
from rsbench.runs.run import run
from tests.helpers import QUIET, certify, compose_config, rows, save_checkpoint

# float32 arithmetic on numbers of order 1: 1e-6 is far above rounding and far below any wrong formula.
TOL = 1e-6

# Two 2x2 one-channel images, flattened row-major: x[0] = (0.2, 0.4, 0.6, 0.8), x[1] = (0.9, 0.1, 0.3, 0.2).
IMAGES = torch.tensor([[0.2, 0.4, 0.6, 0.8], [0.9, 0.1, 0.3, 0.2]]).view(2, 1, 2, 2)
NOISE = torch.tensor([[1.0, -1.0, 0.5, 2.0], [-2.0, 0.0, 0.0, 1.0]]).view(2, 1, 2, 2)  # N(0, I) draws
SIGMA = 0.5  # so delta[0] = (0.5, -0.5, 0.25, 1), delta[1] = (-1, 0, 0, 0.5)


def linear_classifier(batch_norm: bool = False) -> Classifier:
    """logits = (pixel 0, pixel 3): W = [[1, 0, 0, 0], [0, 0, 0, 1]], b = 0 (optionally behind a BatchNorm)."""
    linear = nn.Linear(4, 2)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]))
        linear.bias.zero_()
    layers = [nn.Flatten(), *([nn.BatchNorm1d(4)] if batch_norm else []), linear]
    return Classifier("linear", nn.Sequential(*layers), {"kind": "identity"})


class FixedNoise(DenoiserTraining):
    """The method with its N(0, I) draws replaced by :data:`NOISE`."""

    def standard_normal(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return NOISE.clone()


def module(tmp_path: Path, objective: str, batch_norm: bool = False, **kwargs: object) -> DenoiserTraining:
    path = save_checkpoint(linear_classifier(batch_norm), tmp_path / "classifier.ckpt")
    return FixedNoise(
        linear_classifier(batch_norm),
        SIGMA,
        lambda params: torch.optim.SGD(params, lr=0.1),
        classifier_ckpt=str(path),
        objective=objective,
        in_channels=1,
        depth=3,
        width=4,
        **kwargs,
    )


def softplus(value: float) -> float:
    return math.log1p(math.exp(value))


def test_a_fresh_dncnn_is_the_identity_and_has_the_papers_layers() -> None:
    denoiser = DnCNN(in_channels=3)
    z = torch.rand(2, 3, 8, 8)
    assert torch.equal(denoiser(z), z)  # z - 0 exactly: the last convolution's weights are zeros
    convolutions = [m for m in denoiser.modules() if isinstance(m, nn.Conv2d)]
    assert len(convolutions) == 17
    assert convolutions[1].out_channels == 64
    assert [c.bias is not None for c in convolutions] == [True] + [False] * 16
    assert sum(isinstance(m, nn.BatchNorm2d) for m in denoiser.modules()) == 15
    with pytest.raises(ValueError, match="depth must be an integer >= 2, got 1"):
        DnCNN(depth=1)


def test_mse_objective_is_the_mean_squared_error_over_every_pixel(tmp_path: Path) -> None:
    method = module(tmp_path, "mse")
    loss = method.training_loss(batch(IMAGES, [0, 1])).loss
    # D is the identity, so D(x + delta) - x = delta: (0.25 + 0.25 + 0.0625 + 1 + 1 + 0 + 0 + 0.25) / 8
    assert loss.item() == pytest.approx(2.8125 / 8, abs=TOL)


def test_stability_objective_targets_the_classifiers_hard_clean_prediction(tmp_path: Path) -> None:
    method = module(tmp_path, "stability")
    out = method.training_loss(batch(IMAGES, [0, 1]))  # labels are not used by this objective
    # image 0: clean logits (0.2, 0.8) -> target 1; noisy logits (0.7, 1.8): CE = log(1 + e^(0.7 - 1.8))
    # image 1: clean logits (0.9, 0.2) -> target 0; noisy logits (-0.1, 0.7): CE = log(1 + e^(0.7 + 0.1))
    assert out.loss.item() == pytest.approx((softplus(-1.1) + softplus(0.8)) / 2, abs=TOL)
    assert torch.allclose(out.logits, torch.tensor([[0.7, 1.8], [-0.1, 0.7]]), atol=TOL)
    relabelled = method.training_loss(batch(IMAGES, [1, 1])).loss
    assert relabelled.item() == pytest.approx(out.loss.item(), abs=TOL)


def test_classification_objective_targets_the_true_labels(tmp_path: Path) -> None:
    loss = module(tmp_path, "classification").training_loss(batch(IMAGES, [0, 1])).loss
    # image 0, label 0: log(1 + e^(1.8 - 0.7)); image 1, label 1: log(1 + e^(-0.1 - 0.7))
    assert loss.item() == pytest.approx((softplus(1.1) + softplus(-0.8)) / 2, abs=TOL)


def batch(x: Tensor, labels: list[int]) -> Batch:
    return Batch(x, torch.tensor(labels), torch.arange(len(x)))


def test_standard_training_is_the_cross_entropy_on_clean_images_and_draws_no_noise() -> None:
    class NoiseForbidden(StandardTraining):
        def standard_normal(self, like: Tensor, generator: torch.Generator | None = None) -> Tensor:
            raise AssertionError("method=standard drew noise")

    method = NoiseForbidden(linear_classifier(), 0.25, lambda params: torch.optim.SGD(params, lr=0.1))
    loss = method.training_loss(batch(IMAGES, [0, 1])).loss
    # clean logits (0.2, 0.8) with label 0: log(1 + e^0.6); (0.9, 0.2) with label 1: log(1 + e^0.7)
    assert loss.item() == pytest.approx((softplus(0.6) + softplus(0.7)) / 2, abs=TOL)


@pytest.mark.parametrize("objective", ["mse", "stability", "classification"])
def test_the_classifier_is_frozen_and_only_the_denoiser_is_optimized(tmp_path: Path, objective: str) -> None:
    method = module(tmp_path, objective, batch_norm=True)
    composed = method.net
    assert isinstance(composed, DenoisedClassifier)
    optimizer = method.configure_optimizers()
    optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert optimized == {id(p) for p in composed.denoiser.parameters()}
    method.train()
    assert composed.denoiser.training
    assert not composed.classifier.training
    before = {k: v.clone() for k, v in composed.classifier.state_dict().items()}
    denoiser_before = [p.clone() for p in composed.denoiser.parameters()]
    for _ in range(2):
        optimizer.zero_grad()
        method.training_loss(batch(IMAGES, [0, 1])).loss.backward()
        optimizer.step()
    assert all(p.grad is None and not p.requires_grad for p in composed.classifier.parameters())
    after = composed.classifier.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and BatchNorm statistics alike
    assert any(not torch.equal(a, b) for a, b in zip(denoiser_before, composed.denoiser.parameters(), strict=True))


def test_the_checkpoint_signature_records_both_parts(tmp_path: Path) -> None:
    method = module(tmp_path, "stability")
    signature = method.signature()
    assert signature["arch"] == "dncnn+linear"
    assert signature["denoiser"] == {"arch": "dncnn", "in_channels": 1, "depth": 3, "width": 4}
    assert signature["classifier"] == linear_classifier().signature()
    assert signature["input_layer"] == {"kind": "identity", "mean": [], "std": []}
    assert signature["sigma"] == SIGMA


def test_init_ckpt_takes_the_denoiser_of_an_mse_run_and_refuses_another_sigma(tmp_path: Path) -> None:
    mse = module(tmp_path, "mse")
    with torch.no_grad():
        for parameter in mse.net.denoiser.parameters():  # type: ignore[union-attr]
            parameter.add_(0.01)
    path = tmp_path / "mse.ckpt"
    write_checkpoint(make_checkpoint(mse.net, mse.sigma, "denoiser"), path)
    stab = module(tmp_path, "stability", init_ckpt=str(path))
    assert all(
        torch.equal(a, b)
        for a, b in zip(stab.net.denoiser.state_dict().values(), mse.net.denoiser.state_dict().values(), strict=True)  # type: ignore[union-attr]
    )
    write_checkpoint(make_checkpoint(mse.net, 1.0, "denoiser"), path)
    with pytest.raises(CheckpointMismatchError, match="sigma"):
        module(tmp_path, "stability", init_ckpt=str(path))
    assert module(tmp_path, "stability", init_ckpt=str(path), allow_sigma_mismatch=True).sigma == SIGMA


def test_a_bad_objective_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"method.objective must be one of .*got 'stab'"):
        module(tmp_path, "stab")


@pytest.fixture(scope="module")
def standard_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smoke-trained clean LeNet (method=standard)."""
    output_dir = tmp_path_factory.mktemp("standard")
    run(compose_config(*QUIET, "experiment=smoke", "method=standard", output_dir=output_dir))
    return output_dir


@pytest.fixture(scope="module")
def denoiser_run(standard_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small DnCNN smoke-trained with the stability objective for that LeNet."""
    output_dir = tmp_path_factory.mktemp("denoiser")
    classifier = standard_run / "checkpoints" / "best.ckpt"
    overrides = ("method=denoiser", f"method.classifier_ckpt={classifier}", "method.depth=3", "method.width=8")
    run(compose_config(*QUIET, "experiment=smoke", "optimizer=adam", *overrides, output_dir=output_dir))
    return output_dir


def test_a_denoiser_run_certifies_the_composition_and_its_checkpoint_certifies_alike(
    standard_run: Path, denoiser_run: Path, tmp_path: Path
) -> None:
    trained = json.loads((denoiser_run / "metrics.json").read_text())
    assert (trained["method"], trained["arch"]) == ("denoiser", "dncnn+lenet")
    assert trained["hparams"]["objective"] == "stability"
    checkpoint = denoiser_run / "checkpoints" / "best.ckpt"
    metrics = certify(tmp_path / "alone", f"model.path={checkpoint}")
    assert rows(tmp_path / "alone") == rows(denoiser_run)
    assert metrics["model"]["signature"]["denoiser"]["depth"] == 3
    composed = certify(
        tmp_path / "composed",
        "model=denoised",
        f"model.denoiser_ckpt={checkpoint}",
        f"model.classifier.path={standard_run / 'checkpoints' / 'best.ckpt'}",
    )
    assert rows(tmp_path / "composed") == rows(denoiser_run)  # the same classifier behind the same denoiser
    assert composed["model"]["denoiser"]["kind"] == "dncnn"
    assert composed["model"]["classifier"]["kind"] == "checkpoint"
    assert len(read_rows(tmp_path / "composed" / "certify.tsv")) == 8


def test_method_denoiser_config_composes_and_instantiates(standard_run: Path, make_cfg) -> None:
    classifier = standard_run / "checkpoints" / "best.ckpt"
    cfg = make_cfg("method=denoiser", f"method.classifier_ckpt={classifier}")
    method = instantiate(cfg.method, net=instantiate(cfg.arch), optimizer=instantiate(cfg.optimizer))
    assert isinstance(method.net, DenoisedClassifier)
    assert method.net.denoiser.spec() == {"arch": "dncnn", "in_channels": 1, "depth": 17, "width": 64}


def test_a_classifier_checkpoint_is_not_taken_for_a_denoiser(tmp_path: Path) -> None:
    path = save_checkpoint(linear_classifier(), tmp_path / "classifier.ckpt")
    subject = Subject(linear_classifier(), 2, 0.25)
    with pytest.raises(CheckpointMismatchError, match="is not a denoiser checkpoint"):
        denoised(subject, str(path))
    with pytest.raises(CheckpointMismatchError, match="is not a denoiser checkpoint"):
        module(tmp_path, "stability", init_ckpt=str(path))
