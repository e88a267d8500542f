"""ResNet-(6n+2) for 32x32 inputs (He et al. 2016, Section 4.2), the CIFAR-10 backbone of every paper rsbench follows.

Widths 16/32/64, a 3x3 stem, BasicBlocks, a 1x1-conv + BatchNorm shortcut where the shape changes, 8x8 average
pooling and He-normal conv init. Module names follow the bearpaw/pytorch-classification model that Cohen et al.,
SmoothAdv, MACER and the Jeong lineage share, so their ``state_dict`` keys map onto this one.
"""

from __future__ import annotations

import math

from torch import Tensor, nn


class BasicBlock(nn.Module):
    """Two 3x3 conv-BN layers with an identity (or projected) shortcut."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""
        shortcut = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + shortcut)


class CifarResNet(nn.Module):
    """ResNet of depth 6n+2 for 32x32 images: 20 (n=3), 56 (n=9), 110 (n=18)."""

    def __init__(self, depth: int = 110, num_classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        if depth < 8 or (depth - 2) % 6 != 0:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2 (20, 32, 44, 56, 110, ...), got {depth}")
        blocks = (depth - 2) // 6
        self.in_planes = 16
        self.conv1 = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(16, blocks, stride=1)
        self.layer2 = self._make_layer(32, blocks, stride=2)
        self.layer3 = self._make_layer(64, blocks, stride=2)
        self.avgpool = nn.AvgPool2d(8)
        self.fc = nn.Linear(64, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
                nn.init.normal_(module.weight, 0.0, math.sqrt(2.0 / fan_out))
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.in_planes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )
        layers = [BasicBlock(self.in_planes, planes, stride, downsample)]
        self.in_planes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """Logits ``[B, num_classes]`` for a batch ``[B, C, 32, 32]``."""
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(self.avgpool(x).flatten(1))
