"""method=sun2025 beyond the golden cases: the authors' recipes compose, the decisions' edge cases, state and resume.

The recipe test parses the authors' own training scripts (eth-sri/acr-weakness@1c8ea59 script/cifar10/train_*.sh and
script/imagenet/train_*.sh, copied verbatim below) with ``code/train.py``'s argparse defaults and checks that
``python -m rsbench method=sun2025 dataset=<d> sigma=<s>`` composes the same recipe.
"""

from __future__ import annotations

import functools
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from scipy.stats import beta, norm
from torch.utils.data import TensorDataset

import rsbench  # noqa: F401  (registers the rs.* resolvers)
from rsbench import files
from rsbench.certify.pipeline.subset import indices_digest
from rsbench.errors import ProtocolMismatchError
from rsbench.methods.sun2025 import (
    PlanSampler,
    SamplingState,
    Sun2025,
    dataset_weights,
    hard_sample_mask,
    p_correct,
)
from rsbench.stop import StopRequested
from tests import golden
from tests.helpers import ComposeFn

SGD = functools.partial(torch.optim.SGD, lr=0.1)

# The authors' scripts (verbatim, line continuations joined) and code/train.py's argparse defaults they rely on.
SCRIPTS = {
    ("cifar10", 0.25): "python code/train.py cifar10 cifar_resnet110 --lr 0.1 --epochs 150 --noise 0.25 --ds_hard "
    "--ds_epoch 60 --ds_threshold 0.5 --dataset_weight --dataset_weight_epoch 10 --adv --attacker pgd_radius_l2 "
    "--epsilon 0.25 --attack_steps 3 --id 1",
    ("cifar10", 0.5): "python code/train.py cifar10 cifar_resnet110 --lr 0.1 --epochs 150 --noise 0.5 --ds_hard "
    "--ds_epoch 70 --ds_threshold 0.4 --dataset_weight --dataset_weight_epoch 10 --adv --attacker pgd_radius_l2 "
    "--epsilon 0.25 --attack_steps 6 --id 1",
    ("cifar10", 1.0): "python code/train.py cifar10 cifar_resnet110 --lr 0.1 --epochs 150 --noise 1.0 --ds_hard "
    "--ds_epoch 60 --ds_threshold 0.4 --dataset_weight --dataset_weight_epoch 10 --adv --attacker pgd_radius_l2 "
    "--epsilon 0.5 --attack_steps 4 --id 1",
    ("imagenet", 0.25): "python code/train.py imagenet resnet50 --lr 0.1 --epochs 90 --noise 0.25 --num-noise-vec 1 "
    "--ds_hard --ds_epoch 0 --ds_threshold 0.2 --adv --attacker pgd_radius_l2 --epsilon 0.5 --attack_steps 2 "
    "--p_corr_file  p_correct/train/imagenet/-1_50.npy --id 1",
    ("imagenet", 0.5): "python code/train.py imagenet resnet50 --lr 0.1 --epochs 90 --noise 0.5 --num-noise-vec 1 "
    "--ds_hard --ds_epoch 0 --ds_threshold 0.2 --adv --attacker pgd_radius_l2 --epsilon 1.0 --attack_steps 2 "
    "--p_corr_file  p_correct/train/imagenet/-1_50.npy --id 1",
    ("imagenet", 1.0): "python code/train.py imagenet resnet50 --lr 0.1 --epochs 90 --noise 1.0 --num-noise-vec 2 "
    "--ds_hard --ds_epoch 0 --ds_threshold 0.1 --adv --attacker pgd_radius_l2 --epsilon 2.0 --attack_steps 1 "
    "--p_corr_file  p_correct/train/imagenet/-1_50.npy --id 1",
}
DEFAULTS: dict[str, Any] = {
    "epochs": 90, "batch": 256, "lr": 0.1, "lr_milestones": [50, 100], "lr_drop": 1000, "gamma": 0.1,
    "momentum": 0.9, "weight_decay": 1e-4, "noise_sd": 0.0, "num_noise_vec": 4, "ds_hard": False,
    "ds_threshold": 0.4, "ds_epoch": 100, "p_corr_file": None, "dataset_weight": False, "dataset_weight_epoch": 10,
    "num_noise_dataset_weight": 16, "adv": False, "attacker": "pgd_radius_l2", "attack_steps": 1, "epsilon": 256.0,
}  # fmt: skip
FLAGS = {"ds_hard", "dataset_weight", "adv"}


