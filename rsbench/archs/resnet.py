"""ImageNet-style ResNets from torchvision: ResNet-50 (Cohen et al.'s ImageNet model) and a 32x32 ResNet-18."""

from __future__ import annotations

from torch import nn
from torchvision.models import resnet18, resnet50


def imagenet_resnet50(num_classes: int = 1000) -> nn.Module:
    """Torchvision's ResNet-50 (randomly initialised), as used by Cohen et al. and every later ImageNet table."""
    return resnet50(weights=None, num_classes=num_classes)


def cifar_resnet18(num_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """ResNet-18 adapted to 32x32 inputs (3x3 stem, stride 1, no max-pool), the DDRS paper's CIFAR-10 backbone."""
    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
