"""ImageNet-style ResNets from torchvision: ResNet-50 (Cohen et al.'s ImageNet model) and two ResNet-18s for 32x32."""

from __future__ import annotations

from torch import nn
from torchvision.models import resnet18, resnet50


def imagenet_resnet50(num_classes: int = 1000) -> nn.Module:
    """Torchvision's ResNet-50 (randomly initialised), as used by Cohen et al. and every later ImageNet table."""
    return resnet50(weights=None, num_classes=num_classes)


def cifar_resnet18(num_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """ResNet-18 adapted to 32x32 inputs (3x3 stem, stride 1, no max-pool), the usual CIFAR-10 ResNet-18.

    The DDRS repository's CIFAR-10 ResNet-18 is another network: :func:`ddrs_resnet18`.
    """
    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def ddrs_resnet18(num_classes: int = 10, in_channels: int = 3) -> nn.Module:
    """The ResNet-18 of the DDRS repository's CIFAR-10 scripts (``CIFAR10/models/resnet.py``), to load its weights.

    It is torchvision's ImageNet ResNet-18 (7x7 stride-2 stem, 3x3 max-pool, so a 32x32 image reaches the last block
    at 1x1) with the stem's BatchNorm removed. The authors' network also normalises its input inside ``forward``
    (the CIFAR-10 mean and std) and ends in a softmax; in rsbench the normalisation is the input layer and the
    network returns logits, which have the same top class as the softmax, so certificates are unchanged.
    """
    model = resnet18(weights=None, num_classes=num_classes)
    if in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
    model.bn1 = nn.Identity()
    return model
