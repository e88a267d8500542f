"""Training methods: each loss pinned on a hand-checkable case, plus the base module's shared behaviour."""

from __future__ import annotations

import functools
import math
import shutil
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.utils.data import DataLoader, TensorDataset

from rsbench.errors import CheckpointMismatchError
from rsbench.methods import Batch, GaussianAugmentation, SmoothingModule
from rsbench.runs.prerequisites import declared
from tests.helpers import CONF_DIR, SGD, compose_config, fixed_noise, identity_linear, quiet_trainer


def test_gaussian_loss_on_a_hand_checkable_case() -> None:
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), sigma=0.25, optimizer=SGD)
    x = torch.tensor([[[[0.5, 0.0]]], [[[0.2, 0.9]]]])
    y = torch.tensor([0, 1])
    fixed_noise(module, torch.tensor([[[[0.1, -0.2]]], [[[0.0, 0.0]]]]))
    out = module.training_loss(Batch(x, y, torch.arange(2)))
    # logits = x + eps: [0.6, -0.2] (label 0) and [0.2, 0.9] (label 1)
    expected = (math.log(1 + math.exp(-0.8)) + math.log(1 + math.exp(-0.7))) / 2
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)
    assert torch.allclose(out.logits, torch.tensor([[0.6, -0.2], [0.2, 0.9]]))
    assert torch.equal(out.labels, y)


def test_gaussian_draws_fresh_noise_each_batch_at_sigma() -> None:
    torch.manual_seed(0)
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), sigma=0.5, optimizer=SGD)
    x = torch.zeros(4000, 1, 1, 2)
    batch = Batch(x, torch.zeros(4000, dtype=torch.long), torch.arange(4000))
    first = module.training_loss(batch).logits
    second = module.training_loss(batch).logits
    assert not torch.equal(first, second)
    assert first.std().item() == pytest.approx(0.5, rel=0.05)  # logits = noise here


def test_gaussian_uses_per_example_sigma_when_given() -> None:
    torch.manual_seed(0)
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), sigma=0.5, optimizer=SGD)
    x = torch.zeros(2, 1, 1, 2)
    sigma = torch.tensor([0.0001, 10.0])
    logits = module.training_loss(Batch(x, torch.zeros(2, dtype=torch.long), torch.arange(2), sigma)).logits
    assert logits[0].abs().max() < 0.01
    assert logits[1].abs().max() > 0.01


def test_validation_noise_is_the_same_every_epoch() -> None:
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), sigma=0.5, optimizer=SGD)
    seen = []
    module.log = lambda *args, **kwargs: None  # type: ignore[method-assign]
    original = module.forward
    module.forward = lambda x: seen.append(x.clone()) or original(x)  # type: ignore[method-assign]
    batch = (torch.rand(3, 1, 1, 2), torch.tensor([0, 1, 0]))
    module.validation_step(batch, 0)
    module.validation_step(batch, 0)
    module.validation_step(batch, 1)
    noisy = seen[0::2]  # each step runs the noisy forward, then the clean one
    assert torch.equal(noisy[0], noisy[1])  # same batch index: same noise, so epochs compare fairly
    assert not torch.equal(noisy[0], noisy[2])


def test_scheduler_is_stepped_per_epoch() -> None:
    scheduler = functools.partial(torch.optim.lr_scheduler.MultiStepLR, milestones=[2], gamma=0.1)
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), 0.5, SGD, scheduler)
    config = module.configure_optimizers()
    assert config["lr_scheduler"]["interval"] == "epoch"
    assert isinstance(config["optimizer"], torch.optim.SGD)


def test_checkpoint_signature_check_names_the_mismatch() -> None:
    net = identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])
    module = GaussianAugmentation(net, sigma=0.25, optimizer=SGD)
    checkpoint: dict = {}
    module.on_save_checkpoint(checkpoint)
    assert checkpoint["rsbench"]["method"] == "gaussian"
    module.on_load_checkpoint(checkpoint)
    other = GaussianAugmentation(net, sigma=1.0, optimizer=SGD)
    with pytest.raises(CheckpointMismatchError, match=r"sigma: checkpoint has 0\.25, this run expects 1\.0"):
        other.on_load_checkpoint(checkpoint)
    GaussianAugmentation(net, sigma=1.0, optimizer=SGD, allow_sigma_mismatch=True).on_load_checkpoint(checkpoint)
    with pytest.raises(CheckpointMismatchError, match="no rsbench signature"):
        module.on_load_checkpoint({"state_dict": {}})


def test_one_training_step_runs_and_changes_the_weights(tmp_path) -> None:
    torch.manual_seed(0)
    net = identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0])
    module = GaussianAugmentation(net, sigma=0.25, optimizer=SGD)
    before = net.state_dict()["1.1.weight"].clone()
    data = TensorDataset(torch.rand(8, 1, 1, 2), torch.randint(0, 2, (8,)), torch.arange(8))
    trainer = quiet_trainer(tmp_path, max_steps=1)
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=8))
    assert not torch.equal(before, net.state_dict()["1.1.weight"])
    assert {"train/loss_step", "train/acc"} <= set(trainer.callback_metrics)


def test_base_module_requires_a_loss() -> None:
    module = SmoothingModule(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), sigma=0.5, optimizer=SGD)
    with pytest.raises(NotImplementedError, match="training_loss"):
        module.training_loss(Batch(torch.zeros(1, 1, 1, 2), torch.zeros(1, dtype=torch.long), torch.zeros(1)))


