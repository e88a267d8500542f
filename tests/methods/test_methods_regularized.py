"""Stability training, Consistency regularization and MACER: losses and gradients pinned on hand-checkable cases,
MACER's numerical guards and lambda schedule, one Lightning step each, and their configs and presets."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from scipy.stats import norm
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rsbench.archs import Classifier
from rsbench.methods.attacks import pgd_l2_smoothed, pgd_l2_smoothed_jeong
from rsbench.methods.base import Batch, SmoothingModule
from rsbench.methods.consistency import ConsistencyRegularization
from rsbench.methods.macer import MACER
from rsbench.methods.stability import StabilityTraining
from tests.helpers import SGD, fixed_noise, quiet_trainer

LN3 = math.log(3.0)


def logits_net(num_classes: int) -> Classifier:
    """An image ``[1, 1, C]`` whose pixels are the logits: f(x) = x (identity weights, zero bias)."""
    linear = nn.Linear(num_classes, num_classes)
    with torch.no_grad():
        linear.weight.copy_(torch.eye(num_classes))
        linear.bias.zero_()
    return Classifier("identity_logits", nn.Sequential(nn.Flatten(), linear), {"kind": "identity"})


def images(logits: list[list[float]] | np.ndarray) -> torch.Tensor:
    """Images whose (clean) logits under :func:`logits_net` are the given rows."""
    rows = torch.as_tensor(np.asarray(logits), dtype=torch.float32)
    return rows.view(len(rows), 1, 1, -1)


def record_logits(module: SmoothingModule) -> list[torch.Tensor]:
    """Every forward pass of ``module.net`` appends its logits (with ``retain_grad``) to the returned list."""
    outputs: list[torch.Tensor] = []

    def hook(_: nn.Module, __: Any, output: torch.Tensor) -> None:
        output.retain_grad()
        outputs.append(output)

    module.net.register_forward_hook(hook)
    return outputs


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_vjp(p: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The gradient w.r.t. the logits of ``<g, softmax(z)>``, given ``p = softmax(z)``: ``p * (g - <p, g>)``."""
    return p * (g - (p * g).sum(axis=-1, keepdims=True))


def batch_of(x: torch.Tensor, y: list[int], sigma: torch.Tensor | None = None) -> Batch:
    return Batch(x, torch.tensor(y), torch.arange(len(x)), sigma)


# ---------------------------------------------------------------------------------------------- Stability training


def test_stability_loss_on_a_hand_checkable_case() -> None:
    module = StabilityTraining(logits_net(2), sigma=0.5, optimizer=SGD, lbd=2.0)
    fixed_noise(module, images([[-LN3, 0.0]]))
    out = module.training_loss(batch_of(images([[LN3, 0.0]]), [0]))
    # clean softmax (0.75, 0.25): CE = -ln 0.75; noisy logits (0, 0): H(p_clean, (0.5, 0.5)) = ln 2
    assert out.loss.item() == pytest.approx(-math.log(0.75) + 2.0 * math.log(2.0), rel=1e-6)
    assert out.terms["cross_entropy"].item() == pytest.approx(-math.log(0.75), rel=1e-6)
    assert out.terms["stability"].item() == pytest.approx(math.log(2.0), rel=1e-6)
    assert torch.allclose(out.logits, torch.zeros(1, 2))  # accuracy is measured on the noisy logits


# ------------------------------------------------------------------------------------ Consistency regularization


