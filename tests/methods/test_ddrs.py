"""DS^2 training: the per-example sigma memory, the search schedule, and the base methods it wraps."""

from __future__ import annotations

import functools

import pytest
import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf.errors import InterpolationToMissingValueError
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from rsbench.archs import Classifier
from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.methods import ddrs
from rsbench.methods.base import Batch
from rsbench.methods.ddrs import MEMORY_KEY, data_dependent
from rsbench.methods.gaussian import GaussianAugmentation
from tests.helpers import quiet_trainer

SGD = functools.partial(torch.optim.SGD, lr=0.05)


def small_net() -> Classifier:
    torch.manual_seed(0)
    return Classifier("tiny", nn.Sequential(nn.Flatten(), nn.Linear(16, 3)), {"kind": "identity"})


BASE_ARGS = {"gaussian": {}, "smoothadv": {"epsilon": 0.25, "num_steps": 2, "num_noise": 1}, "macer": {"num_noise": 4}}


def build(base: str = "gaussian", **settings: object) -> pl.LightningModule:
    options = {"sigma_iters": 2, "sigma_lr": 0.05, "sigma_samples": 4, "sigma_search_from_epoch": 0}
    options["base_args"] = BASE_ARGS.get(base, {})
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
    module = build(base)
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


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")  # example_sigma called outside a Trainer
@pytest.mark.parametrize(
    ("base", "objective"), [("gaussian", "radius"), ("smoothadv", "relu_radius"), ("macer", "radius")]
)
def test_search_objective_is_the_authors_for_each_base(make_cfg, base: str, objective: str, monkeypatch) -> None:
    cfg = make_cfg("method=ddrs", f"method.base={base}", "sigma=0.5")
    assert cfg.method.sigma_objective == objective  # conf/method/ddrs.yaml: the authors' per base
    module = build(base, sigma_objective=cfg.method.sigma_objective)
    assert module.sigma_objective == objective
    assert build(base, sigma_objective="radius").sigma_objective == "radius"
    seen: list[str] = []

    def spy(*args, **kwargs):
        seen.append(kwargs["objective"])
        return torch.full((len(args[1]),), 0.5)

    monkeypatch.setattr(ddrs, "optimize_sigma", spy)
    module.example_sigma(torch.rand(3, 1, 4, 4), torch.zeros(3, dtype=torch.long), torch.arange(3))
    assert seen == [objective]  # the training search runs with it
    with pytest.raises(ValueError, match=r"method\.sigma_objective must be one of"):
        build(base, sigma_objective="hinge")


def save_trained(path, sigma: float = 0.5) -> Classifier:
    """Write an rsbench checkpoint of a (differently initialised) network trained at ``sigma``; return its net."""
    net = small_net()
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.add_(1.0)
    trained = GaussianAugmentation(net, sigma, SGD)
    checkpoint = {"state_dict": trained.state_dict()}
    trained.on_save_checkpoint(checkpoint)
    torch.save(checkpoint, path)
    return net


def test_init_ckpt_starts_from_the_trained_weights(tmp_path) -> None:
    trained = save_trained(tmp_path / "trained.ckpt")
    module = build("smoothadv", init_ckpt=str(tmp_path / "trained.ckpt"))
    for name, value in trained.state_dict().items():
        assert torch.equal(module.net.state_dict()[name], value), name
    assert module.sigma_memory.numel() == 0  # a fresh memory: every example starts at sigma_0
    scratch = build("smoothadv")
    assert not torch.equal(scratch.net.state_dict()["1.1.weight"], trained.state_dict()["1.1.weight"])


def test_init_ckpt_refuses_another_sigma_or_network(tmp_path) -> None:
    save_trained(tmp_path / "s025.ckpt", sigma=0.25)
    with pytest.raises(CheckpointMismatchError, match=r"trained at sigma=0\.25, this run trains at sigma=0\.5"):
        build("smoothadv", init_ckpt=str(tmp_path / "s025.ckpt"))
    assert build("smoothadv", init_ckpt=str(tmp_path / "s025.ckpt"), allow_sigma_mismatch=True).sigma == 0.5
    with pytest.raises(ConfigError, match=r"method\.init_ckpt='.*missing\.ckpt' is not a file"):
        build("smoothadv", init_ckpt=str(tmp_path / "missing.ckpt"))
    wide = Classifier("tiny", nn.Sequential(nn.Flatten(), nn.Linear(16, 4)), {"kind": "identity"})
    GaussianAugmentation(wide, 0.5, SGD).on_save_checkpoint(checkpoint := {"state_dict": {}})
    torch.save(checkpoint, tmp_path / "wide.ckpt")
    with pytest.raises(CheckpointMismatchError, match=r"method\.init_ckpt="):
        build("smoothadv", init_ckpt=str(tmp_path / "wide.ckpt"))


def test_smoothadv_finetune_preset(make_cfg) -> None:
    cfg = make_cfg("experiment=ddrs_smoothadv_finetune_cifar10", "sigma=0.25", "init_ckpt=runs/s025/best.ckpt")
    assert (cfg.method.base, cfg.method.init_ckpt, cfg.method.sigma_search_from_epoch) == (
        "smoothadv",
        "runs/s025/best.ckpt",
        0,
    )
    assert cfg.method.base_recipes.smoothadv == {
        "epsilon": 0.25,
        "num_steps": 2,
        "num_noise": 1,
        "attack": "pgd",
        "warmup": 1,
    }
    assert (cfg.trainer.max_epochs, cfg.optimizer.lr, cfg.optimizer.weight_decay, cfg.dataset.batch_size) == (
        30,
        0.01,
        5e-4,
        128,
    )
    assert cfg.arch.arch == "cifar_resnet18"
    missing = make_cfg("experiment=ddrs_smoothadv_finetune_cifar10", "sigma=0.25")
    with pytest.raises(InterpolationToMissingValueError, match="Missing mandatory value: init_ckpt"):
        missing.method.init_ckpt  # noqa: B018
