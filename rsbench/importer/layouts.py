"""How each released codebase saves its checkpoints: read from the method cards, plus the architecture names.

Each method's card (:mod:`rsbench.methods.card`, ``rsbench/methods/<name>_card.py``) holds its authors' checkpoint
layout and the name the importer gives their code (``origin=``): ``cohen`` (Gaussian, locuslab/smoothing),
``smoothadv``, ``macer``, ``consistency``, ``smoothmix``, ``catrs`` (the last three share the Jeong lineage's layout)
and ``ddrs``. A method with released checkpoints in a new layout adds it to its own card; nothing here changes.

Every normalisation layer of these codebases keeps its constants as plain attributes, not buffers, so they are
never in the file: the importer takes them from the dataset (rsbench's dataset constants are the authors':
CIFAR-10 mean (0.4914, 0.4822, 0.4465) and std (0.2023, 0.1994, 0.2010), CIFAR-100 (0.5071, 0.4867, 0.4408) and
(0.2675, 0.2565, 0.2761), ImageNet (0.485, 0.456, 0.406) and (0.229, 0.224, 0.225); a test pins them).

SmoothAdv's released models differ in their input layer by folder (its card: :mod:`rsbench.methods.smoothadv_card`).

Module names: the networks of all five match rsbench's by name, so only prefixes differ. Cohen's, SmoothAdv's and
the Jeong lineage's CIFAR ResNets are bearpaw's ``ResNet`` (conv1, bn1, layer1-3 of BasicBlocks with conv1, bn1,
conv2, bn2, downsample.0/1, fc), MACER's ``ResNet_Cifar`` uses the same names (its ``AvgPool2d(8, stride=1)`` on an
8x8 map equals ``AvgPool2d(8)``), MACER's and the Jeong lineage's LeNet are conv1, conv2, fc1, fc2, ResNet-50 is
torchvision's, and DDRS's CIFAR-10 ResNet-18 is torchvision's without the stem's BatchNorm (rsbench's
``ddrs_resnet18``). ``num_batches_tracked`` buffers, absent from files saved before PyTorch 0.4.1, are the only keys
ever filled in (with 0; they do not change an eval-mode forward pass).
"""

from __future__ import annotations

from rsbench.methods.card import MNIST_LIKE, CheckpointLayout, card_of_origin, cards, origins

__all__ = [
    "AUTHOR_ARCHS",
    "MNIST_LIKE",
    "UNSUPPORTED_ARCHS",
    "Layout",
    "guess_origins",
    "layout_of",
    "origin_method",
    "origins",
]

Layout = CheckpointLayout  # (the importer's name for it)

# The authors' architecture names (the checkpoint's 'arch' entry) -> rsbench's architecture.
AUTHOR_ARCHS = {
    "cifar_resnet20": "cifar_resnet20",
    "cifar_resnet110": "cifar_resnet110",
    "cifar100_resnet110": "cifar_resnet110",
    "resnet50": "resnet50",
    "lenet": "lenet",
}
# The authors' names rsbench has no architecture (or no dataset) for, and why.
UNSUPPORTED_ARCHS = {
    "cifar_densenet40": "rsbench has no DenseNet-40",
    "imagenet32_resnet110": "rsbench has no ImageNet-32 dataset",
}


def layout_of(origin: str) -> CheckpointLayout | None:
    """The checkpoint layout of ``origin`` (its method card's), or ``None`` for an unknown origin."""
    card = card_of_origin(origin)
    return card.checkpoint_layout if card is not None else None


def origin_method(origin: str) -> str:
    """The method the models of ``origin`` were trained with (its card's name: ``cohen`` -> ``gaussian``).

    Raises:
        KeyError: ``origin`` is not an origin of any card.
    """
    card = card_of_origin(origin)
    if card is None:
        raise KeyError(origin)
    return card.name


def guess_origins(file_keys: set[str]) -> list[str]:
    """The origins whose checkpoints have exactly these top-level keys (to suggest one when the named one fails)."""
    return [
        card.origin
        for card in cards()
        if card.origin is not None
        and card.checkpoint_layout is not None
        and card.checkpoint_layout.file_keys == file_keys
    ]