def test_consistency_loss_on_a_hand_checkable_case() -> None:
    module = ConsistencyRegularization(logits_net(2), sigma=0.5, optimizer=SGD, num_noise=2, lbd=10.0, eta=0.5)
    fixed_noise(module, images([[0.0, 0.0], [-LN3, 0.0]]))  # the two copies of the image: (ln 3, 0) and (0, 0)
    out = module.training_loss(batch_of(images([[LN3, 0.0]]), [0]))
    # p_1 = (0.75, 0.25), p_2 = (0.5, 0.5), p_bar = (0.625, 0.375)
    cross_entropy = (-math.log(0.75) - math.log(0.5)) / 2
    kl_1 = 0.625 * math.log(0.625 / 0.75) + 0.375 * math.log(0.375 / 0.25)
    kl_2 = 0.625 * math.log(0.625 / 0.5) + 0.375 * math.log(0.375 / 0.5)
    entropy = -(0.625 * math.log(0.625) + 0.375 * math.log(0.375))
    assert out.loss.item() == pytest.approx(cross_entropy + 10.0 * (kl_1 + kl_2) / 2 + 0.5 * entropy, rel=1e-6)
    assert out.terms["consistency_kl"].item() == pytest.approx((kl_1 + kl_2) / 2, rel=1e-5)
    assert out.terms["entropy"].item() == pytest.approx(entropy, rel=1e-6)
    assert torch.equal(out.labels, torch.tensor([0, 0]))
    assert out.logits.shape == (2, 2)


def test_consistency_steps_once_per_chunk_by_default() -> None:
    module = ConsistencyRegularization(logits_net(2), 0.5, SGD, num_noise=4)
    assert module.steps_per_batch == 4
    assert ConsistencyRegularization(logits_net(2), 0.5, SGD, num_noise=4, steps_per_batch=1).steps_per_batch == 1


def consistency_loss_np(z: np.ndarray, y: int, lbd: float, eta: float) -> float:
    """The Consistency objective on the logits ``z`` ``[m, C]`` of one image's m noisy copies (paper Eq. 7)."""
    p = softmax(z)
    p_bar = p.mean(axis=0)
    kl = (p_bar * (np.log(p_bar) - np.log(p))).sum(axis=1).mean()
    entropy = -(p_bar * np.log(p_bar)).sum()
    return float(-np.log(p[:, y]).mean() + lbd * kl + eta * entropy)


def test_smoothadv_consistency_loss_on_a_hand_checkable_case() -> None:
    # With f(x) = x and two classes, every gradient of J = -log mean_i softmax_0(x' + delta_i) points along (-1, 1),
    # so the T = 2 steps of 2 epsilon / T from x end at x* = x + epsilon * (-1, 1) / sqrt(2) (the second step is
    # renormed back onto the ball); the clamp to [0, 1] is inactive for this x.
    x, epsilon, lbd, eta = np.array([0.9, 0.1]), 0.5, 2.0, 0.5
    noise = np.array([[0.3, -0.2], [-0.4, 0.1]])
    module = ConsistencyRegularization(
        logits_net(2), 0.5, SGD, num_noise=2, lbd=lbd, eta=eta, adversarial=True, epsilon=epsilon, num_steps=2, warmup=1
    )
    draws: list[torch.Tensor] = []

    def sample_noise(like: torch.Tensor, sigma: object = None, generator: object = None) -> torch.Tensor:
        draws.append(images(noise).to(like.dtype))
        return draws[-1]

    module.sample_noise = sample_noise  # type: ignore[method-assign]
    modes: list[bool] = []
    module.net.register_forward_hook(lambda net, inputs, output: modes.append(net.training))
    module.train()
    out = module.training_loss(batch_of(images([x]), [0]))
    x_adv = x + epsilon * np.array([-1.0, 1.0]) / math.sqrt(2)
    # the loss is the Consistency objective at x* + delta_i with the attack's own noise (drawn once per chunk)
    assert len(draws) == 1
    assert np.allclose(out.logits.detach().numpy(), x_adv + noise, atol=1e-6)
    assert out.loss.item() == pytest.approx(consistency_loss_np(x_adv + noise, 0, lbd, eta), rel=1e-5)
    assert out.terms["epsilon"].item() == epsilon
    assert modes == [False, False, True]  # two attack steps in eval mode, then the training forward
    assert module.training  # the attack restored the mode and the parameters' requires_grad
    assert all(p.requires_grad for p in module.parameters())


