"""SmoothAdv, SmoothMix and CAT-RS: attacks, losses and warm-ups pinned on hand-checkable cases, configs, smoke runs."""

from __future__ import annotations

import functools
import logging
import math
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from filelock import FileLock
from hydra.utils import instantiate
from omegaconf.errors import InterpolationResolutionError
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from rsbench import files
from rsbench.archs import Classifier
from rsbench.errors import CheckpointMismatchError, ConfigError, ProtocolMismatchError
from rsbench.files import save_atomically
from rsbench.methods import Batch, SmoothingModule
from rsbench.methods import attacks as attacks_module
from rsbench.methods import smoothmix as smoothmix_module
from rsbench.methods import teacher as teacher_module
from rsbench.methods.attacks import (
    ddn_smoothed,
    frozen,
    noise_kl_pgd,
    pgd_l2_smoothed,
    restandardize,
    smoothmix_adversary,
)
from rsbench.methods.catrs import CATRS, bottom_k_loss, worst_case_kl
from rsbench.methods.smoothadv import SmoothAdv, warmed_up_epsilon
from rsbench.methods.smoothmix import SmoothMix, warmup_factor
from rsbench.methods.teacher import TeacherKey, cache_path, load_teacher, teacher_soft_labels
from rsbench.stop import StopRequested
from tests.classifiers import Recorder
from tests.helpers import SGD, fixed_noise, identity_linear, quiet_trainer, save_checkpoint

IDENTITY = ([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])
S = 1 / math.sqrt(2)


def image(*pixels: float) -> Tensor:
    """One 2-pixel image ``[1, 1, 1, 2]``."""
    return torch.tensor([[[list(pixels)]]])


def zero_noise(rows: int) -> Tensor:
    return torch.zeros(rows, 1, 1, 2)


def bn_net() -> Classifier:
    """A tiny classifier with BatchNorm, to watch running statistics and modes."""
    torch.manual_seed(0)
    body = nn.Sequential(nn.Flatten(), nn.Linear(2, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    return Classifier("bn2", body, {"kind": "identity"})


def at_epoch(monkeypatch: pytest.MonkeyPatch, module: SmoothingModule, epoch: int) -> None:
    monkeypatch.setattr(type(module), "current_epoch", property(lambda self: epoch))


# ---------------------------------------------------------------------------------------------------- attacks


def test_frozen_restores_each_mode_and_flag_and_bn_stats_stay_untouched() -> None:
    net = bn_net()
    net.train()
    net[1][1].eval()  # a mixed state must come back exactly
    net[1][4].weight.requires_grad_(False)
    stats = {k: v.clone() for k, v in net.state_dict().items() if "running" in k}
    x = torch.rand(6, 1, 1, 2)
    noise = torch.randn(12, 1, 1, 2) * 0.25
    with frozen(net):
        assert not any(m.training for m in net.modules())
        assert not any(p.requires_grad for p in net.parameters())
        pgd_l2_smoothed(net, x, torch.zeros(6, dtype=torch.long), noise, epsilon=0.5, num_steps=3)
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in stats.items())
    assert net.training
    assert net[1][2].training
    assert not net[1][1].training
    assert net[1][1].weight.requires_grad
    assert not net[1][4].weight.requires_grad
    assert all(p.grad is None for p in net.parameters())


def test_pgd_step_is_two_eps_over_t_along_the_normalised_gradient_then_renormed() -> None:
    net = identity_linear(*IDENTITY)  # logits = x: grad of CE(x, 0) at (0.5, 0.5) is (-0.5, 0.5)
    x_adv = pgd_l2_smoothed(net, image(0.5, 0.5), torch.tensor([0]), zero_noise(1), epsilon=0.1, num_steps=1)
    # step 2 * 0.1 along (-1, 1)/sqrt(2) has norm 0.2, renormed to 0.1
    assert torch.allclose(x_adv, image(0.5 - 0.1 * S, 0.5 + 0.1 * S), atol=1e-6)


def test_pgd_clamps_to_the_box_before_renorming_salmans_order() -> None:
    net = identity_linear(*IDENTITY)
    x_adv = pgd_l2_smoothed(net, image(0.0, 0.5), torch.tensor([0]), zero_noise(1), epsilon=0.1, num_steps=1)
    # delta = 0.2 * (-1, 1)/sqrt(2); clamp kills the first pixel, then the renorm gives (0, 0.1);
    # renorm-then-clamp (Jeong's order) would give (0, 0.0707)
    assert torch.allclose(x_adv, image(0.0, 0.6), atol=1e-6)


@pytest.mark.parametrize("epsilon", [0.05, 0.5, 2.0])
def test_pgd_stays_in_its_ball_and_in_the_unit_box(epsilon: float) -> None:
    torch.manual_seed(1)
    net = Classifier(
        "mlp", nn.Sequential(nn.Flatten(), nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 3)), {"kind": "identity"}
    )
    x = torch.rand(32, 1, 1, 2).round()  # corners of the box: the clamp is active
    noise = torch.randn(64, 1, 1, 2)
    x_adv = pgd_l2_smoothed(net, x, torch.randint(0, 3, (32,)), noise, epsilon, num_steps=7)
    assert float((x_adv - x).flatten(1).norm(dim=1).max()) <= epsilon + 1e-6
    assert x_adv.min() >= 0
    assert x_adv.max() <= 1
    assert float((x_adv - x).abs().sum()) > 0


