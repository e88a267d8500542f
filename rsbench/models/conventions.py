"""The input conventions of the frontier's codebases, checked before anything is certified (``model.convention``).

Each of these codebases feeds its networks something other than [0,1] pixels, and a model taken from one of them and
certified under another convention gives a wrong certificate without any error:

- ``dds``: diffusion denoised smoothing (Carlini, Tramèr et al., ICLR 2023). The diffusion model works in [-1, 1],
  so noise of sigma in [0,1] pixels is noise of ``2 sigma`` there, and the timestep t* is the first with
  ``sqrt((1 - abar_t) / abar_t) >= 2 sigma`` (:func:`rsbench.archs.diffusion.diffusion_timestep`). Their tables
  certify sigma in {0.25, 0.5, 1.0} (pixel units); the classifier behind the denoiser takes [0,1] images.
- ``rrcm``: robust representation consistency models (Lei et al. 2025) normalize with ``mean = std = 0.5`` on every
  channel, i.e. the network takes ``2x - 1`` in [-1, 1]; their sigma is in [0,1] pixels as everywhere else, so noise
  of sigma becomes ``2 sigma`` at the network.
- ``multiscale``: multi-scale diffusion denoised smoothing (Jeong and Shin, NeurIPS 2023) cascades the levels
  sigma in {0.25, 0.5, 1.0} (pixel units; each one mapped to its diffusion step through ``2 sigma``), with CLIP's
  own normalization for its classifier.

:func:`check_convention` refuses a model whose input layer or sigma breaks the chosen convention, naming the number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rsbench.errors import ConfigError

TOLERANCE = 1e-6


@dataclass(frozen=True)
class Convention:
    """What one codebase feeds its networks.

    Attributes:
        paper: whose convention it is.
        mean: the per-channel mean every channel must have (``None``: not fixed by the convention).
        std: the per-channel std every channel must have.
        sigmas: the noise levels (in [0,1] pixel units) the codebase certifies at (``None``: any).
        model_range_factor: how much larger the noise is in the network's input range than in pixels (2 for
            [-1, 1] inputs): a sigma quoted in that range is this factor times the pixel sigma.
    """

    paper: str
    mean: float | None = None
    std: float | None = None
    sigmas: tuple[float, ...] | None = None
    model_range_factor: float = 1.0


CONVENTIONS: dict[str, Convention] = {
    "dds": Convention(
        "Carlini et al. 2023 (diffusion denoised smoothing)", sigmas=(0.25, 0.5, 1.0), model_range_factor=2
    ),
    "rrcm": Convention("Lei et al. 2025 (rRCM)", mean=0.5, std=0.5, model_range_factor=2),
    "multiscale": Convention("Jeong and Shin 2023 (multi-scale denoised smoothing)", sigmas=(0.25, 0.5, 1.0)),
}


def check_convention(name: str | None, input_layer: Mapping[str, Any], sigma: float) -> None:
    """Refuse an input layer or sigma that breaks the convention ``name`` (``None``: no convention to check).

    Args:
        name: one of :data:`CONVENTIONS`, or ``None``.
        input_layer: the input layer's spec (``kind``, ``mean``, ``std``).
        sigma: the noise level in [0,1] pixel units.

    Raises:
        ConfigError: an unknown convention, or the value that breaks it (named, with the convention's own).
    """
    if name is None:
        return
    if name not in CONVENTIONS:
        raise ConfigError(f"model.convention={name!r} is not one of {sorted(CONVENTIONS)}")
    convention = CONVENTIONS[name]
    for key, want in (("mean", convention.mean), ("std", convention.std)):
        if want is None:
            continue
        have = [float(v) for v in input_layer.get(key) or []]
        if input_layer.get("kind") != "normalize" or not have or any(abs(v - want) > TOLERANCE for v in have):
            shown = have or f"none (input layer kind {input_layer.get('kind')})"
            raise ConfigError(
                f"model.convention={name} ({convention.paper}) normalizes with {key}={want} on every channel "
                f"(inputs in [-1, 1]), but the input layer's {key} is {shown}: set "
                f"model.input_layer.{key}=[{want},{want},{want}]"
            )
    if convention.sigmas is not None and not any(abs(sigma - s) <= TOLERANCE for s in convention.sigmas):
        hint = ""
        if any(abs(sigma - s * 2) <= TOLERANCE for s in convention.sigmas):
            hint = f" (sigma={sigma:g} looks like a level in the model's [-1, 1] range: in pixels it is {sigma / 2:g})"
        raise ConfigError(
            f"model.sigma={sigma:g} is not a noise level of model.convention={name} ({convention.paper}): it "
            f"certifies sigma in {list(convention.sigmas)} in [0,1] pixel units{hint}"
        )


def pixel_sigma(sigma: float, convention: str) -> float:
    """A sigma quoted in a convention's model input range, in [0,1] pixel units (``2 sigma`` in [-1, 1] -> sigma).

    Raises:
        ConfigError: an unknown convention.
    """
    if convention not in CONVENTIONS:
        raise ConfigError(f"convention={convention!r} is not one of {sorted(CONVENTIONS)}")
    return sigma / CONVENTIONS[convention].model_range_factor
