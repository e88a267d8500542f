"""The dual RS router's recipe (rsbench/methods/router_loss.py, ``method=router``), each piece on a hand-checked case.

The table: four training images, three experts. Image A's radii are (0, ln 2, ln 3), so its soft target is
softmax = (1, 2, 3) / 6; image B's are (ln 2, 0, 0): (2, 1, 1) / 4; no expert certifies image C (all 0); image D was
not labelled (NaN). Argmax labels: A -> 2, B -> 0, C -> 0 (ties to the smallest sigma), D -> -1.

Dropping C, q = mean of A's and B's targets = (1/3, 7/24, 3/8) and w_k = 1 / (3 q_k) = (1, 8/7, 8/9). Floats are
compared within 1e-12 (float64 arithmetic on a handful of terms) or 1e-6 (the float32 loss).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from rsbench.archs.classifier import Classifier
from rsbench.archs.registry import build_classifier
from rsbench.checkpoint import SIGNATURE_KEY, TRAINED_BEHIND
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.loading import file_digest
from rsbench.methods.base import Batch
from rsbench.methods.router import RouterTraining
from rsbench.methods.router_loss import (
    LABELS_VERSION,
    expert_shares,
    read_label_table,
    rebalance_weights,
    router_loss,
    soft_targets,
    training_targets,
)
from tests.classifiers import constant_dncnn, denoiser_checkpoint
from tests.helpers import compose_config, save_checkpoint

LN2, LN3 = math.log(2.0), math.log(3.0)
NAN = float("nan")
RADII = torch.tensor([[0.0, LN2, LN3], [LN2, 0.0, 0.0], [0.0, 0.0, 0.0], [NAN, NAN, NAN]], dtype=torch.float64)
LABELS = torch.tensor([2, 0, 0, -1])
SIGMAS = [0.25, 0.5, 1.0]
TARGET_A, TARGET_B = [1 / 6, 1 / 3, 1 / 2], [1 / 2, 1 / 4, 1 / 4]


def write_table(path: Path, *, version: int | None = LABELS_VERSION, radii: bool = True) -> Path:
    """The table above in the format of ``python -m rsbench.dual stage=labels`` (or an older / newer one)."""
    table: dict = {"labels": LABELS, "sigmas": SIGMAS, "protocol": {}}
    if radii:
        table["radii"] = RADII
    if version is not None:
        table["version"] = version
    torch.save(table, path)
    return path


def router(path: Path, **options: object) -> RouterTraining:
    """A router over the three experts: a linear map of 2-pixel images to 3 logits."""
    net = Classifier("linear3", nn.Sequential(nn.Flatten(), nn.Linear(2, 3)), {"kind": "identity"})
    return RouterTraining(labels_file=str(path), net=net, sigma=0.5, optimizer=torch.optim.SGD, **options)  # type: ignore[arg-type]


def test_soft_targets_are_the_softmax_of_the_radii() -> None:
    targets = soft_targets(RADII[:3])
    expected = torch.tensor([TARGET_A, TARGET_B, [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    assert torch.allclose(targets, expected, rtol=0, atol=1e-12)


def test_shares_and_weights_of_the_kept_images(tmp_path: Path) -> None:
    table = read_label_table(write_table(tmp_path / "t.pt"))
    targets, kept = training_targets(table, "soft", drop_uncertified=True)
    assert kept.tolist() == [True, True, False, False]
    shares = expert_shares(targets, kept)
    assert torch.allclose(shares, torch.tensor([1 / 3, 7 / 24, 3 / 8], dtype=torch.float64), rtol=0, atol=1e-12)
    weights = rebalance_weights(shares)
    assert torch.allclose(weights, torch.tensor([1, 8 / 7, 8 / 9], dtype=torch.float64), rtol=0, atol=1e-12)
    assert float((shares * weights).sum()) == pytest.approx(1.0, abs=1e-12)  # the kept images' mean weight


def test_hard_labels_keep_the_argmax_and_an_expert_no_label_picks_gets_weight_0(tmp_path: Path) -> None:
    table = read_label_table(write_table(tmp_path / "t.pt"))
    targets, kept = training_targets(table, "hard", drop_uncertified=True)
    assert targets[:2].tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert rebalance_weights(expert_shares(targets, kept)).tolist() == [1.0, 0.0, 1.0]  # q = (1/2, 0, 1/2), K' = 2
    targets, kept = training_targets(table, "hard", drop_uncertified=False)  # C kept, labelled sigma_min
    assert kept.tolist() == [True, True, True, False]
    shares = expert_shares(targets, kept)
    assert torch.allclose(shares, torch.tensor([2 / 3, 0, 1 / 3], dtype=torch.float64), rtol=0, atol=1e-12)
    assert torch.allclose(rebalance_weights(shares), torch.tensor([0.75, 0, 1.5], dtype=torch.float64), atol=1e-12)


def test_the_loss_on_two_images_with_two_noisy_copies() -> None:
    """Weighted soft CE + 40 KL + 0.5 H: A's copies predict (1/2, 1/4, 1/4) and (1/4, 1/2, 1/4), B's both the first.

    -log p is ln 2 * (1, 2, 2) and ln 2 * (2, 1, 2); sum_k w_k t_k (-log p_k): A, copy 1: 229/126 ln 2; A, copy 2:
    202/126 ln 2; B, each copy: 191/126 ln 2; their mean 813/504 ln 2. A's p_bar = (3/8, 3/8, 1/4): KL to each copy
    3/8 ln(9/8), H = 3/4 ln(8/3) + 1/4 ln 4; B's copies agree: KL 0, H = 3/2 ln 2.
    """
    first, second = [LN2, 0.0, 0.0], [0.0, LN2, 0.0]
    logits = torch.tensor([[first, second], [first, first]])
    targets = torch.tensor([TARGET_A, TARGET_B], dtype=torch.float64)
    weights = torch.tensor([1, 8 / 7, 8 / 9], dtype=torch.float64)
    loss, terms = router_loss(logits, targets, weights, lbd=40.0, eta=0.5)
    cross_entropy = 813 / 504 * LN2
    kl = (3 / 8 * math.log(9 / 8)) / 2
    entropy = (3 / 4 * math.log(8 / 3) + 1 / 4 * math.log(4) + 3 / 2 * LN2) / 2
    assert float(terms["cross_entropy"]) == pytest.approx(cross_entropy, abs=1e-6)
    assert float(terms["consistency_kl"]) == pytest.approx(kl, abs=1e-6)
    assert float(terms["entropy"]) == pytest.approx(entropy, abs=1e-6)
    assert float(loss) == pytest.approx(cross_entropy + 40 * kl + 0.5 * entropy, abs=1e-5)
    unweighted, _ = router_loss(logits, targets, None, lbd=0.0, eta=0.0)  # rebalance=false, consistency=none
    # sum_k t_k (-log p_k): A 1: (1/6 + 2/3 + 1) ln 2 = 11/6; A 2: (1/3 + 1/3 + 1) = 5/3; B: (1/2 + 1/2 + 1/2) = 3/2
    assert float(unweighted) == pytest.approx((11 / 6 + 5 / 3 + 3 / 2 + 3 / 2) / 4 * LN2, abs=1e-6)


def test_the_defaults_are_the_papers_recipe(tmp_path: Path) -> None:
    cfg = compose_config("method=router", f"method.labels_file={tmp_path}/t.pt", "dataset=fashion_mnist")
    method = cfg.method
    assert (method.labels, method.drop_uncertified, method.rebalance, method.consistency) == (
        "soft",
        True,
        True,
        "strong",
    )
    assert (method.num_noise, method.lbd, method.eta) == (2, 40.0, 0.5)
    assert cfg.optimizer._target_ == "torch.optim.AdamW"
    assert (cfg.optimizer.lr, cfg.optimizer.weight_decay) == (0.01, 0.01)
    assert (list(cfg.scheduler.milestones), cfg.scheduler.gamma) == ([30, 60], 0.5)
    assert (cfg.trainer.max_epochs, cfg.dataset.batch_size) == (90, 256)
    weak = compose_config("method=router", f"method.labels_file={tmp_path}/t.pt", "method.consistency=weak").method
    assert (weak.num_noise, weak.lbd, weak.eta) == (2, 10.0, 0.5)


def test_the_earlier_router_is_reachable(tmp_path: Path) -> None:
    """Each piece off, and the dataset's SGD recipe: cross-entropy on the argmax of one noisy copy, as before."""
    cfg = compose_config(
        "method=router",
        f"method.labels_file={tmp_path}/t.pt",
        "dataset=fashion_mnist",
        "method.labels=hard",
        "method.drop_uncertified=false",
        "method.rebalance=false",
        "method.consistency=none",
        "optimizer=sgd",
        "~method_schedule",
    )
    assert (cfg.method.num_noise, cfg.method.lbd, cfg.method.eta) == (1, 0.0, 0.0)
    assert (cfg.optimizer._target_, cfg.optimizer.weight_decay) == ("torch.optim.SGD", 1e-4)
    assert (list(cfg.scheduler.milestones), cfg.scheduler.gamma) == ([31, 61], 0.1)
    other = compose_config("method=gaussian", "dataset=fashion_mnist")  # another method keeps the dataset's
    assert (other.optimizer._target_, other.trainer.max_epochs) == ("torch.optim.SGD", 90)
    assert list(other.scheduler.milestones) == [31, 61]