def test_pgd_zero_gradient_steps_in_a_random_direction() -> None:
    torch.manual_seed(0)
    net = identity_linear([[0.0, 0.0], [0.0, 0.0]], [0.0, 0.0])  # constant logits: the gradient is exactly 0
    x_adv = pgd_l2_smoothed(net, image(0.5, 0.5), torch.tensor([0]), zero_noise(1), epsilon=0.1, num_steps=1)
    moved = float((x_adv - image(0.5, 0.5)).norm())
    assert 0 < moved <= 0.1 + 1e-6


def test_noise_is_fixed_across_the_attack_steps() -> None:
    torch.manual_seed(0)
    net = Recorder(identity_linear([[1.0, -2.0], [0.5, 1.0]], [0.0, 0.0]))
    x = torch.rand(3, 1, 1, 2) * 0.5 + 0.25
    noise = torch.randn(3 * 4, 1, 1, 2)
    pgd_l2_smoothed(net, x, torch.tensor([0, 1, 0]), noise, epsilon=0.3, num_steps=4)
    first = net.batches[0]
    assert torch.allclose(first, x.repeat_interleave(4, 0) + noise)  # delta starts at 0
    for later in net.batches[1:]:
        shift = (later - first).view(3, 4, 1, 1, 2)
        assert torch.allclose(shift, shift[:, :1].expand_as(shift), atol=1e-6)  # one delta per image, same noise


def test_ddn_leaves_x_unchanged_when_no_adversarial_point_is_found() -> None:
    net = identity_linear(*IDENTITY)
    net[1][1].bias.data = torch.tensor([100.0, 0.0])  # always class 0
    x = image(0.5, 0.5)
    x_adv = ddn_smoothed(net, x, torch.tensor([0]), zero_noise(2), epsilon=1.0, num_steps=10)
    assert torch.equal(x_adv, x)


def test_ddn_finds_a_small_adversary_inside_the_ball_and_the_box() -> None:
    net = identity_linear(*IDENTITY)
    net[1][1].bias.data = torch.tensor([0.1, 0.0])  # the boundary x0 - x1 = -0.1 is 0.071 away
    x = torch.tensor([[[[128 / 255, 128 / 255]]]])
    x_adv = ddn_smoothed(net, x, torch.tensor([0]), zero_noise(1), epsilon=1.0, num_steps=30)
    delta = x_adv - x
    assert net(x_adv).argmax().item() == 1  # adversarial
    assert 0.07 < float(delta.norm()) < 0.5  # near the boundary, far below the initial budget
    assert x_adv.min() >= 0
    assert x_adv.max() <= 1
    assert torch.allclose(x_adv * 255, (x_adv * 255).round(), atol=1e-4)  # 8-bit quantised


def test_ddn_quantises_the_best_delta_after_renorming_it_to_epsilon() -> None:
    """The smallest adversarial delta was found outside epsilon (the budget had grown by 1 + gamma): it is renormed
    to epsilon, then put back on the 8-bit grid. The golden DDN case cannot show this step (its best deltas, of
    norms 0.992 and 0.899, lie inside epsilon = 1, so the final renorm and quantisation leave them unchanged)."""
    net = identity_linear(*IDENTITY)
    x = torch.tensor([[[[153 / 255, 102 / 255]]]])  # the boundary x0 = x1 is 0.1414 away, beyond epsilon
    x_adv = ddn_smoothed(net, x, torch.tensor([0]), zero_noise(1), epsilon=0.14, num_steps=3)
    # renormed: 255 * x = (153, 102) + 25.24 * (-1, 1) = (127.76, 127.24), each 0.26 from a rounding tie
    assert torch.allclose(x_adv * 255, torch.tensor([[[[128.0, 127.0]]]]), rtol=0, atol=1e-9)


def test_smoothmix_adversary_iterates_and_mix_steps() -> None:
    net = identity_linear(*IDENTITY)
    x, y, noise = image(0.5, 0.5), torch.tensor([0]), zero_noise(1)
    one = image(0.5 - 0.1 * S, 0.5 + 0.1 * S)
    two = image(0.5 - 0.2 * S, 0.5 + 0.2 * S)  # the gradient keeps its direction on this line
    plain = smoothmix_adversary(net, x, y, noise, num_steps=2, step_size=0.1, mix_step=0, maxnorm_s=0.0)
    assert torch.equal(plain.init, x)
    assert torch.allclose(plain.adv, two, atol=1e-6)
    onestep = smoothmix_adversary(net, x, y, noise, num_steps=2, step_size=0.1, mix_step=1, maxnorm_s=0.1)
    assert torch.allclose(onestep.init, one, atol=1e-5)
    squeezed = smoothmix_adversary(net, x, y, noise, num_steps=2, step_size=0.1, mix_step=1, maxnorm_s=0.05)
    assert torch.allclose(squeezed.init, image(0.5 - 0.05 * S, 0.5 + 0.05 * S), atol=1e-5)
    bounded = smoothmix_adversary(net, x, y, noise, num_steps=2, step_size=0.1, maxnorm=0.12)
    assert torch.allclose(bounded.adv, image(0.5 - 0.12 * S, 0.5 + 0.12 * S), atol=1e-5)
    last = smoothmix_adversary(net, x, y, noise, num_steps=2, step_size=0.1, mix_step=2)
    assert torch.allclose(last.init, two, atol=1e-6)  # mix_step = T: the T-step adversary (see the docstring)


