"""DS^2 training: the per-example sigma memory, the search schedule, and the base methods it wraps."""

from __future__ import annotations

import functools

import pytest
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rsbench.archs import Classifier
from rsbench.methods.base import Batch
from rsbench.methods.ddrs import MEMORY_KEY, data_dependent
from tests.conftest import quiet_trainer

SGD = functools.partial(torch.optim.SGD, lr=0.05)


def small_net() -> Classifier:
    torch.manual_seed(0)
    return Classifier("tiny", nn.Sequential(nn.Flatten(), nn.Linear(16, 3)), {"kind": "identity"})


def build(base: str = "gaussian", **settings: object) -> pl.LightningModule:
    options = {"sigma_iters": 2, "sigma_lr": 0.05, "sigma_samples": 4, "sigma_search_from_epoch": 0}
    options.update(settings)
    return data_dependent(base, net=small_net(), sigma=0.5, optimizer=SGD, **options)


def fit(module: pl.LightningModule, epochs: int, tmp_path) -> pl.Trainer:
    data = TensorDataset(torch.rand(12, 1, 4, 4), torch.randint(0, 3, (12,)), torch.arange(12))
    trainer = quiet_trainer(tmp_path, max_epochs=epochs)
    trainer.fit(module, train_dataloaders=DataLoader(data, batch_size=6, shuffle=False))
    return trainer


class Spy:
    """Records the per-example sigma each training_loss call receives."""

    def __init__(self, module: pl.LightningModule) -> None:
        self.sigmas: list[torch.Tensor] = []
        original = module.training_loss

        def training_loss(batch: Batch):
            self.sigmas.append(batch.sigma.detach().clone())
            return original(batch)

        module.training_loss = training_loss


def test_each_example_keeps_its_own_sigma_across_epochs(tmp_path) -> None:
    module = build()
    spy = Spy(module)
    fit(module, 2, tmp_path)
    memory = module.sigma_memory
    assert memory.shape == (12,)
    assert not torch.allclose(memory, torch.full((12,), 0.5))  # the search moved them
    assert len(set(memory.tolist())) > 1  # per example, not one shared value
    first_epoch, second_epoch = spy.sigmas[:2], spy.sigmas[2:]
    # the loss of the last epoch used exactly the sigmas now in the memory (warm-started, then searched)
    assert torch.allclose(torch.cat(second_epoch), memory)
    assert not torch.allclose(torch.cat(first_epoch), torch.cat(second_epoch))


def test_no_search_before_the_configured_epoch(tmp_path) -> None:
    module = build(sigma_search_from_epoch=5)
    spy = Spy(module)
    fit(module, 1, tmp_path)
    assert module.iterations_at(4) == 0
    assert module.iterations_at(5) == 2
    assert all(torch.equal(s, torch.full((6,), 0.5)) for s in spy.sigmas)  # K = 0: sigma_0 everywhere


@pytest.mark.parametrize("base", ["gaussian", "smoothadv", "macer"])
def test_every_base_method_trains_with_per_example_sigma(base: str, tmp_path) -> None:
    base_args = {
        "gaussian": {},
        "smoothadv": {"epsilon": 0.25, "num_steps": 2, "num_noise": 1},
        "macer": {"num_noise": 4},
    }[base]
    module = build(base, base_args=base_args)
    assert module.method_name == f"ddrs_{base}"
    spy = Spy(module)
    fit(module, 1, tmp_path)
    assert all(s.shape == (6,) for s in spy.sigmas)


def test_memory_travels_with_checkpoints() -> None:
    module = build()
    module.sigma_memory = torch.linspace(0.1, 0.9, 12)
    checkpoint: dict = {}
    module.on_save_checkpoint(checkpoint)
    restored = build()
    restored.on_load_checkpoint(checkpoint)
    assert torch.equal(restored.sigma_memory, checkpoint[MEMORY_KEY])
    assert "sigma_memory" not in restored.state_dict()  # weights stay loadable into a fixed-sigma model


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sigma_iters": -1}, "sigma_iters"),
        ({"sigma_samples": 0}, "sigma_samples"),
        ({"sigma_init": 0.0}, "sigma_init"),
        ({"sigma_lr": -1.0}, "sigma_lr"),
    ],
)
def test_bad_settings_fail_fast(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build(**settings)


def test_unknown_base_lists_the_allowed_ones() -> None:
    with pytest.raises(ValueError, match=r"method\.base must be one of \['gaussian', 'macer', 'smoothadv'\]"):
        build("consistency")


@pytest.mark.parametrize("base", ["gaussian", "smoothadv", "macer"])
def test_config_builds_each_base(make_cfg, base: str) -> None:
    cfg = make_cfg("method=ddrs", f"method.base={base}", "sigma=0.5")
    module = instantiate(cfg.method, net=instantiate(cfg.arch), optimizer=instantiate(cfg.optimizer))
    assert module.method_name == f"ddrs_{base}"
    assert module.sigma_init == 0.5
    assert module.sigma_samples == (8 if base == "macer" else 1)