def test_the_module_trains_on_the_kept_images_only(tmp_path: Path) -> None:
    module = router(write_table(tmp_path / "t.pt"), num_noise=2, lbd=40.0, eta=0.5)
    assert module.kept.tolist() == [True, True, False, False]
    assert module.class_weights is not None
    assert torch.allclose(module.class_weights, torch.tensor([1, 8 / 7, 8 / 9], dtype=torch.float64), atol=1e-12)
    x = torch.rand(3, 1, 1, 2)
    torch.manual_seed(0)
    out = module.training_loss(Batch(x, torch.zeros(3, dtype=torch.long), torch.tensor([2, 0, 3]), 0.5))
    torch.manual_seed(0)
    logits = module(module.noisy_copies(x[1:2], 2, sigma=0.5)).view(1, 2, 3)  # image A alone (C and D left out)
    expected, _ = router_loss(logits, torch.tensor([TARGET_A]), module.class_weights, 40.0, 0.5)
    assert float(out.loss.detach()) == pytest.approx(float(expected.detach()), abs=1e-6)
    assert out.labels.tolist() == [2, 2]  # A's two copies, against its argmax target
    kept_all = router(write_table(tmp_path / "t.pt"), drop_uncertified=False, rebalance=False)
    assert kept_all.kept.tolist() == [True, True, True, False]
    assert kept_all.class_weights is None
    assert torch.allclose(kept_all.targets[2], torch.full((3,), 1 / 3, dtype=torch.float64), atol=1e-12)