def test_smoothmix_adversary_renorms_then_clamps_jeongs_order() -> None:
    net = identity_linear(*IDENTITY)
    out = smoothmix_adversary(net, image(0.0, 0.5), torch.tensor([0]), zero_noise(1), 1, 0.2, maxnorm=0.1)
    # step (-0.1414, 0.1414), renorm to 0.1 -> (-0.0707, 0.0707), clamp -> (0, 0.5707); Salman's order gives (0, 0.6)
    assert torch.allclose(out.adv, image(0.0, 0.5 + 0.1 * S), atol=1e-5)


def test_restandardize_uses_the_uncentred_rms() -> None:
    reference = torch.tensor([[[[0.5, -0.5, 3.0]]]])  # mean 1, uncentred rms sqrt(9.5 / 3)
    noise = torch.tensor([[[[1.0, 2.0, 6.0]]]])  # mean 3, uncentred rms sqrt(41 / 3), std sqrt(14 / 3)
    out = restandardize(noise, reference)
    expected = (noise - 3) / math.sqrt(41 / 3) * math.sqrt(9.5 / 3) + 1
    assert torch.allclose(out, expected)
    assert out.mean().item() == pytest.approx(1.0)


def test_noise_kl_pgd_increases_the_kl_and_keeps_each_rows_mean() -> None:
    torch.manual_seed(0)
    net = Classifier(
        "mlp", nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)), {"kind": "identity"}
    )
    x = torch.rand(4, 1, 2, 4)
    targets = F.one_hot(torch.tensor([0, 1, 2, 0]), 3).float() * 0.9 + 0.1 / 3
    noise = torch.randn(8, 1, 2, 4) * 0.5
    adv = noise_kl_pgd(net, x, targets, noise, epsilon=0.5, num_steps=4)

    def kl(n: Tensor) -> Tensor:
        logp = F.log_softmax(net(x.repeat_interleave(2, 0) + n), dim=1)
        return F.kl_div(logp, targets.repeat_interleave(2, 0), reduction="none").sum(1)

    with torch.no_grad():
        assert float(kl(adv).sum()) > float(kl(noise).sum())
    assert torch.allclose(adv.flatten(1).mean(1), noise.flatten(1).mean(1), atol=1e-6)
    rms = noise.flatten(1).pow(2).mean(1).sqrt()
    assert torch.allclose(adv.flatten(1).pow(2).mean(1).sqrt(), rms, rtol=0.2)
    assert float((adv - noise).flatten(1).norm(dim=1).max()) < 1.0  # near its ball of 0.5 (re-standardised)
    assert torch.equal(noise_kl_pgd(net, x, targets, noise, epsilon=0.0, num_steps=4), noise)


# ---------------------------------------------------------------------------------------------------- SmoothAdv


def smoothadv(**kwargs: Any) -> SmoothAdv:
    settings = {"epsilon": 0.1, "num_steps": 1, "num_noise": 2, "warmup": 1} | kwargs
    return SmoothAdv(net=identity_linear(*IDENTITY), sigma=0.25, optimizer=SGD, **settings)


def test_smoothadv_loss_is_ce_at_the_adversary_with_the_attack_noise() -> None:
    module = smoothadv()
    noise = torch.tensor([[[[0.1, -0.1]]], [[[-0.1, 0.1]]]])
    draws = fixed_noise(module, noise)
    out = module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    # F_hat at x: the two noisy softmaxes are mirror images, so the gradient direction is again (-1, 1)/sqrt(2)
    x_adv = torch.tensor([0.5 - 0.1 * S, 0.5 + 0.1 * S])
    logits = x_adv + noise.view(2, 2)
    assert torch.allclose(out.logits, logits, atol=1e-5)
    expected = F.cross_entropy(logits, torch.tensor([0, 0]))
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert len(draws) == 1  # one draw, reused by the attack and the loss


def test_smoothadv_single_noise_path_trains_on_the_first_copy() -> None:
    module = smoothadv(train_multi_noise=False, num_noise=3)
    noise = torch.tensor([[[[0.2, 0.0]]], [[[9.0, 9.0]]], [[[9.0, 9.0]]]] * 2)
    fixed_noise(module, noise)
    x = torch.cat([image(0.5, 0.5), image(0.3, 0.6)])
    out = module.training_loss(Batch(x, torch.tensor([0, 1]), torch.arange(2)))
    assert out.logits.shape == (2, 2)
    assert torch.equal(out.labels, torch.tensor([0, 1]))
    assert (out.logits < 5).all()  # the 9.0 copies only served the attack


def test_smoothadv_fresh_noise_option_draws_again() -> None:
    module = smoothadv(fresh_noise=True)
    draws = fixed_noise(module, zero_noise(2))
    module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    assert len(draws) == 2