class RecordingGaussian(GaussianAugmentation):
    """Gaussian augmentation that records the images of every chunk it is given."""

    def training_loss(self, batch: Batch):
        self.chunks.append(batch.indices.tolist())
        return super().training_loss(batch)


def test_steps_per_batch_cuts_each_batch_into_chunks_with_one_step_each(tmp_path) -> None:
    torch.manual_seed(0)
    scheduler = functools.partial(torch.optim.lr_scheduler.MultiStepLR, milestones=[1], gamma=0.1)
    module = RecordingGaussian(
        identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), 0.25, SGD, scheduler, steps_per_batch=3
    )
    module.chunks = []
    data = TensorDataset(torch.rand(14, 1, 1, 2), torch.randint(0, 2, (14,)), torch.arange(14))
    trainer = quiet_trainer(tmp_path, max_epochs=2)
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=7))
    # 2 loader batches of 7 per epoch -> 3 chunks of 7 // 3 = 2 images each (the 7th dropped), one step per chunk
    assert module.chunks[:3] == [[0, 1], [2, 3], [4, 5]]
    assert module.chunks[3:6] == [[7, 8], [9, 10], [11, 12]]
    assert trainer.global_step == 2 * 2 * 3
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.01)  # stepped once per epoch, twice


def test_steps_per_batch_must_fit_the_batch() -> None:
    module = GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), 0.25, SGD, steps_per_batch=4)
    module.trainer = pl.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    batch = (torch.rand(3, 1, 1, 2), torch.zeros(3, dtype=torch.long), torch.arange(3))
    with pytest.raises(ValueError, match=r"cannot be cut into method\.steps_per_batch=4 chunks"):
        module.training_step(batch, 0)
    with pytest.raises(ValueError, match="steps_per_batch must be an integer >= 1"):
        GaussianAugmentation(identity_linear([[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0]), 0.25, SGD, steps_per_batch=0)


# ------------------------------------------------------------------------------------------- every conf/method option

# Settings that only make a step cheaper, never what is trained: CAT-RS labels all 4,500 training images with its
# teacher before the first step (2 votes each instead of 10,000).
CHEAPER = {"catrs": ("method.teacher_num_samples=2",)}
# Methods that train on a table of `python -m rsbench.dual` (one entry per training image): a made-up one, 2 sigmas.
DUAL_TABLES = {"router": "labels", "routed_expert": "routes"}


def dual_table(method: str, folder: Path) -> tuple[str, ...]:
    """Write ``method``'s table (4,500 embedded training images, choices 0/1 of sigmas 0.25, 0.5); its overrides."""
    key = DUAL_TABLES[method]
    path = folder / f"{key}.pt"
    choices = torch.arange(4500) % 2
    table = {key: choices, "sigmas": [0.25, 0.5]}
    if method == "router":  # the labels stage's table: each expert's radius, the chosen one 0.5
        table.update(version=2, radii=torch.nn.functional.one_hot(choices, 2).double() * 0.5)
    torch.save(table, path)
    if method == "router":
        return (f"method.labels_file={path}", "arch.num_classes=2")
    return (f"method.routes_file={path}", "method.expert=0")


@pytest.mark.parametrize("method", sorted(p.stem for p in (CONF_DIR / "method").glob("*.yaml")))
def test_every_method_takes_a_training_step(method: str, smoke_checkpoint: Path, tmp_path: Path) -> None:
    """Each ``conf/method`` option gets what it needs and takes one step on real digits: a new YAML is covered here.

    What a method declares it needs before it can train (:meth:`SmoothingModule.prerequisites`) and every checkpoint
    its config leaves mandatory (``???``, the denoiser's classifier) is the smoke run's model: a sigma 0.25 Gaussian
    LeNet, CAT-RS's teacher recipe. It is copied into ``tmp_path`` so that what a method writes beside it stays there.
    """
    cheaper = ("dataset.batch_size=32", *CHEAPER.get(method, ()))  # one step of 32 images (in m chunks if chunked)
    cheaper += dual_table(method, tmp_path) if method in DUAL_TABLES else ()
    cfg = compose_config("experiment=smoke", f"method={method}", *cheaper, output_dir=tmp_path)
    given_checkpoint = str(shutil.copy(smoke_checkpoint, tmp_path / "given.ckpt"))
    needed = [p.argument for p in declared(cfg) if not cfg.method.get(p.argument)]
    mandatory = [str(key) for key in cfg.method if OmegaConf.is_missing(cfg.method, str(key))]
    assert all(key.endswith("_ckpt") for key in mandatory), mandatory  # a mandatory value this test cannot give
    given = dict.fromkeys([*needed, *mandatory], given_checkpoint)
    torch.manual_seed(0)
    module = instantiate(cfg.method, net=instantiate(cfg.arch), optimizer=instantiate(cfg.optimizer), **given)
    assert isinstance(module, SmoothingModule)
    before = {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}
    trainer = quiet_trainer(tmp_path, max_epochs=1, limit_train_batches=1, limit_val_batches=0)
    trainer.fit(module, datamodule=instantiate(cfg.dataset))
    assert trainer.fit_loop.epoch_loop.batch_progress.total.completed == 1  # one loader batch (m steps if chunked)
    assert math.isfinite(float(trainer.callback_metrics["train/loss_step"]))
    after = dict(module.named_parameters())
    assert any(not torch.equal(before[name], after[name]) for name in before)  # the step changed the weights
