"""Training with another noise: the noise config group, the methods that accept it, those that refuse it and why.

Gaussian augmentation, Stability and Consistency draw any noise through the noise mixin; the methods whose math is
Gaussian refuse another noise naming the reason; checkpoints remember a non-Gaussian training noise; runs made before
the noise group existed resume as Gaussian.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from scipy.stats import kstest, laplace

from rsbench.errors import CheckpointMismatchError, ConfigError
from rsbench.noise_distributions import GAUSSIAN, NOISES
from rsbench.runs.resume import check_resumable
from rsbench.runs.run import use_noise


def module(make_cfg, method: str, *overrides: str):
    from hydra.utils import instantiate

    cfg = make_cfg(f"method={method}", *overrides)
    net = instantiate(cfg.arch)
    built = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer))
    use_noise(cfg, built)
    return built


@pytest.mark.parametrize("method", ["gaussian", "stability", "consistency", "standard"])
def test_noise_agnostic_methods_train_with_laplace_noise(make_cfg, method: str) -> None:
    built = module(make_cfg, method, "noise=laplace")
    assert built.noise is NOISES["laplace"]
    noisy = built.add_noise(torch.full((500, 1, 28, 28), 0.5), generator=torch.Generator().manual_seed(0)) - 0.5
    assert kstest(noisy.flatten().numpy(), laplace(scale=0.25 / 2**0.5).cdf).pvalue >= 1e-3
    assert built.signature()["noise"] == "laplace"


@pytest.mark.parametrize(
    ("method", "extra", "reason"),
    [
        ("smoothadv", (), "l2 ball"),
        ("macer", (), "Gaussian radius"),
        ("smoothmix", (), "l2 geometry"),
        ("catrs", ("method.soft_label=self",), "re-standardises"),
        ("ddrs", (), "per-example sigma search"),
        (
            "consistency",
            ("method.adversarial=true", "method.epsilon=1.0", "method.num_noise=2", "method.lbd=1"),
            "SmoothAdv",
        ),
    ],
)
def test_gaussian_methods_refuse_another_noise_naming_why(make_cfg, method: str, extra: tuple, reason: str) -> None:
    with pytest.raises(ConfigError, match=rf"noise=uniform cannot train method=\S+: .*{reason}"):
        module(make_cfg, method, "noise=uniform", *extra)


def test_a_checkpoint_remembers_its_noise(make_cfg, tmp_path: Path) -> None:
    trained = module(make_cfg, "gaussian", "noise=laplace")
    checkpoint = {"rsbench": {**trained.signature(), "method": "gaussian"}}
    plain = module(make_cfg, "gaussian")
    assert plain.noise is GAUSSIAN
    assert "noise" not in plain.signature()  # Gaussian checkpoints are unchanged
    with pytest.raises(CheckpointMismatchError, match="trained with laplace noise, this run uses noise=gaussian"):
        plain.check_checkpoint(checkpoint)
    trained.check_checkpoint(checkpoint)


def test_a_run_from_before_the_noise_group_resumes(make_cfg, tmp_path: Path) -> None:
    """Its stored config has no noise group and no certify.noise/norm: they read as Gaussian and l2."""
    from omegaconf import OmegaConf, open_dict

    run_dir = tmp_path / "old"
    (run_dir / ".hydra").mkdir(parents=True)
    old = OmegaConf.create(OmegaConf.to_container(make_cfg(), resolve=False))  # plain: the schema forbids deleting
    with open_dict(old):
        del old["noise"]
        del old.certify["noise"]
        del old.certify["norm"]
    OmegaConf.save(old, run_dir / ".hydra" / "config.yaml", resolve=False)
    check_resumable(make_cfg(), run_dir, certified=True)
    with pytest.raises(Exception, match=r"noise\.name"):
        check_resumable(make_cfg("noise=laplace"), run_dir, certified=True)