def test_smoothadv_epsilon_warmup_per_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [warmed_up_epsilon(1.0, 10, e) for e in (0, 1, 4, 9, 10, 50)] == pytest.approx([0.1, 0.2, 0.5, 1, 1, 1])
    module = smoothadv(epsilon=2.0, warmup=4)
    at_epoch(monkeypatch, module, 1)
    assert module.current_epsilon() == pytest.approx(1.0)
    fixed_noise(module, zero_noise(2))
    out = module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    assert out.terms["epsilon"].item() == pytest.approx(1.0)
    # the step of 2 * 1.0 along (-1, 1)/sqrt(2) leaves the box: clamped to (0, 1), norm 0.707 < epsilon
    assert torch.allclose(out.logits[0], torch.tensor([0.0, 1.0]), atol=1e-6)


def test_smoothadv_ddn_attack_is_used_when_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    called = []
    monkeypatch.setattr(
        "rsbench.methods.smoothadv.ddn_smoothed", lambda *args, **kwargs: called.append(args[4:]) or args[1]
    )
    module = smoothadv(attack="ddn", ddn_gamma=0.1)
    module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    assert called == [(0.1, 1, 0.1)]  # epsilon (its initial norm too), steps, gamma


# ---------------------------------------------------------------------------------------------------- SmoothMix


def smoothmix(**kwargs: Any) -> SmoothMix:
    settings = {"num_steps": 1, "num_noise": 1, "step_size": 0.1, "eta": 2.0, "warmup": 1} | kwargs
    return SmoothMix(net=identity_linear(*IDENTITY), sigma=0.25, optimizer=SGD, **settings)


def smoothmix_expected(x0: float, x1: float, y: int, lam: float, eta: float) -> tuple[float, float]:
    """(L_nat, eta * L_mix) for the identity model, m = 1, zero noise, T = 1, alpha = 0.1, by hand."""
    p = F.softmax(torch.tensor([x0, x1]), dim=0)
    sign = -1.0 if y == 0 else 1.0  # the CE gradient pushes away from the label
    adv = torch.tensor([x0 + sign * 0.1 * S, x1 - sign * 0.1 * S])
    mixed = (1 - lam) * torch.tensor([x0, x1]) + lam * adv
    target = (1 - lam) * p + lam * 0.5
    l_mix = float((target * (target.log() - F.log_softmax(mixed, dim=0))).sum())
    correct = float(p.argmax().item() == y)
    return -math.log(float(p[y])), eta * correct * l_mix


def test_smoothmix_loss_on_a_hand_checkable_case(monkeypatch: pytest.MonkeyPatch) -> None:
    module = smoothmix()
    fixed_noise(module, zero_noise(4))
    monkeypatch.setattr(module, "sample_lambda", lambda like: torch.full((like.shape[0],), 0.25))
    x = torch.cat([image(0.6, 0.4), image(0.6, 0.4)])
    out = module.training_loss(Batch(x, torch.tensor([0, 1]), torch.arange(2)))
    nat0, mix0 = smoothmix_expected(0.6, 0.4, 0, 0.25, 2.0)
    nat1, mix1 = smoothmix_expected(0.6, 0.4, 1, 0.25, 2.0)
    assert mix0 > 0
    assert mix1 == 0
    # L_nat averages the rows; the masked L_mix sum is divided by all rows, not by the correct ones
    assert out.loss.item() == pytest.approx((nat0 + nat1) / 2 + (mix0 + mix1) / 2, rel=1e-5)
    assert out.terms["mix_mask"].item() == pytest.approx(0.5)


def test_smoothmix_mixup_formula() -> None:
    x_mix, y_mix = smoothmix_module.mixup(
        image(1.0, 0.0), image(0.0, 1.0), torch.tensor([[0.9, 0.1]]), torch.tensor([0.5]), 2
    )
    assert torch.allclose(x_mix, image(0.5, 0.5))
    assert torch.allclose(y_mix, torch.tensor([[0.7, 0.3]]))


def test_smoothmix_one_step_trains_the_ce_on_the_one_step_adversary() -> None:
    module = smoothmix(num_steps=2, mix_step=1, one_step=True)
    recorder = Recorder(module.net)
    module.net = recorder  # type: ignore[assignment]
    fixed_noise(module, zero_noise(1))
    module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    # 2 attack forwards, then the clean-side forward (on init), then the mixup forward
    assert len(recorder.batches) == 4
    assert torch.allclose(recorder.batches[2], image(0.5 - 0.1 * S, 0.5 + 0.1 * S), atol=1e-5)


def test_smoothmix_warmup_scales_eta_and_maxnorm_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [warmup_factor(10, e) for e in (0, 4, 9, 20)] == pytest.approx([0.1, 0.5, 1.0, 1.0])
    module = smoothmix(num_steps=2, mix_step=1, one_step=True, warmup=4, step_size=0.2)
    assert module.maxnorm_s == pytest.approx(0.2)  # alpha * mix_step by default
    at_epoch(monkeypatch, module, 0)
    init, _ = module.adversary(image(0.5, 0.5), torch.tensor([0]), zero_noise(1))
    assert float((init - image(0.5, 0.5)).norm()) == pytest.approx(0.05, abs=1e-5)  # 0.25 * 0.2
    monkeypatch.setattr(module, "sample_lambda", lambda like: torch.full((like.shape[0],), 0.25))
    fixed_noise(module, zero_noise(1))
    early = module.training_loss(Batch(image(0.6, 0.4), torch.tensor([0]), torch.arange(1)))
    at_epoch(monkeypatch, module, 3)
    late = module.training_loss(Batch(image(0.6, 0.4), torch.tensor([0]), torch.arange(1)))
    early_mix = early.loss - early.terms["loss_nat"]
    late_mix = late.loss - late.terms["loss_nat"]
    assert early.terms["loss_mix"].item() > 0
    assert early_mix.item() == pytest.approx(0.25 * 2.0 * early.terms["loss_mix"].item(), abs=1e-7)
    assert late_mix.item() == pytest.approx(2.0 * late.terms["loss_mix"].item(), abs=1e-7)