def test_smoothadv_consistency_warms_up_epsilon() -> None:
    module = ConsistencyRegularization(logits_net(2), 0.5, SGD, adversarial=True, epsilon=2.0, warmup=10)
    out = module.training_loss(batch_of(images([[0.5, 0.5]]), [0]))
    assert out.terms["epsilon"].item() == pytest.approx(0.2)  # (epoch 0 + 1) * 2.0 / 10


def test_consistency_attack_renorms_before_clamping() -> None:
    # One step of 2 * epsilon along u = (-1, 1) / sqrt(2) from x = (0.1, 0.5): Jeong's order renorms the step to
    # epsilon, x + 0.5 u = (-0.254, 0.854), then clamps: (0, 0.5 + 0.5 / sqrt(2)). Salman's order clamps x + u to
    # (0, 1) first, then renorms (-0.1, 0.5) to 0.5: a different point.
    net, x, labels, noise = logits_net(2), images([[0.1, 0.5]]), torch.tensor([0]), images([[0.2, -0.3]])
    jeong = pgd_l2_smoothed_jeong(net, x, labels, noise, epsilon=0.5, num_steps=1)
    assert np.allclose(jeong.view(2).numpy(), [0.0, 0.5 + 0.5 / math.sqrt(2)], atol=1e-6)
    salman = pgd_l2_smoothed(net, x, labels, noise, epsilon=0.5, num_steps=1)
    scale = 0.5 / math.hypot(0.1, 0.5)
    assert np.allclose(salman.view(2).numpy(), [0.1 - 0.1 * scale, 0.5 + 0.5 * scale], atol=1e-6)


def test_smoothadv_consistency_without_a_published_recipe_names_the_keys() -> None:
    with pytest.raises(ValueError, match=r"no SmoothAdv \+ Consistency recipe .* set method\.epsilon"):
        ConsistencyRegularization(logits_net(2), 0.5, SGD, adversarial=True, epsilon=None, num_noise=None, lbd=None)


# ----------------------------------------------------------------------------------------------------------- MACER


@pytest.mark.parametrize(("gamma", "kept"), [(8.0, True), (0.5, False)])
def test_macer_loss_on_a_hand_checkable_case(gamma: float, kept: bool) -> None:
    sigma, lbd = 0.5, 3.0
    module = MACER(logits_net(2), sigma, SGD, num_noise=2, lbd=lbd, gamma=gamma, beta=1.0)
    # both images have copies with logits (ln 3, 0) and (0, 0): p_bar = (0.625, 0.375); image 0 has label 0
    # (correct), image 1 label 1 (misclassified: no robustness term)
    fixed_noise(module, images([[0.0, 0.0], [-LN3, 0.0], [0.0, 0.0], [-LN3, 0.0]]))
    out = module.training_loss(batch_of(images([[LN3, 0.0], [LN3, 0.0]]), [0, 1]))
    classification = -math.log(0.625 + 1e-10) - math.log(0.375 + 1e-10)
    xi = norm.ppf(0.625) - norm.ppf(0.375)  # 0.637...
    robustness = sigma / 2 * (gamma - xi) if kept else 0.0  # the hinge is 0 when xi > gamma
    assert out.loss.item() == pytest.approx((classification + lbd * robustness) / 2, rel=1e-6)
    assert out.terms["classification"].item() == pytest.approx(classification / 2, rel=1e-6)
    assert out.terms["robustness"].item() == pytest.approx(robustness / 2, rel=1e-6, abs=1e-12)
    assert out.terms["robust_fraction"].item() == (0.5 if kept else 0.0)
    assert torch.equal(out.labels, torch.tensor([0, 0, 1, 1]))


