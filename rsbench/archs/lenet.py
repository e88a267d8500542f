"""LeNet for 28x28 inputs, as in MACER and the Jeong lineage (smoothing-consistency, SmoothMix, CAT-RS)."""

from __future__ import annotations

from torch import Tensor, nn


class LeNet(nn.Module):
    """conv(20, 5x5) - maxpool - conv(50, 5x5) - maxpool - fc 800->500 - fc 500->classes, ReLU, no BatchNorm.

    Layer names follow MACER's ``model.py`` so its checkpoints map onto this module.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 20, kernel_size=5)
        self.conv2 = nn.Conv2d(20, 50, kernel_size=5)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, num_classes)
        self.relu = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: Tensor) -> Tensor:
        """Logits ``[B, num_classes]`` for a batch ``[B, C, 28, 28]``."""
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        x = self.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)
