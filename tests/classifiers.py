"""Known-answer base classifiers: what their smoothed classifiers do is known exactly, so certificates can be graded.

Test modules import them from here; each test module builds its own problems (margins, images) around them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from rsbench.certify.pipeline.certification import Subject


class Recorder(nn.Module):
    """Wraps a base classifier and keeps a copy of every batch it is asked about (``Smooth`` reuses its buffer)."""

    def __init__(self, model: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.batches: list[torch.Tensor] = []

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        self.batches.append(z.detach().clone())
        return self.model(z)

    @property
    def inputs(self) -> torch.Tensor:
        """Every row asked about, in order."""
        return torch.cat(self.batches)

    @property
    def sizes(self) -> list[int]:
        """The size of each batch, in order."""
        return [b.shape[0] for b in self.batches]


class Linear(nn.Module):
    """f(z) = [w.z + b > 0] as two logits (-h, h) with h = w.z + b: class 1 on the positive side of the hyperplane."""

    w: torch.Tensor  # a buffer: the normal, flattened

    def __init__(self, w: torch.Tensor, b: float) -> None:
        super().__init__()
        self.register_buffer("w", w.flatten().float())
        self.b = b

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = z.flatten(1) @ self.w + self.b
        return torch.stack([-h, h], dim=1)


class Coordinate(nn.Module):
    """f(z) = [z_0 + b > 0] as logits (-h, h), h = z_0 + b."""

    def __init__(self, b: float) -> None:
        super().__init__()
        self.b = b

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = z.flatten(1)[:, 0] + self.b
        return torch.stack([-h, h], dim=1)


class Brightness(nn.Module):
    """Votes by the image's mean brightness: class round(3 * mean), of 4 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))  # something to fingerprint

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        target = (z.flatten(1).mean(dim=1) * 3 * self.scale).round().clamp(0, 3).long()
        return nn.functional.one_hot(target, 4).float()


# 12 flat 1x4x4 images of brightness 0.05 to 0.95, each labelled with the class Brightness votes for it.
IMAGES: list[tuple[torch.Tensor, int]] = [
    (torch.full((1, 4, 4), v), round(3 * v)) for v in torch.linspace(0.05, 0.95, 12).tolist()
]
# Brightness as the certification pipeline's subject: 4 classes at sigma 0.25.
SUBJECT = Subject(Brightness(), 4, 0.25, {"method": "test", "dataset": "brightness", "arch": "brightness"})