def parse(command: str) -> tuple[list[str], dict[str, Any]]:
    """Positional arguments and options as train.py's argparse reads them (``--noise`` is a prefix of --noise_sd)."""
    tokens = shlex.split(command)[2:]
    options, positional = dict(DEFAULTS), []
    while tokens:
        token = tokens.pop(0)
        if not token.startswith("--"):
            positional.append(token)
            continue
        name = token[2:].replace("-", "_")
        if name == "id":
            tokens.pop(0)
            continue
        (match,) = [k for k in DEFAULTS if k == name] or [k for k in DEFAULTS if k.startswith(name)]
        kind = str if DEFAULTS[match] is None else type(DEFAULTS[match])
        options[match] = True if match in FLAGS else kind(tokens.pop(0))
    return positional, options


def authors_rates(options: dict[str, Any]) -> list[float]:
    """The rate of each epoch: MultiStepLR(lr_milestones + [lr_drop]) stepped once after each epoch (train.py)."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=options["lr"])
    milestones = [*options["lr_milestones"], options["lr_drop"]]
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, options["gamma"])
    rates = []
    for _ in range(options["epochs"]):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def rsbench_rates(cfg: Any) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.optimizer.lr)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, list(cfg.scheduler.milestones), cfg.scheduler.gamma)
    rates = []
    for _ in range(cfg.trainer.max_epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


@pytest.mark.parametrize(("dataset", "sigma"), list(SCRIPTS), ids=[f"{d}-{s}" for d, s in SCRIPTS])
def test_default_recipe_is_the_authors_script(make_cfg: ComposeFn, dataset: str, sigma: float) -> None:
    positional, options = parse(SCRIPTS[(dataset, sigma)])
    cfg = make_cfg("method=sun2025", f"dataset={dataset}", f"sigma={sigma}")
    assert positional == [dataset, cfg.arch.arch]
    assert cfg.sigma == pytest.approx(options["noise_sd"])
    assert (cfg.dataset.batch_size, cfg.trainer.max_epochs) == (options["batch"], options["epochs"])
    assert (cfg.optimizer.momentum, cfg.optimizer.weight_decay) == (options["momentum"], options["weight_decay"])
    assert rsbench_rates(cfg) == pytest.approx(authors_rates(options))
    method = cfg.method
    assert method._target_ == "rsbench.methods.sun2025.Sun2025"
    expected = {
        "num_noise": options["num_noise_vec"],
        "steps_per_batch": options["num_noise_vec"],
        "ds_hard": options["ds_hard"],
        "ds_epoch": options["ds_epoch"],
        "ds_threshold": options["ds_threshold"],
        "dataset_weight": options["dataset_weight"],
        "dataset_weight_epoch": options["dataset_weight_epoch"],
        "dataset_weight_samples": options["num_noise_dataset_weight"],
        "adv": options["adv"],
        "attacker": options["attacker"],
        "epsilon": options["epsilon"],
        "attack_steps": options["attack_steps"],
    }
    for key, value in expected.items():
        assert method[key] == (pytest.approx(value) if isinstance(value, float) else value), key
    if options["p_corr_file"] is None:  # ImageNet: the authors' released table, passed as method.p_correct_file
        assert method.p_correct_file is None


def test_mnist_family_uses_the_cifar10_values_on_a_150_epoch_schedule(make_cfg: ComposeFn) -> None:
    cfg = make_cfg("method=sun2025", "dataset=fashion_mnist", "sigma=0.5")
    assert (cfg.trainer.max_epochs, list(cfg.scheduler.milestones), cfg.optimizer.lr) == (150, [50, 100], 0.01)
    assert (cfg.method.ds_epoch, cfg.method.ds_threshold, cfg.method.attack_steps) == (70, 0.4, 6)


# ------------------------------------------------------------------------------------------ decisions


def test_hard_sample_threshold_compares_float32_p_a_as_the_reference() -> None:
    """numpy compares a float32 array with a Python float in float32 (value-based casting, and NEP 50 since numpy 2):
    7 of 10 is float32(0.7) = 0.69999999 < 0.7 in float64, yet kept at t = 0.7, as in the reference."""
    counts = torch.tensor([7, 50, 49, 100])
    assert float(p_correct(counts[:1], 10)) < 0.7
    assert hard_sample_mask(p_correct(counts[:1], 10), 0.7).tolist() == [True]
    assert hard_sample_mask(p_correct(counts[1:], 100), 0.5).tolist() == [True, False, True]


def test_dataset_weights_are_phi_inverse_of_the_one_sided_90_percent_bound() -> None:
    p = p_correct(torch.tensor([16, 14, 12, 3, 0]), 16)
    weights = dataset_weights(p, 16)
    expected = [norm.ppf(0.1 ** (1 / 16)), norm.ppf(beta.ppf(0.1, 14, 3)), *[norm.ppf(beta.ppf(0.1, 12, 5))] * 3]
    torch.testing.assert_close(weights, torch.tensor(expected, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    assert bool((weights > 0).all())  # the clip at 0.75 keeps every kept image drawable


def test_schedule_without_ds_hard_attacks_and_draws_with_replacement_from_epoch_zero() -> None:
    module = tiny(ds_hard=False, dataset_weight=False)
    assert module.stage_epoch == 0
    assert module.adv_active(0)
    plan = module.epoch_plan(0)
    assert plan.replacement
    assert plan.weights is not None
    assert torch.equal(plan.weights, torch.ones(3, dtype=torch.float64))
    assert module.weight_epochs(20) == []


def test_weight_epochs_follow_the_stage_epoch() -> None:
    module = tiny(ds_epoch=60, dataset_weight_epoch=10)
    assert module.weight_epochs(150) == [60, 70, 80, 90, 100, 110, 120, 130, 140]
    assert not module.adv_active(59)
    assert module.adv_active(60)


# ------------------------------------------------------------------------------------------ state and resume


def tiny(**options: Any) -> Sun2025:
    fixture = golden.load("sun2025")
    module = Sun2025(net=golden.tiny_model(fixture), sigma=0.5, optimizer=SGD, num_noise=1, **options)
    images = TensorDataset(golden.inputs(fixture).float(), torch.tensor([0, 0, 1]))
    module._training_images = lambda: images  # type: ignore[method-assign]
    module.net.float()
    return module


def test_state_survives_a_checkpoint_and_a_resumed_run_does_not_estimate_again(monkeypatch: pytest.MonkeyPatch) -> None:
    module = tiny(ds_epoch=1, dataset_weight_epoch=2)
    calls: list[tuple[int, int]] = []

    def estimate(dataset: Any, positions: torch.Tensor, n: int, epoch: int) -> torch.Tensor:
        calls.append((epoch, n))
        return torch.full((len(positions),), n)  # every copy correct

    monkeypatch.setattr(module, "_estimate", estimate)
    module.epoch_plan(1)
    assert calls == [(1, 100), (1, 16)]
    checkpoint: dict[str, Any] = {}
    module.on_save_checkpoint(checkpoint)
    resumed = tiny(ds_epoch=1, dataset_weight_epoch=2)
    resumed.on_load_checkpoint(checkpoint)
    again: list[int] = []

    def estimate_again(*args: Any) -> torch.Tensor:
        again.append(1)
        return torch.zeros(3, dtype=torch.long)

    monkeypatch.setattr(resumed, "_estimate", estimate_again)
    plan = resumed.epoch_plan(2)  # epoch 2 still uses epoch 1's weights (next update at 3)
    assert not again
    assert isinstance(resumed.state, SamplingState)
    assert resumed.state.kept is not None
    assert resumed.state.kept.tolist() == [True, True, True]
    assert plan.weights is not None
    assert torch.equal(plan.weights, module.state.weights)  # type: ignore[arg-type]
    resumed.epoch_plan(3)
    assert again == [1]


def test_estimate_resumes_from_its_partial_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An interrupted estimate continues with the chunks not yet counted, and gives the uninterrupted counts."""
    module = tiny(estimate_batch_size=8)  # 1 image per chunk at N = 8
    monkeypatch.setattr(module, "_estimate_path", lambda *args: tmp_path / "partial.pt")
    images = module._training_images()
    positions = torch.arange(3)
    full = module._estimate(images, positions, 8, 5)
    stored = torch.load(tmp_path / "partial.pt", weights_only=True)
    stored["counts"][1:] = -1  # as if stopped after the first chunk
    torch.save(stored, tmp_path / "partial.pt")
    counted: list[int] = []
    original = module.count_correct

    def count(x: torch.Tensor, *args: Any) -> torch.Tensor:
        counted.append(len(x))
        return original(x, *args)

    monkeypatch.setattr(module, "count_correct", count)
    assert torch.equal(module._estimate(images, positions, 8, 5), full)
    assert counted == [1, 1]