# ---------------------------------------------------------------------------------------------------- CAT-RS


def test_bottom_k_keeps_the_k_smallest_and_divides_by_m() -> None:
    losses = torch.tensor([[3.0, 1.0, 2.0, 4.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    out = bottom_k_loss(losses, torch.tensor([2, 4, 1]))
    assert torch.allclose(out, torch.tensor([(1 + 2) / 4, 10 / 4, 5 / 4]))


def test_worst_case_kl_is_the_max_over_the_copies() -> None:
    targets = torch.tensor([[0.5, 0.5]])
    log_probs = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]]))
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert worst_case_kl(log_probs, targets, 2).item() == pytest.approx(expected)


def catrs(**kwargs: Any) -> CATRS:
    settings = {"num_noise": 2, "epsilon": 0.0, "num_steps": 1, "lbd": 3.0} | kwargs
    return CATRS(net=identity_linear(*IDENTITY), sigma=0.25, optimizer=SGD, **settings)


@pytest.mark.parametrize("accept", [1, 2])
def test_catrs_loss_on_a_hand_checkable_case(monkeypatch: pytest.MonkeyPatch, accept: int) -> None:
    module = catrs()
    module.soft_labels = torch.tensor([[0.0, 1.0], [0.8, 0.2], [0.0, 1.0]])
    noise = torch.tensor([[[[0.3, 0.0]]], [[[-0.3, 0.0]]]])
    fixed_noise(module, noise)
    seen = []
    monkeypatch.setattr(module, "sample_accept", lambda p: seen.append(p) or torch.tensor([accept]))
    out = module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.tensor([1])))
    logits = torch.tensor([[0.8, 0.5], [0.2, 0.5]])  # x + delta_i; epsilon = 0 keeps the noise
    ce = F.cross_entropy(logits, torch.tensor([0, 0]), reduction="none")
    kl = (torch.tensor([0.8, 0.2]) * (torch.tensor([0.8, 0.2]).log() - F.log_softmax(logits, 1))).sum(1)
    assert seen[0].tolist() == [0.5]  # p_hat: one of the two noisy predictions is right
    # K = 1: only the easiest copy, divided by M, and no worst-case term (K < M); K = M: all copies + lbd * max KL
    expected = ce.min() / 2 if accept == 1 else ce.sum() / 2 + 3.0 * kl.max()
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert out.terms["full_accept"].item() == float(accept == 2)


def test_catrs_k_is_clamped_to_one() -> None:
    module = catrs(soft_label="self")
    fixed_noise(module, zero_noise(2))
    module.sample_accept = lambda p: torch.tensor([0])  # type: ignore[method-assign]
    out = module.training_loss(Batch(image(0.2, 0.9), torch.tensor([0]), torch.arange(1)))
    assert out.loss.item() == pytest.approx(math.log(1 + math.exp(0.7)) / 2, rel=1e-5)


def test_catrs_attack_starts_from_and_replaces_the_clean_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    module = catrs(epsilon=0.5, num_steps=3, soft_label="self")
    noise = torch.randn(2, 1, 1, 2)
    draws = fixed_noise(module, noise)
    calls = []
    original = attacks_module.noise_kl_pgd

    def spy(model: Any, x: Tensor, targets: Tensor, start: Tensor, epsilon: float, steps: int) -> Tensor:
        calls.append((start.clone(), epsilon, steps, model.training))
        return original(model, x, targets, start, epsilon, steps)

    monkeypatch.setattr("rsbench.methods.catrs.noise_kl_pgd", spy)
    module.training_loss(Batch(image(0.5, 0.5), torch.tensor([0]), torch.arange(1)))
    assert len(draws) == 1
    assert torch.equal(calls[0][0], noise)
    assert calls[0][1:] == (0.5, 3, False)  # eval mode during the search


def test_catrs_binomial_sampler_and_epsilon_doubling(monkeypatch: pytest.MonkeyPatch) -> None:
    module = catrs(num_noise=4, double_epsilon_epoch=2, epsilon=1.0)
    assert module.sample_accept(torch.tensor([0.0, 1.0])).tolist() == [0, 4]
    torch.manual_seed(0)
    draws = module.sample_accept(torch.full((20000,), 0.25)).float()
    assert draws.mean().item() == pytest.approx(1.0, abs=0.05)  # M p
    at_epoch(monkeypatch, module, 1)
    assert module.current_epsilon() == 1.0
    at_epoch(monkeypatch, module, 2)
    assert module.current_epsilon() == 2.0


