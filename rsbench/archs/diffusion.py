"""One-shot diffusion denoising: an off-the-shelf DDPM as the denoiser of denoised smoothing.

Carlini, Tramèr, Dvijotham, Rice, Sun and Kolter (ICLR 2023, "(Certified!!) Adversarial Robustness for Free!").

A DDPM's forward process at step t is ``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps`` with ``x_0`` in [-1, 1].
rsbench adds the smoothing noise in [0,1] pixel space, ``x + delta`` with ``delta ~ N(0, sigma^2 I)``, so in the
model's range ``2(x + delta) - 1 = x_0 + 2 delta``: the rescaling doubles sigma. The paper's Algorithm 1 scales that
input to step t*,

    x_t* = sqrt(abar_t*) (2(x + delta) - 1) = sqrt(abar_t*) x_0 + sqrt(abar_t*) 2 sigma eps,

which is the forward process at t* exactly when ``sqrt((1 - abar_t*) / abar_t*) = 2 sigma``. It then denoises in one
shot with the noise prediction ``eps_theta``,

    x0_hat = (x_t* - sqrt(1 - abar_t*) eps_theta(x_t*, t*)) / sqrt(abar_t*),

clipped to [-1, 1] (the authors' ``p_sample(..., clip_denoised=True)['pred_xstart']``) and mapped back to [0,1]
pixels, ``(x0_hat + 1) / 2``, before the classifier.

t* follows the authors' ``certify.py``: the first t >= 1 with ``sqrt((1 - abar_t) / abar_t) >= 2 sigma`` (not the
closest one). Their code then draws the diffusion's own noise inside the model (``q_sample`` at t*, a noise level
``>= sigma`` in pixel units) and certifies at sigma, which is conservative; rsbench uses the certifier's noise at
sigma itself, as the paper's equation does, so the certificate is exactly the one for sigma and the model sees a
noise level slightly below the one of t* (the achieved level is recorded beside the requested one).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rsbench.errors import ConfigError

PREDICTION_TYPES = ("epsilon", "sample", "v_prediction")


def diffusion_timestep(alphas_cumprod: Tensor, sigma: float) -> int:
    """t*: the first t >= 1 with ``sqrt((1 - abar_t) / abar_t) >= 2 sigma`` (the authors' ``certify.py`` loop).

    Args:
        alphas_cumprod: ``abar_t`` for t = 0 .. T-1 (decreasing).
        sigma: the smoothing noise level in [0,1] pixel units.

    Raises:
        ConfigError: no step of the schedule is that noisy.
    """
    levels = diffusion_noise_levels(alphas_cumprod)
    reached = torch.nonzero(levels[1:] >= 2 * sigma)
    if len(reached) == 0:
        raise ConfigError(
            f"sigma={sigma} needs a diffusion noise level 2*sigma={2 * sigma:g}, but the schedule's noisiest step "
            f"(t={len(levels) - 1}) has sqrt((1 - abar_t)/abar_t)={float(levels[-1]):.4g}: use a smaller sigma"
        )
    return int(reached[0, 0]) + 1


def diffusion_noise_levels(alphas_cumprod: Tensor) -> Tensor:
    """``sqrt((1 - abar_t) / abar_t)`` for every t, in float64: the noise level of step t in the [-1, 1] range."""
    alphas = alphas_cumprod.double()
    return torch.sqrt((1 - alphas) / alphas)


class DiffusionDenoiser(nn.Module):
    """One-shot denoiser ``z -> (clip(x0_hat(sqrt(abar) (2z - 1), t*)) + 1) / 2`` for images z in [0,1] pixel units.

    Args:
        unet: a ``diffusers`` ``UNet2DModel`` (``unet(x, t).sample`` is its prediction). When it predicts
            twice the image channels (a learned variance, as the authors' improved-diffusion models), the first
            half is the noise prediction.
        alphas_cumprod: the scheduler's ``abar_t``.
        sigma: the smoothing noise level in [0,1] pixel units; t* is chosen for it.
        prediction_type: what the model predicts: ``epsilon`` (the noise), ``sample`` (x_0) or ``v_prediction``.
        clip: clip x0_hat to [-1, 1] (the authors' ``clip_denoised=True``).
    """

    arch = "diffusion"

    def __init__(
        self,
        unet: nn.Module,
        alphas_cumprod: Tensor,
        sigma: float,
        prediction_type: str = "epsilon",
        clip: bool = True,
    ) -> None:
        super().__init__()
        if prediction_type not in PREDICTION_TYPES:
            raise ConfigError(f"prediction_type must be one of {list(PREDICTION_TYPES)}, got {prediction_type!r}")
        self.unet = unet
        self.unet.requires_grad_(False)
        self.timestep = diffusion_timestep(alphas_cumprod, sigma)
        self.alpha_bar = float(alphas_cumprod[self.timestep])
        self.sigma = float(sigma)
        self.prediction_type = prediction_type
        self.clip = clip

    def forward(self, z: Tensor) -> Tensor:
        """Denoise noisy images ``z`` ``[B, C, H, W]`` in [0,1] pixel units in one step; the result is in [0,1]."""
        scale, rest = math.sqrt(self.alpha_bar), math.sqrt(1 - self.alpha_bar)
        x_t = scale * (2 * z - 1)
        steps = torch.full((len(z),), self.timestep, device=z.device, dtype=torch.long)
        output = self.unet(x_t, steps).sample
        if output.shape[1] == 2 * z.shape[1]:
            output = output[:, : z.shape[1]]  # learned variance: the first half is the prediction
        if self.prediction_type == "epsilon":
            x0 = (x_t - rest * output) / scale
        elif self.prediction_type == "sample":
            x0 = output
        else:
            x0 = scale * x_t - rest * output
        if self.clip:
            x0 = x0.clamp(-1, 1)
        return (x0 + 1) / 2

    def record(self) -> dict[str, Any]:
        """What changes the certificate's meaning, for ``metrics.json["model"]["denoiser"]``."""
        return {
            "kind": "diffusion",
            "timestep": self.timestep,
            "alpha_bar": self.alpha_bar,
            "requested_noise_level": 2 * self.sigma,
            "achieved_noise_level": math.sqrt((1 - self.alpha_bar) / self.alpha_bar),
            "sigma": self.sigma,
            "single_step": True,
            "clip": self.clip,
            "prediction_type": self.prediction_type,
            "rescaling": "x_t = sqrt(alpha_bar) * (2 * (x + delta) - 1); x0_hat back to [0,1] as (x0_hat + 1) / 2",
        }


def load_diffusion(path: str | Path, sigma: float, clip: bool = True) -> DiffusionDenoiser:
    """A :class:`DiffusionDenoiser` from a local ``diffusers`` directory; nothing is downloaded.

    The directory is a saved ``DDPMPipeline`` (``unet/`` and ``scheduler/`` subfolders) or holds the
    ``UNet2DModel`` and the ``DDPMScheduler`` configs side by side.

    Raises:
        ConfigError: ``diffusers`` is missing, or the directory is not a saved diffusion model.
    """
    try:
        from diffusers import DDPMScheduler, UNet2DModel
    except ImportError:
        raise ConfigError("model=diffusion needs diffusers: pip install 'rsbench[diffusion]'") from None
    root = Path(path).expanduser()
    if not root.is_dir():
        raise ConfigError(f"diffusion model directory {root} does not exist")
    unet_dir = root / "unet" if (root / "unet").is_dir() else root
    scheduler_dir = root / "scheduler" if (root / "scheduler").is_dir() else root
    if not (unet_dir / "config.json").is_file() or not (scheduler_dir / "scheduler_config.json").is_file():
        raise ConfigError(
            f"{root} is not a saved diffusers model: it needs a UNet2DModel (config.json and weights, in unet/ or at "
            "the top) and a DDPMScheduler (scheduler_config.json, in scheduler/ or at the top)"
        )
    unet = UNet2DModel.from_pretrained(str(unet_dir), local_files_only=True)
    scheduler = DDPMScheduler.from_pretrained(str(scheduler_dir), local_files_only=True)
    return DiffusionDenoiser(unet.eval(), scheduler.alphas_cumprod, sigma, scheduler.config.prediction_type, clip)