def test_macer_gradient_reaches_both_top_classes() -> None:
    rng = np.random.default_rng(2)
    size, k, classes, sigma, lbd, gamma, beta = 3, 2, 4, 0.5, 3.0, 8.0, 2.0
    x = np.array([[1.5, 0.5, 0.0, -0.5], [0.2, 1.0, 0.1, 0.0], [0.0, 0.3, 0.2, 1.2]])
    y = np.array([0, 1, 2])  # images 0 and 1 are ranked correctly, image 2 is not
    noise = 0.3 * rng.normal(size=(size * k, classes))
    module = MACER(logits_net(classes), sigma, SGD, num_noise=k, lbd=lbd, gamma=gamma, beta=beta)
    fixed_noise(module, images(noise))
    outputs = record_logits(module)
    out = module.training_loss(batch_of(images(x), list(y)))
    out.loss.backward()
    z = (np.repeat(x, k, axis=0) + noise).reshape(size, k, classes)
    p, p_beta = softmax(z), softmax(beta * z)
    p_bar, z_bar = p.mean(axis=1), p_beta.mean(axis=1)
    g_cl = np.zeros((size, classes))
    g_cl[np.arange(size), y] = -1 / (p_bar[np.arange(size), y] + 1e-10) / size
    g_rl = np.zeros((size, classes))
    for i in range(size):
        first, second = np.argsort(z_bar[i])[::-1][:2]
        xi = norm.ppf(z_bar[i, first]) - norm.ppf(z_bar[i, second])
        if first == y[i] and xi <= gamma:
            scale = lbd * sigma / 2 / size
            g_rl[i, first] = -scale / norm.pdf(norm.ppf(z_bar[i, first]))
            g_rl[i, second] = scale / norm.pdf(norm.ppf(z_bar[i, second]))
    expected = softmax_vjp(p, g_cl[:, None, :]) / k + beta * softmax_vjp(p_beta, g_rl[:, None, :]) / k
    assert out.terms["robust_fraction"].item() == pytest.approx(2 / 3)
    assert np.allclose(outputs[0].grad.numpy().reshape(size, k, classes), expected, atol=1e-6)
    assert np.count_nonzero(np.abs(g_rl).sum(axis=1)) == 2  # both kept images carry a robustness gradient


@pytest.mark.parametrize(
    ("logits", "label", "beta"),
    [
        ([60.0, 0.0, 0.0], 0, 16.0),  # the beta-softmax of the label is exactly 1: xi = inf, dropped
        ([-200.0, 0.0, 0.0], 0, 16.0),  # the label's mean probability is exactly 0 in fp32: -log(0 + 1e-10)
        ([0.0, 0.0, 0.0], 1, 16.0),  # top-1 at 1/num_classes, tied: xi = 0
        ([3.0, 0.0, -3.0], 0, 1e4),  # beta so large that every softmax is one-hot
        ([-3.0, 0.0, 3.0], 0, 1e4),  # the label far below 1/num_classes, beta huge
    ],
)
def test_macer_loss_and_gradients_stay_finite_at_extreme_probabilities(
    logits: list[float], label: int, beta: float
) -> None:
    module = MACER(logits_net(3), 1.0, SGD, num_noise=2, lbd=16.0, gamma=8.0, beta=beta)
    fixed_noise(module, images([[0.0, 0.0, 0.0], [0.5, -0.5, 0.0]]))
    x = images([logits]).requires_grad_(True)
    out = module.training_loss(batch_of(x, [label]))
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(value).all() for value in out.terms.values())
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters())


def test_macer_keeps_margins_that_fp32_would_round_away() -> None:
    # logits (20, 0): runner-up 2e-9, top-1 1 - 2e-9 (exactly 1.0 in fp32), xi = 11.76 <= gamma = 16
    module = MACER(logits_net(2), 1.0, SGD, num_noise=1, lbd=1.0, gamma=16.0, beta=1.0)
    fixed_noise(module, images([[0.0, 0.0]]))
    x = images([[20.0, 0.0]]).requires_grad_(True)
    out = module.training_loss(batch_of(x, [0]))
    out.loss.backward()
    runner_up = 1 / (1 + math.exp(20.0))
    xi = norm.ppf(1 - runner_up) - norm.ppf(runner_up)
    assert out.terms["robust_fraction"].item() == 1.0
    assert out.terms["robustness"].item() == pytest.approx(0.5 * (16.0 - xi), rel=1e-6)
    assert torch.isfinite(x.grad).all()
    assert x.grad.abs().max() > 0