def test_catrs_teacher_rows_are_looked_up_by_training_index() -> None:
    module = catrs()
    module.soft_labels = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7]])
    batch = Batch(torch.zeros(2, 1, 1, 2), torch.tensor([0, 1]), torch.tensor([2, 0]))
    assert torch.equal(module.targets(batch, torch.zeros(4, 2)), torch.tensor([[0.3, 0.7], [1.0, 0.0]]))
    selfish = catrs(soft_label="self")
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]], requires_grad=True)
    target = selfish.targets(Batch(batch.x[:1], batch.y[:1], batch.indices[:1]), logits)
    assert not target.requires_grad
    assert torch.allclose(target, (F.softmax(logits, 1).mean(0, keepdim=True)).detach())


def test_catrs_soft_labels_stay_fp32_under_bf16_logits() -> None:
    """A teacher vote share like 0.3337 (N = 10,000) is not representable in bf16 (nearest: 0.333984375): the target
    and the KL must stay in fp32 whatever dtype the network's autocast gives the logits."""
    module = catrs()
    module.soft_labels = torch.tensor([[0.3337, 0.6663]])
    batch = Batch(torch.zeros(1, 1, 1, 2), torch.tensor([1]), torch.tensor([0]))
    target = module.targets(batch, torch.zeros(2, 2, dtype=torch.bfloat16))
    assert target.dtype == torch.float32
    assert torch.equal(target, module.soft_labels)  # copied, not rounded
    selfish = catrs(soft_label="self")
    assert selfish.targets(batch, torch.zeros(2, 2, dtype=torch.bfloat16)).dtype == torch.float32


def test_catrs_without_a_teacher_says_how_to_train_one(tmp_path: Path) -> None:
    module = catrs()
    data = TensorDataset(torch.rand(4, 1, 1, 2), torch.zeros(4, dtype=torch.long), torch.arange(4))
    with pytest.raises(ConfigError, match=r"python -m rsbench method=gaussian dataset=.* sigma=0\.25"):
        quiet_trainer(tmp_path, max_steps=1).fit(module, train_dataloaders=DataLoader(data, batch_size=4))
    with pytest.raises(ValueError, match=r"teacher_ckpt='nope\.ckpt' is not a file"):
        quiet_trainer(tmp_path, max_steps=1).fit(catrs(teacher_ckpt="nope.ckpt"), DataLoader(data, batch_size=4))


# ---------------------------------------------------------------------------------------------------- teacher


def test_teacher_checkpoint_is_loaded_and_checked(tmp_path: Path) -> None:
    saved = identity_linear([[2.0, 0.0], [0.0, 3.0]], [0.5, 0.0])
    path = save_checkpoint(saved, tmp_path / "t.ckpt", sigma=0.12, method="gaussian")
    teacher, sigma = load_teacher(path, identity_linear(*IDENTITY))
    assert sigma == 0.12
    assert torch.equal(teacher.state_dict()["1.1.weight"], saved.state_dict()["1.1.weight"])
    other = Classifier("other", nn.Sequential(nn.Flatten(), nn.Linear(2, 2)), {"kind": "identity"})
    with pytest.raises(CheckpointMismatchError, match="arch"):
        load_teacher(path, other)


def test_teacher_votes_are_cached_by_key_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    teacher = identity_linear([[5.0, 0.0], [0.0, 5.0]], [0.0, 0.0])
    images = TensorDataset(torch.tensor([[[[1.0, 0.0]]], [[[0.0, 1.0]]], [[[0.5, 0.5]]]]), torch.tensor([0, 1, 0]))
    key = TeacherKey("abc", "toy", 3, "d", 2, num_samples=200, sigma=0.25, seed=0)
    first = teacher_soft_labels(teacher, images, key, tmp_path, batch_size=64)
    assert cache_path(tmp_path, key).is_file()
    assert first.shape == (3, 2)
    assert torch.allclose(first.sum(1), torch.ones(3))
    assert first[0, 0] > 0.9
    assert first[1, 1] > 0.9
    assert 0.2 < first[2, 0] < 0.8
    monkeypatch.setattr(teacher_module, "vote_histograms", lambda *a, **k: pytest.fail("recomputed on a hit"))
    assert torch.equal(teacher_soft_labels(teacher, images, key, tmp_path, batch_size=7), first)
    monkeypatch.undo()
    other = TeacherKey("abc", "toy", 3, "d", 2, num_samples=100, sigma=0.25, seed=0)
    assert cache_path(tmp_path, other) != cache_path(tmp_path, key)  # N is part of the key
    teacher_soft_labels(teacher, images, other, tmp_path, batch_size=64)
    assert len(list(tmp_path.glob("*.pt"))) == 2
    # a stored key that does not match is refused, naming the setting, neither trusted nor overwritten
    stale = torch.load(cache_path(tmp_path, key), weights_only=True)
    stale["key"]["seed"] = 99
    stale["soft_labels"] = torch.zeros(3, 2)
    torch.save(stale, cache_path(tmp_path, key))
    with pytest.raises(ProtocolMismatchError, match="seed: stored 99, requested 0"):
        teacher_soft_labels(teacher, images, key, tmp_path, batch_size=64)
    assert torch.equal(torch.load(cache_path(tmp_path, key), weights_only=True)["soft_labels"], torch.zeros(3, 2))


