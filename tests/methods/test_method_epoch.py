"""A method's checkpoint is the method's: the card's first epoch, the selection that honours it, metrics.json's epoch.

A method whose schedule starts with another method's loss declares from which epoch its weights are the method
(:class:`rsbench.methods.card.MethodEpoch`); the best-checkpoint callback (:class:`MethodCheckpoint`) compares no
earlier epoch, a run that trains none of the method's epochs is refused, and ``metrics.json`` says which epoch was
certified (``certified_epoch``) and from which the method counts (``method_epoch``).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hydra.utils import instantiate

from rsbench.errors import ConfigError
from rsbench.methods.card import MethodCard, MethodEpoch, first_method_epoch, method_card, register, unregister
from rsbench.methods.ddrs import data_dependent
from rsbench.methods.macer import MACER
from rsbench.methods.sun2025 import Sun2025
from rsbench.runs.checkpointing import MethodCheckpoint
from rsbench.runs.precheck import check_method_epoch
from rsbench.runs.run import check_config, run
from tests.helpers import SGD, SMOKE, compose_config

# ------------------------------------------------------------------------------------------ what the cards declare


@pytest.mark.parametrize(
    ("overrides", "epoch"),
    [
        (("method=gaussian",), 0),
        (("method=smoothadv",), 0),  # its epsilon warm-up ramps SmoothAdv's own loss from epoch 0
        (("method=smoothmix",), 0),  # eta's warm-up likewise
        (("method=catrs", "dataset=imagenet", "sigma=1.0"), 0),  # epsilon doubles at 80: CAT-RS before and after
        (("method=consistency", "method.adversarial=true"), 0),
        (("method=sun2025", "dataset=cifar10", "sigma=0.5"), 70),  # ds_epoch
        (("method=sun2025", "dataset=cifar10", "sigma=0.5", "method.ds_hard=false"), 0),
        (("method=sun2025", "experiment=mnist_study", "sigma=1.0"), 8),
        (("method=macer",), 10),  # MNIST family: deferred to the first milestone of [10, 15]
        (("method=macer", "dataset=cifar10", "sigma=0.25"), 0),  # constant lambda
        (("method=ddrs", "dataset=cifar10", "sigma=0.5"), 50),  # sigma_search_from_epoch
        (("method=ddrs", "method.base=macer", "method.sigma_search_from_epoch=0",
          "+method.base_args.lbd_schedule=deferred", "+method.base_args.lbd_from_epoch=7"), 7),  # the base's, if later
    ],
)  # fmt: skip
def test_each_methods_first_epoch_follows_its_schedule(overrides: tuple[str, ...], epoch: int) -> None:
    cfg = compose_config(*overrides)
    assert first_method_epoch(cfg.method)[0] == epoch
    assert cfg.callbacks.model_checkpoint.first_epoch == epoch


def test_the_cards_first_epoch_is_where_the_class_switches_its_phase_on() -> None:
    """The card reads the config; the class runs the schedule: the two agree on the epoch the method starts."""
    net = instantiate(compose_config().arch)
    sun = Sun2025(net=net, sigma=0.5, optimizer=SGD, ds_epoch=6)
    assert method_card("sun2025").first_method_epoch({"ds_epoch": 6}) == sun.stage_epoch == 6
    assert (sun.adv_active(5), sun.adv_active(6), sun.epoch_plan(5).replacement) == (False, True, False)
    assert method_card("sun2025").first_method_epoch({}) == Sun2025(net=net, sigma=0.5, optimizer=SGD).stage_epoch
    macer = MACER(net, 0.5, SGD, lbd_schedule="deferred", lbd_from_epoch=4)
    assert method_card("macer").first_method_epoch({"lbd_schedule": "deferred", "lbd_from_epoch": 4}) == 4
    assert (macer.lbd_at(3), macer.lbd_at(4)) == (0.0, 12.0)
    constant = MACER(net, 0.5, SGD)
    assert method_card("macer").first_method_epoch({}) == 0 == next(e for e in range(9) if constant.lbd_at(e))
    ddrs = data_dependent(
        "gaussian", sigma_iters=1, sigma_lr=1e-4, sigma_search_from_epoch=3, net=net, sigma=0.5, optimizer=SGD
    )
    assert method_card("ddrs").first_method_epoch({"base": "gaussian", "sigma_search_from_epoch": 3}) == 3
    assert (ddrs.iterations_at(2), ddrs.iterations_at(3)) == (0, 1)


def test_a_toy_cards_epoch_reaches_the_callback_and_the_checks() -> None:
    toy = MethodCard(
        name="toy_phased",
        target="rsbench.methods.gaussian.GaussianAugmentation",  # (a card is found by its target)
        paper="none",
        method_epoch=MethodEpoch(lambda method: method.get("warm", 2), keys=("warm",), before="a warm-up"),
    )
    gaussian = method_card("gaussian")
    unregister("gaussian")
    register(toy)
    try:
        assert compose_config().callbacks.model_checkpoint.first_epoch == 2
        with pytest.raises(ConfigError, match=r"method=toy_phased is itself from epoch 2 on .*before it: a warm-up"):
            check_method_epoch({"_target_": toy.target}, 2)
        check_method_epoch({"_target_": toy.target}, 3)
        with pytest.raises(ConfigError, match=r"method.warm must give the first epoch .* got -1"):
            first_method_epoch({"_target_": toy.target, "warm": -1})
    finally:
        unregister("toy_phased")
        register(gaussian)


def test_a_run_that_ends_before_its_method_starts_is_refused_by_name() -> None:
    """method=sun2025 on the default 20-epoch recipe has ds_epoch 60: it would have certified a Gaussian model."""
    message = (
        "method=sun2025 is itself from epoch 60 on (0-indexed; before it: Gaussian training with m noise copies (no "
        "image dropped or reweighted, no attack on the noise)), but trainer.max_epochs=20 ends before it, so no "
        "checkpoint would be sun2025: raise trainer.max_epochs above 60, or set an earlier epoch (method.ds_epoch, "
        "method.ds_hard)"
    )
    with pytest.raises(ConfigError) as refused:
        check_config(compose_config("method=sun2025"))
    assert str(refused.value) == message
    check_config(compose_config("method=sun2025", "method.ds_epoch=19"))
    check_method_epoch(compose_config("method=sun2025").method, None)  # no epoch limit: nothing to check


def test_a_run_that_tests_nothing_may_stop_before_its_method_starts() -> None:
    """test=false selects and certifies no checkpoint: MACER's deferred lambda-0 epochs, continued from last.ckpt."""
    check_config(compose_config("method=macer", "method.lbd_from_epoch=31", "trainer.max_epochs=31", "test=false"))
    with pytest.raises(ConfigError, match=r"trainer\.max_epochs=31 ends before it"):
        check_config(compose_config("method=macer", "method.lbd_from_epoch=31", "trainer.max_epochs=31"))