def test_macer_scales_each_hinge_by_its_own_sigma() -> None:
    module = MACER(logits_net(2), 0.5, SGD, num_noise=1, lbd=1.0, gamma=8.0, beta=1.0)
    fixed_noise(module, images([[0.0, 0.0], [0.0, 0.0]]))
    x = images([[LN3, 0.0], [LN3, 0.0]])
    xi = norm.ppf(0.75) - norm.ppf(0.25)
    out = module.training_loss(batch_of(x, [0, 0], sigma=torch.tensor([0.5, 1.0])))
    assert out.terms["robustness"].item() == pytest.approx((0.25 + 0.5) * (8.0 - xi) / 2, rel=1e-6)


def test_macer_deferred_lambda_per_epoch() -> None:
    deferred = MACER(logits_net(2), 0.5, SGD, lbd=12.0, lbd_schedule="deferred", lbd_from_epoch=3)
    assert [deferred.lbd_at(epoch) for epoch in range(6)] == [0.0, 0.0, 0.0, 12.0, 12.0, 12.0]
    constant = MACER(logits_net(2), 0.5, SGD, lbd=12.0, lbd_schedule="constant", lbd_from_epoch=3)
    assert [constant.lbd_at(epoch) for epoch in range(3)] == [12.0, 12.0, 12.0]


