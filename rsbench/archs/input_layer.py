"""The first layer of every rsbench model: maps [0,1] pixels to what the network was trained on.

Noise is added before this layer, so sigma and certified radii are in [0,1] pixel units (Cohen et al. 2019). Three
kinds exist in the field's checkpoints: ``normalize`` ((x - mean) / std, Cohen and the Jeong lineage),
``center`` (x - mean, most released SmoothAdv models) and ``identity`` (MACER, MNIST models). Loading weights
behind the wrong kind gives no error and a silently worse model, so the kind and its constants are part of the
model's signature, saved with every checkpoint and checked on load.

Pretrained classifiers (timm, Hugging Face, CLIP) take another resolution and three channels: the input layer can
also resize the image (``resize``, with its ``interpolation`` stated) and repeat a grey channel (``channels``) before
normalizing, as the frontier's code does for 32 x 32 CIFAR-10 at 224 or 384 (Carlini et al. 2023). Both happen after
the noise, inside the smoothed model, so the certificate stays in the dataset's own pixel space: the base classifier
is ``net(normalize(repeat(resize(x + delta))))`` and a radius is a distance between dataset images, whatever the
network's own resolution. Both keys are in the signature only when set, so older checkpoints' signatures still match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

InputLayerKind = Literal["normalize", "center", "identity"]
INPUT_LAYER_KINDS: tuple[str, ...] = ("normalize", "center", "identity")
INTERPOLATIONS: tuple[str, ...] = ("bilinear", "bicubic", "nearest", "area")
"""``torch.nn.functional.interpolate`` modes a resize may use (``align_corners=False``; ``antialias`` optional)."""


class InputLayer(nn.Module):
    """``normalize``: (x - mean) / std; ``center``: x - mean; ``identity``: x; per channel.

    Before that, optionally: ``resize`` to ``[H, W]`` with ``interpolation`` (``torch.nn.functional.interpolate``,
    ``align_corners=False``, ``antialias`` as stated), then ``channels``: a one-channel image repeated to that many.

    The constants are non-persistent buffers: they follow the module across devices but stay out of
    ``state_dict``, so state-dict keys match Cohen's ``Sequential(NormalizeLayer, net)`` layout (``1.*``). They are
    recorded instead in :meth:`spec`, which the training module saves and checks.
    """

    mean: Tensor
    std: Tensor

    def __init__(
        self,
        kind: InputLayerKind = "identity",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        resize: int | Sequence[int] | None = None,
        interpolation: str = "bilinear",
        antialias: bool = False,
        channels: int | None = None,
    ) -> None:
        super().__init__()
        if kind not in INPUT_LAYER_KINDS:
            raise ValueError(f"input layer kind must be one of {list(INPUT_LAYER_KINDS)}, got {kind!r}")
        if kind in ("normalize", "center") and mean is None:
            raise ValueError(f"input layer kind {kind!r} needs per-channel `mean` constants")
        if kind == "normalize" and std is None:
            raise ValueError("input layer kind 'normalize' needs per-channel `std` constants")
        if std is not None and any(s <= 0 for s in std):
            raise ValueError(f"input layer std must be > 0 per channel, got {list(std)}")
        if interpolation not in INTERPOLATIONS:
            raise ValueError(f"input layer interpolation must be one of {list(INTERPOLATIONS)}, got {interpolation!r}")
        self.resize = _size(resize)
        self.interpolation = interpolation
        self.antialias = bool(antialias) and interpolation in ("bilinear", "bicubic")
        if channels is not None and (isinstance(channels, bool) or not isinstance(channels, int) or channels < 1):
            raise ValueError(f"input layer channels must be an integer >= 1, got {channels!r}")
        self.channels = channels
        self.kind: InputLayerKind = kind
        mean_values = [float(m) for m in mean] if mean is not None and kind != "identity" else []
        std_values = [float(s) for s in std] if std is not None and kind == "normalize" else []
        self.register_buffer("mean", torch.tensor(mean_values).view(-1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std_values).view(-1, 1, 1), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """Map a batch ``[B, C, H, W]`` in [0,1] pixel space to the network's input space."""
        if self.resize is not None and tuple(x.shape[-2:]) != self.resize:
            x = F.interpolate(
                x,
                size=self.resize,
                mode=self.interpolation,
                align_corners=None if self.interpolation in ("nearest", "area") else False,
                antialias=self.antialias,
            )
        if self.channels is not None and x.shape[1] != self.channels:
            if x.shape[1] != 1:
                raise ValueError(f"the input layer repeats one channel to {self.channels}, got {x.shape[1]} channels")
            x = x.expand(-1, self.channels, -1, -1)
        if self.kind == "identity":
            return x
        if self.kind == "center":
            return x - self.mean
        return (x - self.mean) / self.std

    def spec(self) -> dict[str, Any]:
        """The kind and constants, as saved in checkpoints and compared on load.

        ``resize`` (with ``interpolation`` and ``antialias``) and ``channels`` appear only when set, so the spec of a
        plain input layer is the one every earlier checkpoint holds.
        """
        spec: dict[str, Any] = {
            "kind": self.kind,
            "mean": [round(v, 8) for v in self.mean.flatten().tolist()],
            "std": [round(v, 8) for v in self.std.flatten().tolist()],
        }
        if self.resize is not None:
            spec.update(resize=list(self.resize), interpolation=self.interpolation, antialias=self.antialias)
        if self.channels is not None:
            spec["channels"] = self.channels
        return spec

    def extra_repr(self) -> str:
        """Show the kind and constants in ``print(model)``."""
        spec = self.spec()
        shown = f"kind={spec['kind']}, mean={spec['mean']}, std={spec['std']}"
        if self.resize is not None:
            shown = f"resize={list(self.resize)} ({self.interpolation}, antialias={self.antialias}), {shown}"
        if self.channels is not None:
            shown = f"channels={self.channels}, {shown}"
        return shown


def _size(resize: int | Sequence[int] | None) -> tuple[int, int] | None:
    """``resize`` as ``(H, W)``: an int is a square; ``None`` is no resize."""
    if resize is None:
        return None
    values = [resize] if isinstance(resize, int) else list(resize)
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"input layer resize must be a size >= 1 or [height, width], got {resize!r}")
    return int(values[0]), int(values[1])
