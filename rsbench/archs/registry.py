"""Architectures by name: ``build_classifier("cifar_resnet110", ...)`` is what every ``conf/arch`` option calls.

Naming the network (rather than nesting its constructor in the config) lets a recipe choose it as a value:
``recipe.arch`` is set by the dataset (``cifar10`` -> ``cifar_resnet110``) and by a method's recipe for that
dataset (``method=ddrs dataset=cifar10`` -> ``cifar_resnet18``), while ``arch=<name>`` on the command line still wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from rsbench.archs.cifar_resnet import CifarResNet
from rsbench.archs.classifier import Classifier
from rsbench.archs.lenet import LeNet
from rsbench.archs.resnet import cifar_resnet18, ddrs_resnet18, imagenet_resnet50

NetworkFactory = Callable[[int, int], nn.Module]
NETWORKS: dict[str, NetworkFactory] = {
    "lenet": lambda classes, channels: LeNet(classes, channels),
    "cifar_resnet20": lambda classes, channels: CifarResNet(20, classes, channels),
    "cifar_resnet110": lambda classes, channels: CifarResNet(110, classes, channels),
    "cifar_resnet18": lambda classes, channels: cifar_resnet18(classes, channels),
    "ddrs_resnet18": lambda classes, channels: ddrs_resnet18(classes, channels),
    "resnet50": lambda classes, channels: imagenet_resnet50(classes),
}


def build_classifier(
    arch: str,
    num_classes: int,
    input_layer: Mapping[str, Any] | None,
    in_channels: int = 3,
    network: Mapping[str, Any] | None = None,
    image_shape: Sequence[int | None] | None = None,
) -> Classifier:
    """``Sequential(InputLayer, net)`` for the architecture named ``arch``.

    Args:
        arch: one of :data:`NETWORKS` (lenet, cifar_resnet20, cifar_resnet110, cifar_resnet18, ddrs_resnet18, resnet50),
            or the name to record for a pretrained ``network``.
        num_classes: the number of logits.
        input_layer: the input layer's ``kind``, ``mean`` and ``std`` (the dataset's); for a pretrained ``network``,
            what is stated of it (checked against what the network declares, :mod:`rsbench.archs.pretrained`).
        in_channels: image channels.
        network: a timm or Hugging Face network's spec (``arch=timm``, ``arch=hf``, or a checkpoint's signature).
        image_shape: the dataset's ``[C, H, W]`` (a pretrained network checks its resolution against it).
    """
    if network is not None:
        from rsbench.archs.pretrained import build_pretrained  # timm / transformers load only when asked for

        shape = list(image_shape) if image_shape is not None else [in_channels, None, None]
        return build_pretrained(arch, network, num_classes, input_layer, shape)
    if input_layer is None:
        raise ValueError(f"arch={arch} needs its input layer (kind, mean, std)")
    if arch not in NETWORKS:
        raise ValueError(f"arch must be one of {sorted(NETWORKS)}, got {arch!r}")
    return Classifier(arch, NETWORKS[arch](num_classes, in_channels), input_layer)