def test_interrupted_teacher_votes_resume_to_the_uninterrupted_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after image 0 (its row saved to the partial file), resumed: the same table as one uninterrupted run."""
    teacher = identity_linear([[5.0, 0.0], [0.0, 5.0]], [0.0, 0.0])
    images = TensorDataset(torch.tensor([[[[1.0, 0.0]]], [[[0.0, 1.0]]], [[[0.5, 0.5]]]]), torch.tensor([0, 1, 0]))
    key = TeacherKey("abc", "toy", 3, "d", 2, num_samples=200, sigma=0.25, seed=0)
    whole = teacher_soft_labels(teacher, images, key, tmp_path / "whole", batch_size=200)  # one image per pass
    monkeypatch.setattr(files, "stop_requested", lambda: signal.SIGTERM)  # a stop after the first image
    with pytest.raises(StopRequested):
        teacher_soft_labels(teacher, images, key, tmp_path / "cut", batch_size=200)
    monkeypatch.undo()
    partial = torch.load(cache_path(tmp_path / "cut", key).with_suffix(".partial.pt"), weights_only=True)
    assert partial["key"] == asdict(key)
    assert partial["soft_labels"][1:].isnan().all()
    assert not partial["soft_labels"][0].isnan().any()
    resumed = teacher_soft_labels(teacher, images, key, tmp_path / "cut", batch_size=400)  # two images per pass
    assert torch.equal(resumed, whole)  # each image's votes come from (seed, index): the same numbers
    assert not cache_path(tmp_path / "cut", key).with_suffix(".partial.pt").exists()


def test_runs_asking_for_the_same_teacher_votes_at_once_compute_them_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A sweep's runs start together with one teacher: the second waits on the first's lock, then reads its cache."""
    teacher = identity_linear([[5.0, 0.0], [0.0, 5.0]], [0.0, 0.0])
    images = TensorDataset(torch.zeros(3, 1, 1, 2), torch.tensor([0, 1, 0]))
    key = TeacherKey("abc", "toy", 3, "d", 2, num_samples=200, sigma=0.25, seed=0)
    table = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    holding, path = threading.Event(), cache_path(tmp_path, key)

    def first_run() -> None:  # holds the lock while it "computes", then writes the table and lets go
        with FileLock(path.with_suffix(".lock")):
            holding.set()
            time.sleep(0.5)
            save_atomically({"key": asdict(key), "soft_labels": table}, path)

    thread = threading.Thread(target=first_run)
    thread.start()
    holding.wait()
    monkeypatch.setattr(teacher_module, "vote_histograms", lambda *a, **k: pytest.fail("computed a second time"))
    with caplog.at_level(logging.INFO, logger="rsbench.methods.teacher"):
        labels = teacher_soft_labels(teacher, images, key, tmp_path, batch_size=64)
    thread.join()
    assert torch.equal(labels, table)
    assert "another process is computing them" in caplog.text
    assert "cache hit" in caplog.text


def test_a_run_waiting_for_another_to_compute_the_teacher_votes_stops_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = TeacherKey("abc", "toy", 3, "d", 2, num_samples=200, sigma=0.25, seed=0)
    holder = FileLock(cache_path(tmp_path, key).with_suffix(".lock"), thread_local=False)
    holder.acquire()
    calls = []

    def stop_on_the_second_check() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise StopRequested(signal.SIGTERM)

    monkeypatch.setattr(teacher_module, "WAIT_POLL_SECONDS", 0.05)
    monkeypatch.setattr(teacher_module, "raise_if_stop_requested", stop_on_the_second_check)
    teacher = identity_linear([[5.0, 0.0], [0.0, 5.0]], [0.0, 0.0])
    images = TensorDataset(torch.zeros(3, 1, 1, 2), torch.tensor([0, 1, 0]))
    try:
        with pytest.raises(StopRequested):
            teacher_soft_labels(teacher, images, key, tmp_path, batch_size=64)
    finally:
        holder.release()
    assert len(calls) == 2
    assert not cache_path(tmp_path, key).exists()  # nothing written by the run that stopped


def test_catrs_labels_the_training_set_when_fit_starts(tmp_path: Path) -> None:
    from rsbench.data import ImageDataModule

    def source(root: Any, train: bool, transform: Any = None, download: bool = False) -> TensorDataset:
        torch.manual_seed(int(train))
        x = torch.rand(12, 1, 1, 2)
        return TensorDataset(x, (x[:, 0, 0, 1] > x[:, 0, 0, 0]).long())

    datamodule = ImageDataModule(
        "toy", "mnist", source, 2, [1, 1, 2], {"kind": "identity"}, str(tmp_path), batch_size=4, val_size=2
    )
    path = save_checkpoint(
        identity_linear([[5.0, 0.0], [0.0, 5.0]], [0.0, 0.0]), tmp_path / "teacher.ckpt", method="gaussian"
    )
    module = CATRS(
        net=identity_linear(*IDENTITY),
        sigma=0.5,
        optimizer=SGD,
        num_noise=2,
        teacher_ckpt=str(path),
        teacher_num_samples=50,
        steps_per_batch=2,
    )
    quiet_trainer(tmp_path, max_steps=2).fit(module, datamodule=datamodule)
    assert module.soft_labels is not None
    assert module.soft_labels.shape == (12, 2)
    assert len(list((tmp_path / "soft_labels").glob("catrs_soft_labels_toy_*.pt"))) == 1