def test_an_interrupted_estimate_resumes_to_the_uninterrupted_counts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A stop after the first image saves its count (and the key) and stops; the rerun counts only the other two."""
    full = tiny(estimate_batch_size=8)._estimate(tiny()._training_images(), torch.arange(3), 8, 5)
    module = tiny(estimate_batch_size=8)
    monkeypatch.setattr(module, "_estimate_path", lambda *args: tmp_path / "p.pt")
    monkeypatch.setattr(files, "stop_requested", lambda: signal.SIGTERM)
    with pytest.raises(StopRequested):
        module._estimate(module._training_images(), torch.arange(3), 8, 5)
    monkeypatch.setattr(files, "stop_requested", lambda: None)
    stored = torch.load(tmp_path / "p.pt", weights_only=True)
    assert stored["counts"].tolist() == [int(full[0]), -1, -1]
    assert stored["key"]["epoch"] == 5
    assert stored["key"]["num_samples"] == 8
    counted: list[int] = []
    original = module.count_correct
    monkeypatch.setattr(module, "count_correct", lambda x, *args: counted.append(len(x)) or original(x, *args))
    assert torch.equal(module._estimate(module._training_images(), torch.arange(3), 8, 5), full)
    assert counted == [1, 1]


def test_an_estimate_file_of_before_resumes_and_one_of_other_images_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``{positions, counts}`` without a key (the files of runs in progress) resumes; other positions are refused."""
    module = tiny(estimate_batch_size=8)
    monkeypatch.setattr(module, "_estimate_path", lambda *args: tmp_path / "p.pt")
    full = module._estimate(module._training_images(), torch.arange(3), 8, 5)
    torch.save({"positions": torch.arange(3), "counts": torch.tensor([int(full[0]), -1, -1])}, tmp_path / "p.pt")
    assert torch.equal(module._estimate(module._training_images(), torch.arange(3), 8, 5), full)
    torch.save({"positions": torch.tensor([0, 2, 1]), "counts": torch.tensor([1, -1, -1])}, tmp_path / "p.pt")
    with pytest.raises(ProtocolMismatchError, match="positions: stored"):
        module._estimate(module._training_images(), torch.arange(3), 8, 5)
    key = {"epoch": 5, "num_samples": 8, "stream": 3, "seed": 7, "positions": indices_digest([0, 1, 2])}
    torch.save({"positions": torch.arange(3), "counts": full, "key": key}, tmp_path / "p.pt")
    with pytest.raises(ProtocolMismatchError, match="seed: stored 7, requested 0"):
        module._estimate(module._training_images(), torch.arange(3), 8, 5)