def test_label_tables_of_other_versions(tmp_path: Path) -> None:
    """Version 1 (no ``version``): read with its radii; without them only as hard labels; a newer one refused."""
    versionless = router(write_table(tmp_path / "v1.pt", version=None))
    assert versionless.kept.tolist() == [True, True, False, False]
    argmax_only = write_table(tmp_path / "argmax.pt", version=None, radii=False)
    with pytest.raises(ConfigError, match=r"pass method\.labels=hard method\.drop_uncertified=false"):
        router(argmax_only)
    hard = router(argmax_only, labels="hard", drop_uncertified=False)
    assert hard.kept.tolist() == [True, True, True, False]
    with pytest.raises(ConfigError, match="version 3, up to 2"):
        router(write_table(tmp_path / "v3.pt", version=3))


def test_bad_options_are_refused_by_name(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.pt")
    with pytest.raises(ValueError, match=r"method\.labels must be one of"):
        router(path, labels="argmax")
    with pytest.raises(ValueError, match=r"method\.consistency must be one of"):
        router(path, consistency="medium")


def test_a_router_behind_a_denoiser_trains_on_the_denoised_copies(tmp_path: Path) -> None:
    """A DnCNN mapping every noisy image to the constant -10: every copy's logits are the router's at that image.

    The loss is then the recipe's loss of logits net(-10) for every copy (the KL term 0: the copies agree), the
    denoiser gets no gradient and stays in eval mode, and the checkpoint's signature names it (its SHA-256, sigma).
    """
    constant = denoiser_checkpoint(constant_dncnn(-10.0), tmp_path / "constant.ckpt", 0.5)
    module = router(write_table(tmp_path / "t.pt"), denoiser_ckpt=str(constant))
    x = torch.rand(3, 1, 1, 2)
    out = module.training_loss(Batch(x, torch.zeros(3, dtype=torch.long), torch.tensor([0, 1, 3]), 0.5))
    logits = module.net(torch.full((1, 1, 1, 2), -10.0)).repeat(2, 2, 1)  # A and B, two copies each
    targets = torch.tensor([TARGET_A, TARGET_B])
    expected, _ = router_loss(logits, targets, module.class_weights, 40.0, 0.5)
    assert float(out.loss.detach()) == pytest.approx(float(expected.detach()), abs=1e-6)  # float32, a few terms
    assert float(out.terms["consistency_kl"].detach()) == pytest.approx(0.0, abs=1e-7)  # the copies agree exactly
    out.loss.backward()
    assert module.router_denoiser is not None
    assert all(p.grad is None and not p.requires_grad for p in module.router_denoiser.parameters())
    assert not any(p is q for p in module.trainable_parameters() for q in module.router_denoiser.parameters())
    module.train()
    assert not module.router_denoiser.denoiser.training
    saved: dict = {}
    module.on_save_checkpoint(saved)
    record = saved[SIGNATURE_KEY][TRAINED_BEHIND]
    assert (record["sha256"], record["sigma"]) == (file_digest(constant), 0.5)


def test_a_denoiser_for_another_sigma_or_a_foreign_checkpoint_is_refused(tmp_path: Path) -> None:
    table = write_table(tmp_path / "t.pt")
    other = denoiser_checkpoint(constant_dncnn(-10.0), tmp_path / "other.ckpt", 0.25)
    with pytest.raises(ConfigError, match=r"other\.ckpt' was trained at sigma=0.25, the router is trained .*0\.5"):
        router(table, denoiser_ckpt=str(other))
    classifier = save_checkpoint(build_classifier("lenet", 10, {"kind": "identity"}, 1), tmp_path / "plain.ckpt")
    with pytest.raises(CheckpointMismatchError, match=r"plain\.ckpt' is not a denoiser checkpoint"):
        router(table, denoiser_ckpt=str(classifier))
    assert compose_config("method=router", f"method.labels_file={table}").method.denoiser_ckpt is None


def test_a_term_weighted_0_adds_no_nan_where_a_probability_underflows() -> None:
    """Logits 200 apart make softmax exactly 0 in float32: ``F.kl_div``'s gradient in p_bar is then -inf.

    With lbd = eta = 0 (``consistency=none``) the loss is the cross-entropy alone and its gradient finite (it was nan:
    0 x -inf); with lbd = 40 the authors' term keeps its gradient (not checked here: nan, as theirs would be).
    """
    logits = torch.tensor([[[200.0, 0.0, 0.0]]], requires_grad=True)  # B = 1, m = 1
    targets = torch.tensor([TARGET_A], dtype=torch.float64)
    loss, terms = router_loss(logits, targets, None, lbd=0.0, eta=0.0)
    loss.backward()
    assert logits.grad is not None
    assert bool(torch.isfinite(logits.grad).all())
    # the cross-entropy alone: -(1/6 log 1 + 1/3 log e^-200 + 1/2 log e^-200) = 200 * 5/6 (float32: within 1e-3)
    assert float(loss.detach()) == pytest.approx(200 * 5 / 6, abs=1e-3)
    assert float(terms["entropy"]) == pytest.approx(0.0, abs=1e-6)  # still logged