# ---------------------------------------------------------------------------------------------------- checks


@pytest.mark.parametrize(
    ("build", "kwargs", "message"),
    [
        (smoothadv, {"num_noise": 0}, r"method\.num_noise must be an integer >= 1, got 0"),
        (smoothadv, {"epsilon": -0.5}, r"method\.epsilon must be a finite number >= 0, got -0.5"),
        (smoothadv, {"attack": "fgsm"}, r"method\.attack must be one of \['ddn', 'pgd'\], got 'fgsm'"),
        (smoothadv, {"warmup": 0}, r"method\.warmup must be an integer >= 1"),
        (smoothadv, {"num_steps": 0}, r"method\.num_steps must be an integer >= 1"),
        (smoothmix, {"step_size": 0.0}, r"method\.step_size must be a finite number > 0, got"),
        (smoothmix, {"mix_step": 3, "num_steps": 2}, r"method\.mix_step must be an integer in \[0, 2\], got 3"),
        (smoothmix, {"one_step": True, "mix_step": 0}, r"method\.mix_step must be 1"),
        (smoothmix, {"eta": -1.0}, r"method\.eta must be"),
        (smoothmix, {"maxnorm": -1.0}, r"method\.maxnorm must be"),
        (catrs, {"num_noise": 0}, r"method\.num_noise must be an integer >= 1"),
        (catrs, {"lbd": float("nan")}, r"method\.lbd must be a finite number"),
        (catrs, {"soft_label": "teachers"}, r"method\.soft_label must be one of \['self', 'teacher'\]"),
        (catrs, {"soft_label": "self", "confidence_mask": True}, r"needs soft_label=teacher"),
        (catrs, {"teacher_num_samples": 0}, r"method\.teacher_num_samples must be an integer >= 1"),
    ],
)
def test_bad_hyperparameters_fail_fast_naming_the_key(build: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(**kwargs)


# ---------------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize(
    "build",
    [
        functools.partial(SmoothAdv, epsilon=0.5, num_steps=2, num_noise=2, steps_per_batch=2),
        functools.partial(SmoothAdv, epsilon=0.5, num_steps=2, num_noise=2, train_multi_noise=False, attack="ddn"),
        functools.partial(SmoothMix, num_steps=2, num_noise=2, step_size=0.5, eta=5.0, steps_per_batch=2),
        functools.partial(CATRS, num_noise=2, soft_label="self", steps_per_batch=2),
    ],
    ids=["smoothadv", "smoothadv_single_ddn", "smoothmix", "catrs"],
)
def test_one_training_step_through_lightning_changes_the_weights(tmp_path: Path, build: Any) -> None:
    torch.manual_seed(0)
    net = bn_net()
    module = build(net=net, sigma=0.25, optimizer=SGD)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    data = TensorDataset(torch.rand(8, 1, 1, 2), torch.randint(0, 2, (8,)), torch.arange(8))
    trainer = quiet_trainer(tmp_path, max_steps=module.steps_per_batch)
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=8))
    assert not torch.equal(before["1.1.weight"], net.state_dict()["1.1.weight"])
    assert not torch.equal(before["1.2.running_mean"], net.state_dict()["1.2.running_mean"])
    assert "train/acc" in trainer.callback_metrics
    assert all(p.requires_grad for p in net.parameters())
    assert net.training


# ---------------------------------------------------------------------------------------------------- configs

# The published values themselves are checked against the authors' own commands in
# tests/published/test_published_recipes.py.


@pytest.mark.parametrize("sigma", [0.25, 0.5, 1.0])
@pytest.mark.parametrize("method", ["smoothadv", "smoothmix", "catrs"])
@pytest.mark.parametrize("dataset", ["mnist_embedded", "cifar10"])
def test_config_builds_the_method_with_m_steps_per_batch(
    make_cfg: Any, method: str, dataset: str, sigma: float
) -> None:
    cfg = make_cfg(f"method={method}", f"dataset={dataset}", f"sigma={sigma}", "arch=lenet")
    assert cfg.method.steps_per_batch == cfg.method.num_noise  # m chunks, one optimizer step each
    net = instantiate(cfg.arch)
    module = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer))
    assert module.sigma == sigma
    assert module.steps_per_batch == cfg.method.num_noise


def test_config_switches_and_overrides(make_cfg: Any) -> None:
    cfg = make_cfg("method=smoothmix", "method.one_step=true", "method.eta=1")
    assert (cfg.method.mix_step, cfg.method.eta) == (1, 1.0)
    cfg = make_cfg("method=smoothadv", "method.train_multi_noise=false")
    assert cfg.method.steps_per_batch == 1
    cfg = make_cfg("method=catrs", "dataset=cifar10", "sigma=1.0", "method.lbd=8")
    assert cfg.method.lbd == 8
    with pytest.raises(InterpolationResolutionError, match=r"set method\.lbd=<value>"):
        _ = make_cfg("method=catrs", "dataset=cifar10", "sigma=0.12").method.lbd
