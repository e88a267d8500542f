"""Known-answer base classifiers: what their smoothed classifiers do is known exactly, so certificates can be graded.

Test modules import them from here; each test module builds its own problems (margins, images) around them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from rsbench.archs.denoiser import DenoisedClassifier, DnCNN
from rsbench.archs.registry import build_classifier
from rsbench.certify.pipeline.certification import Subject
from rsbench.checkpoint import make_checkpoint, write_checkpoint


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


def denoiser_checkpoint(dncnn: DnCNN, path: Path, sigma: float) -> Path:
    """A ``method=denoiser`` checkpoint of ``dncnn`` in front of a LeNet (only its DnCNN is read for a router)."""
    classifier = build_classifier("lenet", 10, {"kind": "identity"}, 1)
    return write_checkpoint(make_checkpoint(DenoisedClassifier(dncnn, classifier), sigma, "denoiser"), path)


def constant_dncnn(value: float) -> DnCNN:
    """A depth-2 DnCNN with D(z) = z - (z - value) = value wherever z > value (noisy [0,1] pixels: always)."""
    dncnn = DnCNN(1, depth=2, width=1)
    first, last = dncnn.dncnn[0], dncnn.dncnn[2]
    assert isinstance(first, nn.Conv2d)
    assert isinstance(last, nn.Conv2d)
    with torch.no_grad():
        first.weight.zero_()
        first.weight[0, 0, 1, 1] = 1.0
        first.bias.fill_(-value)  # relu(z - value) = z - value
        last.weight.zero_()
        last.weight[0, 0, 1, 1] = 1.0
    return dncnn
