"""The first layer of every rsbench model: maps [0,1] pixels to what the network was trained on.

Noise is added before this layer, so sigma and certified radii are in [0,1] pixel units (Cohen et al. 2019). Three
kinds exist in the field's checkpoints: ``normalize`` ((x - mean) / std, Cohen and the Jeong lineage),
``center`` (x - mean, most released SmoothAdv models) and ``identity`` (MACER, MNIST models). Loading weights
behind the wrong kind gives no error and a silently worse model, so the kind and its constants are part of the
model's signature, saved with every checkpoint and checked on load.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import Tensor, nn

InputLayerKind = Literal["normalize", "center", "identity"]
INPUT_LAYER_KINDS: tuple[str, ...] = ("normalize", "center", "identity")


class InputLayer(nn.Module):
    """``normalize``: (x - mean) / std; ``center``: x - mean; ``identity``: x; per channel.

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
        self.kind: InputLayerKind = kind
        mean_values = [float(m) for m in mean] if mean is not None and kind != "identity" else []
        std_values = [float(s) for s in std] if std is not None and kind == "normalize" else []
        self.register_buffer("mean", torch.tensor(mean_values).view(-1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std_values).view(-1, 1, 1), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        """Map a batch ``[B, C, H, W]`` in [0,1] pixel space to the network's input space."""
        if self.kind == "identity":
            return x
        if self.kind == "center":
            return x - self.mean
        return (x - self.mean) / self.std

    def spec(self) -> dict[str, Any]:
        """The kind and constants, as saved in checkpoints and compared on load."""
        return {
            "kind": self.kind,
            "mean": [round(v, 8) for v in self.mean.flatten().tolist()],
            "std": [round(v, 8) for v in self.std.flatten().tolist()],
        }

    def extra_repr(self) -> str:
        """Show the kind and constants in ``print(model)``."""
        spec = self.spec()
        return f"kind={spec['kind']}, mean={spec['mean']}, std={spec['std']}"