class EpochLambda(pl.Callback):
    """Records the lambda MACER logged in every training epoch."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.values.append(float(trainer.callback_metrics["train/lbd"]))


def test_macer_deferred_lambda_switches_on_in_training(tmp_path) -> None:
    torch.manual_seed(0)
    module = MACER(logits_net(2), 0.5, SGD, num_noise=2, lbd=5.0, lbd_schedule="deferred", lbd_from_epoch=2)
    data = TensorDataset(torch.rand(8, 1, 1, 2), torch.randint(0, 2, (8,)), torch.arange(8))
    recorder = EpochLambda()
    quiet_trainer(tmp_path, max_epochs=4, callbacks=[recorder]).fit(module, DataLoader(data, batch_size=4))
    assert recorder.values == [0.0, 0.0, 5.0, 5.0]


def test_macer_loss_is_the_classification_loss_while_lambda_is_zero() -> None:
    module = MACER(logits_net(2), 0.5, SGD, num_noise=2, lbd=5.0, lbd_schedule="deferred", lbd_from_epoch=4)
    fixed_noise(module, images([[0.0, 0.0], [-LN3, 0.0]]))
    out = module.training_loss(batch_of(images([[LN3, 0.0]]), [0]))
    assert out.loss.item() == pytest.approx(-math.log(0.625 + 1e-10), rel=1e-6)
    assert out.terms["robustness"].item() > 0  # still computed and logged


# ------------------------------------------------------------------------------------------- bad hyperparameters


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (StabilityTraining, {"lbd": -1.0}, r"method\.lbd .* >= 0, got -1\.0"),
        (StabilityTraining, {"lbd": float("nan")}, r"method\.lbd .* got nan"),
        (ConsistencyRegularization, {"num_noise": 0}, r"method\.num_noise .* integer >= 1, got 0"),
        (ConsistencyRegularization, {"num_noise": 2.0}, r"method\.num_noise .* got 2\.0"),
        (ConsistencyRegularization, {"lbd": -5}, r"method\.lbd \(lambda\) .* got -5"),
        (ConsistencyRegularization, {"eta": True}, r"method\.eta \(eta\) .* got True"),
        (MACER, {"num_noise": 0}, r"method\.num_noise \(k, .* got 0"),
        (MACER, {"gamma": 0.0}, r"method\.gamma .* > 0, got 0\.0"),
        (MACER, {"beta": -16.0}, r"method\.beta .* > 0, got -16\.0"),
        (MACER, {"lbd": float("inf")}, r"method\.lbd .* >= 0, got inf"),
        (MACER, {"lbd_schedule": "linear"}, r"lbd_schedule must be one of \['constant', 'deferred'\], got 'linear'"),
        (MACER, {"lbd_from_epoch": -1}, r"method\.lbd_from_epoch .* got -1"),
        (MACER, {"lbd_schedule": "deferred"}, r"scheduler has none: set method\.lbd_from_epoch=<epoch>"),
    ],
)
def test_bad_hyperparameters_fail_fast_naming_the_key(cls: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(logits_net(2), 0.5, SGD, **kwargs)


# ----------------------------------------------------------------------------------------- one Lightning step each


@pytest.mark.parametrize(
    ("cls", "kwargs", "steps"),
    [
        (StabilityTraining, {"lbd": 2.0}, 1),
        (ConsistencyRegularization, {"num_noise": 2, "lbd": 10.0}, 2),  # one step per chunk
        (ConsistencyRegularization, {"num_noise": 2, "lbd": 1.0, "adversarial": True, "num_steps": 2}, 2),
        (MACER, {"num_noise": 4, "lbd": 12.0}, 1),
    ],
)
def test_one_training_batch_runs_and_changes_the_weights(tmp_path, cls: type, kwargs: dict, steps: int) -> None:
    torch.manual_seed(0)
    module = cls(logits_net(3), 0.5, SGD, **kwargs)
    before = module.net.state_dict()["1.1.weight"].clone()
    data = TensorDataset(torch.rand(8, 1, 1, 3), torch.randint(0, 3, (8,)), torch.arange(8))
    trainer = quiet_trainer(tmp_path, max_epochs=1, limit_train_batches=1)
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=8))
    assert trainer.global_step == steps
    assert not torch.equal(before, module.net.state_dict()["1.1.weight"])
    assert math.isfinite(float(trainer.callback_metrics["train/loss_epoch"]))
    assert {"train/acc", *(f"train/{t}" for t in ("lbd",) if cls is MACER)} <= set(trainer.callback_metrics)


# ------------------------------------------------------------------------------------------------ configs, presets

# The published values themselves are checked against the authors' own commands in
# tests/published/test_published_recipes.py.


@pytest.mark.parametrize("method", ["stability", "consistency", "macer"])
@pytest.mark.parametrize("dataset", ["mnist_embedded", "cifar10"])
@pytest.mark.parametrize("sigma", [0.25, 0.5, 1.0])
def test_method_config_builds_the_method(make_cfg, method: str, dataset: str, sigma: float) -> None:
    cfg = make_cfg(f"method={method}", f"dataset={dataset}", f"sigma={sigma}")
    net = Classifier("tiny", nn.Sequential(nn.Flatten(), nn.Linear(4, 10)), {"kind": "identity"})
    module = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer))
    assert (module.method_name, module.sigma) == (method, sigma)


SMOOTHADV_CONSISTENCY = {
    # dataset family -> {sigma: (epsilon, m, lambda)}: the released salman_<eps*256>_10_10/num_<m>/lbd_<lambda> logs
    "cifar10": {0.25: (255 / 256, 4, 2.0), 0.5: (2.0, 2, 1.0), 1.0: (2.0, 2, 1.0)},
    "mnist": {s: (255 / 256, 4, 1.0) for s in (0.25, 0.5, 1.0)},
}


@pytest.mark.parametrize("dataset", ["mnist_embedded", "cifar10"])
def test_smoothadv_consistency_config_gives_the_published_values(make_cfg, dataset: str) -> None:
    family = "mnist" if dataset == "mnist_embedded" else "cifar10"
    for sigma, (epsilon, m, lbd) in SMOOTHADV_CONSISTENCY[family].items():
        cfg = make_cfg("method=consistency", "method.adversarial=true", f"dataset={dataset}", f"sigma={sigma}")
        module = instantiate(cfg.method, net=logits_net(2), optimizer=instantiate(cfg.optimizer))
        expected = {"epsilon": epsilon, "num_noise": m, "steps_per_batch": m, "lbd": lbd, "eta": 0.5}
        assert {key: getattr(module, key) for key in expected} == expected, (dataset, sigma)
        assert (module.adversarial, module.num_steps, module.warmup) == (True, 10, 10)


def test_smoothadv_consistency_on_imagenet_asks_for_its_values(make_cfg) -> None:
    cfg = make_cfg("method=consistency", "method.adversarial=true", "dataset=imagenet", "sigma=0.5")
    with pytest.raises(InstantiationException, match=r"no SmoothAdv \+ Consistency recipe"):
        instantiate(cfg.method, net=logits_net(2), optimizer=instantiate(cfg.optimizer))
    assert make_cfg("method=consistency", "dataset=imagenet", "sigma=0.5").method.num_noise == 2


def test_method_values_can_be_overridden(make_cfg) -> None:
    cfg = make_cfg("method=macer", "sigma=0.12", "method.lbd=3", "method.lbd_schedule=constant")
    assert (cfg.method.lbd, cfg.method.lbd_schedule, cfg.method.num_noise) == (3, "constant", 16)
    cfg = make_cfg("method=consistency", "method.num_noise=4")
    assert cfg.method.steps_per_batch == 4


def test_deferred_macer_without_milestones_fails_naming_the_key(make_cfg) -> None:
    cfg = make_cfg("method=macer", "~scheduler.milestones")  # a schedule without milestones
    assert (cfg.method.lbd_schedule, cfg.method.lbd_from_epoch) == ("deferred", None)
    with pytest.raises(InstantiationException, match=r"method\.lbd_from_epoch=<epoch>"):
        instantiate(cfg.method, net=logits_net(2), optimizer=instantiate(cfg.optimizer))


def test_macer_original_preset(make_cfg) -> None:
    cfg = make_cfg("experiment=macer_original_cifar10", "sigma=0.25")
    assert cfg.method._target_ == "rsbench.methods.macer.MACER"
    assert (cfg.trainer.max_epochs, cfg.optimizer.lr, cfg.optimizer.weight_decay) == (440, 0.01, 5e-4)
    assert list(cfg.scheduler.milestones) == [199, 399]  # main.py's 200th/400th (1-indexed) epoch
    assert (cfg.dataset.batch_size, cfg.dataset.input_layer.kind) == (64, "identity")
    assert (cfg.certify.start, cfg.certify.skip, cfg.certify.max_images) == (500, 1, 500)
    assert (cfg.method.num_noise, cfg.method.lbd, cfg.method.lbd_schedule) == (16, 12.0, "constant")
    assert make_cfg("experiment=macer_original_cifar10", "sigma=0.5").method.lbd == 4.0
    assert instantiate(cfg.arch).input_layer.spec()["kind"] == "identity"


def test_macer_jeong_preset(make_cfg) -> None:
    cfg = make_cfg("experiment=macer_jeong_cifar10", "method=macer", "sigma=1.0")
    assert (cfg.trainer.max_epochs, cfg.optimizer.lr, cfg.optimizer.weight_decay) == (150, 0.1, 1e-4)
    assert list(cfg.scheduler.milestones) == [51, 101]  # StepLR(50) stepped after each epoch
    assert (cfg.dataset.batch_size, cfg.dataset.input_layer.kind) == (64, "normalize")  # train_macer.py's --batch
    assert cfg.arch.arch == "cifar_resnet110"
    assert (cfg.method.lbd, cfg.method.lbd_schedule, cfg.method.lbd_from_epoch) == (12.0, "deferred", 51)