def estimate_with_noise(module: Sun2025, epoch: int = 5, n: int = 100) -> tuple[list[int], torch.Tensor]:
    """The counts of an N-copy estimate of the 3 images, and every noise draw it made, in drawing order."""
    drawn: list[torch.Tensor] = []
    original = module.standard_normal

    def spy(like: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        out = original(like, generator)
        drawn.append(out.clone())
        return out

    module.standard_normal = spy  # type: ignore[method-assign]
    counts = module._estimate(module._training_images(), torch.arange(3), n, epoch)
    return counts.tolist(), torch.cat(drawn)


def test_p_a_draws_do_not_depend_on_the_estimate_batch_size() -> None:
    """1, 2 or 3 images per forward pass: the same noise for each image, the same counts.

    The chunk-seeded streams gave [98, 74, 14], [98, 67, 13] and [98, 74, 9] here.
    """
    (counts, noise), *others = [estimate_with_noise(tiny(estimate_batch_size=b)) for b in (8192, 100, 200)]
    for other_counts, other_noise in others:
        assert other_counts == counts
        assert torch.equal(other_noise, noise)


def test_p_a_draws_are_seeded_by_the_training_seed_and_the_epoch() -> None:
    counts, noise = estimate_with_noise(tiny(estimate_seed=0))
    assert torch.equal(estimate_with_noise(tiny(estimate_seed=0))[1], noise)  # reproducible
    assert not torch.equal(estimate_with_noise(tiny(estimate_seed=1))[1], noise)
    assert not torch.equal(estimate_with_noise(tiny(estimate_seed=0), epoch=6)[1], noise)
    assert min(counts) > 0  # the draws matter here: no image is always or never right
    assert max(counts) < 100


def test_an_image_draws_the_same_noise_whichever_images_are_estimated_with_it() -> None:
    module = tiny()
    alone = module._estimate(module._training_images(), torch.tensor([2]), 100, 5)
    assert alone.tolist() == [estimate_with_noise(tiny())[0][2]]


def test_the_estimates_seed_is_the_training_seed(make_cfg: ComposeFn) -> None:
    assert make_cfg("method=sun2025", "seed=3").method.estimate_seed == 3


def test_a_partial_estimate_resumes_under_another_batch_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Stopped after image 0 at 1 image per pass, resumed at 3 per pass: images 1 and 2 counted, the same counts."""
    first = tiny(estimate_batch_size=8)
    monkeypatch.setattr(first, "_estimate_path", lambda *args: tmp_path / "partial.pt")
    full = first._estimate(first._training_images(), torch.arange(3), 8, 5)
    stored = torch.load(tmp_path / "partial.pt", weights_only=True)
    stored["counts"][1:] = -1
    torch.save(stored, tmp_path / "partial.pt")
    resumed = tiny(estimate_batch_size=24)
    monkeypatch.setattr(resumed, "_estimate_path", lambda *args: tmp_path / "partial.pt")
    counted: list[int] = []
    original = resumed.count_correct
    monkeypatch.setattr(resumed, "count_correct", lambda x, *args: counted.append(len(x)) or original(x, *args))
    assert torch.equal(resumed._estimate(resumed._training_images(), torch.arange(3), 8, 5), full)
    assert counted == [2]


def test_sampler_draws_the_training_set_size_with_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    module = tiny(ds_epoch=0)
    module.state = SamplingState(
        kept=torch.tensor([True, False, True]), kept_epoch=0, weights=torch.tensor([1.0, 0.0, 3.0]), weights_epoch=0
    )
    monkeypatch.setattr(type(module), "trainer", property(lambda self: type("T", (), {"current_epoch": 0})()))
    sampler = PlanSampler(module, 3)
    torch.manual_seed(0)
    drawn = [i for _ in range(200) for i in sampler]
    assert len(sampler) == 3
    assert 1 not in drawn
    assert 0.6 < drawn.count(2) / len(drawn) < 0.9  # weight 3 of 4


def test_p_correct_file_of_the_wrong_length_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.pt"
    torch.save(torch.ones(5), path)
    module = tiny(p_correct_file=str(path), ds_epoch=0)
    with pytest.raises(ValueError, match="5 values for 3 training images"):
        module.epoch_plan(0)


def test_bad_options_are_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"method\.attacker"):
        tiny(attacker="pgd_radius_l1")
    with pytest.raises(ValueError, match=r"method\.ds_threshold"):
        tiny(ds_threshold=1.5)
