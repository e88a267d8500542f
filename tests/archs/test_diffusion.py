"""Diffusion denoised smoothing (Carlini et al. 2023): the sigma -> t* mapping, the one-shot equation, offline runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from rsbench.archs import build_classifier
from rsbench.archs.diffusion import DiffusionDenoiser, diffusion_timestep, load_diffusion
from rsbench.errors import ConfigError
from tests.helpers import certify, save_checkpoint

diffusers = pytest.importorskip("diffusers")


def closed_form_schedule(step: float, steps: int = 1000) -> Tensor:
    """``abar_t = 1 / (1 + (step t)^2)``, whose noise level ``sqrt((1 - abar_t) / abar_t)`` is exactly ``step * t``."""
    t = torch.arange(steps, dtype=torch.float64)
    return 1 / (1 + (step * t) ** 2)


# 2 sigma / 0.01 lands strictly between integers (24.6, 62.82, 0.26), never on the boundary of the ">=" rule.
@pytest.mark.parametrize(("sigma", "expected"), [(0.123, 25), (0.3141, 63), (0.0013, 1)])
def test_timestep_is_the_first_step_at_least_twice_sigma(sigma: float, expected: int) -> None:
    # level_t = 0.01 t, so the first t >= 1 with level_t >= 2 sigma is ceil(200 sigma), and never t = 0
    assert diffusion_timestep(closed_form_schedule(0.01), sigma) == expected


@pytest.mark.parametrize("sigma", [0.12, 0.25, 0.5, 1.0])
def test_timestep_on_ddpm_linear_schedule_matches_its_closed_form(sigma: float) -> None:
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=1000, beta_schedule="linear")
    t = diffusion_timestep(scheduler.alphas_cumprod, sigma)
    # abar_t = prod_{s <= t} (1 - beta_s), beta = linspace(1e-4, 0.02, 1000), in float64; the scheduler holds float32,
    # so the boundary is compared with a relative slack of 1e-5 (float32 cumprod error is ~1e-6 here).
    alpha_bar = np.cumprod(1 - np.linspace(1e-4, 0.02, 1000))
    level = np.sqrt((1 - alpha_bar) / alpha_bar)
    assert level[t] >= 2 * sigma * (1 - 1e-5)
    assert level[t - 1] < 2 * sigma * (1 + 1e-5) or t == 1


def test_a_sigma_beyond_the_schedule_is_named() -> None:
    with pytest.raises(ConfigError, match=r"sigma=6.0 needs a diffusion noise level 2\*sigma=12"):
        diffusion_timestep(closed_form_schedule(0.01), 6.0)


@dataclass
class Output:
    sample: Tensor


class ConstantPrediction(nn.Module):
    """A stand-in UNet predicting the constant ``value`` everywhere (recording the timesteps it is given)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value
        self.timesteps: list[int] = []

    def forward(self, x: Tensor, t: Tensor) -> Output:
        self.timesteps += t.tolist()
        return Output(torch.full_like(x, self.value))


def test_one_shot_denoising_equation() -> None:
    # sigma 0.123 -> t* = 25, abar = 1 / (1 + 0.25^2), level 0.25. With eps_theta = c:
    # x0_hat = (sqrt(abar)(2z - 1) - sqrt(1 - abar) c) / sqrt(abar) = 2z - 1 - 0.25 c, so (x0_hat + 1)/2 = z - c/8.
    unet = ConstantPrediction(0.4)
    denoiser = DiffusionDenoiser(unet, closed_form_schedule(0.01), 0.123, clip=False)
    z = torch.tensor([0.1, 0.5, 0.9, 1.3]).view(1, 1, 2, 2)
    assert torch.allclose(denoiser(z), z - 0.05, atol=1e-6)
    assert unet.timesteps == [25]
    clipped = DiffusionDenoiser(ConstantPrediction(-4.0), closed_form_schedule(0.01), 0.123)
    assert torch.allclose(clipped(z), torch.tensor([0.6, 1.0, 1.0, 1.0]).view(1, 1, 2, 2), atol=1e-6)
    record = denoiser.record()
    assert (record["timestep"], record["single_step"]) == (25, True)
    assert record["requested_noise_level"] == pytest.approx(0.246, abs=1e-12)
    assert record["achieved_noise_level"] == pytest.approx(0.25, abs=1e-9)


def save_tiny_ddpm(directory: Path) -> Path:
    """A random 28x28 one-channel UNet2DModel and a DDPM scheduler, saved as a DDPMPipeline directory."""
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(
        sample_size=28,
        in_channels=1,
        out_channels=1,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
    )
    unet.save_pretrained(directory / "unet")
    diffusers.DDPMScheduler(num_train_timesteps=1000).save_pretrained(directory / "scheduler")
    return directory


def test_certify_through_a_tiny_diffusion_model_offline(tmp_path: Path) -> None:
    ddpm = save_tiny_ddpm(tmp_path / "ddpm")
    lenet = build_classifier("lenet", 10, {"kind": "identity"}, 1)
    classifier = save_checkpoint(lenet, tmp_path / "lenet.ckpt")
    metrics = certify(
        tmp_path / "out",
        "model=diffusion",
        f"model.path={ddpm}",
        "model.sigma=0.25",
        f"model.classifier.path={classifier}",
    )
    denoiser = metrics["model"]["denoiser"]
    scheduler = diffusers.DDPMScheduler(num_train_timesteps=1000)
    assert denoiser["timestep"] == diffusion_timestep(scheduler.alphas_cumprod, 0.25)
    assert denoiser["achieved_noise_level"] >= denoiser["requested_noise_level"] == 0.5
    assert (denoiser["single_step"], denoiser["clip"], denoiser["path"]) == (True, True, str(ddpm))
    assert (metrics["arch"], metrics["sigma"]) == ("diffusion+lenet", 0.25)
    assert metrics["model"]["classifier"]["kind"] == "checkpoint"
    assert metrics["num_images"] == 8


def test_a_directory_without_a_diffusion_model_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a saved diffusers model"):
        load_diffusion(tmp_path, 0.25)
    with pytest.raises(ConfigError, match="does not exist"):
        load_diffusion(tmp_path / "missing", 0.25)