# ------------------------------------------------------------------------------------------------ the selection


def test_the_certified_checkpoint_is_from_the_methods_epochs_when_validation_peaks_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A smoke sun2025 run (stage epoch 1) whose validation is best at epoch 0, a Gaussian model.

    best.ckpt is the best of epochs 1 and 2 (2: not merely the first eligible one), and metrics.json says so.
    """
    accuracy = {0: 0.9, 1: 0.3, 2: 0.6}

    def forced(self: Sun2025, batch: Any, batch_idx: int) -> None:
        self.log("val/acc_noisy", accuracy[self.current_epoch], on_epoch=True)

    monkeypatch.setattr(Sun2025, "validation_step", forced)
    cheap = ("dataset.batch_size=32", "method.ds_num_samples=4", "method.dataset_weight=false", "method.attack_steps=1")
    run(compose_config(*SMOKE, "method=sun2025", "trainer.max_epochs=3", *cheap, output_dir=tmp_path))
    best = torch.load(tmp_path / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=False)
    assert best["epoch"] == 2
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert (metrics["certified_epoch"], metrics["method_epoch"]) == (2, 1)
    assert metrics["hparams"]["ds_epoch"] == 1


# ----------------------------------------------------------------------------------------------- the callback


def checkpoint_state(path: Path, score: float) -> dict[str, Any]:
    """What ``ModelCheckpoint.state_dict`` saved for a best checkpoint ``path`` of ``score`` (no first epoch)."""
    value = torch.tensor(score)
    return {
        "monitor": "val/acc_noisy",
        "best_model_score": value,
        "best_model_path": str(path),
        "current_score": value,
        "dirpath": str(path.parent),
        "best_k_models": {str(path): value},
        "kth_best_model_path": str(path),
        "kth_value": value,
        "last_model_path": "",
    }


def make_callback(dirpath: Path, first_epoch: int) -> MethodCheckpoint:
    return MethodCheckpoint(
        dirpath=dirpath, filename="best", monitor="val/acc_noisy", mode="max", save_top_k=1, first_epoch=first_epoch
    )


def test_the_callback_state_is_found_under_model_checkpoints_key(tmp_path: Path) -> None:
    from pytorch_lightning.callbacks import ModelCheckpoint

    plain = ModelCheckpoint(dirpath=tmp_path, filename="best", monitor="val/acc_noisy", mode="max", save_top_k=1)
    assert make_callback(tmp_path, 5).state_key == plain.state_key
    assert make_callback(tmp_path, 5).state_dict()["first_epoch"] == 5
    with pytest.raises(ValueError, match="must be >= 0, got -1"):
        make_callback(tmp_path, -1)


def test_a_best_checkpoint_selected_before_the_methods_first_epoch_is_replaced_on_resume(tmp_path: Path) -> None:
    """A run checkpointed by ModelCheckpoint (no first epoch) resumes under first_epoch 3: its best score is void."""
    trainer = SimpleNamespace(strategy=SimpleNamespace(reduce_boolean_decision=lambda decision: decision))
    path = tmp_path / "best.ckpt"
    resumed = make_callback(tmp_path, 3)
    resumed.load_state_dict(checkpoint_state(path, 0.9))
    assert resumed.best_model_path == str(path)  # the file the next selection overwrites
    assert resumed.check_monitor_top_k(trainer, torch.tensor(0.1))  # type: ignore[arg-type]
    same = make_callback(tmp_path, 0)  # first epoch 0 (Gaussian): restored exactly as ModelCheckpoint restores it
    same.load_state_dict(checkpoint_state(path, 0.9))
    assert float(same.best_model_score) == pytest.approx(0.9)  # type: ignore[arg-type]
    assert not same.check_monitor_top_k(trainer, torch.tensor(0.1))  # type: ignore[arg-type]
    kept = make_callback(tmp_path, 3)  # saved under the same first epoch: kept
    kept.load_state_dict({**checkpoint_state(path, 0.9), "first_epoch": 3})
    assert not kept.check_monitor_top_k(trainer, torch.tensor(0.1))  # type: ignore[arg-type]
