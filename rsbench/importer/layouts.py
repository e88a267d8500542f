"""How each released codebase saves its checkpoints, as read in the authors' code.

- ``cohen`` (locuslab/smoothing): ``torch.save({epoch, arch, state_dict, optimizer})`` of
  ``Sequential(NormalizeLayer, net)``: weight keys ``1.*`` (ResNet-50 in DataParallel: ``1.module.*``); normalize.
- ``smoothadv`` (Hadisalman/smoothing-adversarial): the same file; normalize or center, by folder (below).
- ``macer`` (RuntianZ/macer): ``{net, epoch}`` with the bare network's keys (``conv1.weight``); no input layer at all,
  the network takes raw [0,1] pixels (identity).
- ``consistency``, ``smoothmix``, ``catrs`` (jh-jeong/smoothing-consistency, jh-jeong/smoothmix,
  alinlab/smoothing-catrs): Cohen's file; normalize, but identity (``nn.Identity``) on MNIST and Fashion-MNIST.
- ``ddrs`` (MotasemAlfarra/Data_Dependent_Randomized_Smoothing): ``{epoch, state_dict, optimizer_param}``; CIFAR-10
  keys bare, normalisation inside ``forward`` and a softmax at the end; ImageNet ``imagenet_wrapper`` keys
  ``model.module.*``, normalize or center (``--center-only``).

Every normalisation layer of these codebases keeps its constants as plain attributes, not buffers, so they are
never in the file: the importer takes them from the dataset (rsbench's dataset constants are the authors':
CIFAR-10 mean (0.4914, 0.4822, 0.4465) and std (0.2023, 0.1994, 0.2010), CIFAR-100 (0.5071, 0.4867, 0.4408) and
(0.2675, 0.2565, 0.2761), ImageNet (0.485, 0.456, 0.406) and (0.229, 0.224, 0.225); a test pins them).

SmoothAdv's code builds a NormalizeLayer, but its README says which layer each released model was trained with:
``imagenet32/``, ``cifar10/finetune_cifar_from_imagenetPGD2steps/`` and ``cifar10/self_training/`` used
NormalizeLayer; ``imagenet/`` and every other ``cifar10/`` folder InputCenterLayer (x - mean). The importer reads
that folder from the file's path inside the released ``pretrained_models/`` tree; elsewhere the layer must be stated.

Module names: the networks of all five match rsbench's by name, so only prefixes differ. Cohen's, SmoothAdv's and
the Jeong lineage's CIFAR ResNets are bearpaw's ``ResNet`` (conv1, bn1, layer1-3 of BasicBlocks with conv1, bn1,
conv2, bn2, downsample.0/1, fc), MACER's ``ResNet_Cifar`` uses the same names (its ``AvgPool2d(8, stride=1)`` on an
8x8 map equals ``AvgPool2d(8)``), MACER's and the Jeong lineage's LeNet are conv1, conv2, fc1, fc2, ResNet-50 is
torchvision's, and DDRS's CIFAR-10 ResNet-18 is torchvision's without the stem's BatchNorm (rsbench's
``ddrs_resnet18``). ``num_batches_tracked`` buffers, absent from files saved before PyTorch 0.4.1, are the only keys
ever filled in (with 0; they do not change an eval-mode forward pass).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath

from rsbench.archs.input_layer import InputLayerKind

JEONG = "jeong"  # the layout shared by smoothing-consistency, smoothmix and smoothing-catrs

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
MNIST_LIKE = ("mnist", "mnist_embedded", "fashion_mnist")  # mnist_embedded: 5,000 of MNIST's images


@dataclass(frozen=True)
class Layout:
    """One codebase's checkpoint format.

    Attributes:
        repository: the authors' GitHub repository.
        file_keys: the top-level keys its ``torch.save`` writes.
        weights_key: the entry that holds the network's state dict.
        arch_key: the entry naming the architecture (``None``: the file does not name it).
        prefixes: the state-dict key prefixes of its containers, longest first (``1.module.``: the network sits at
            index 1 of ``Sequential(NormalizeLayer, DataParallel(net))``).
        input_layers: per dataset, the input layers its code builds (one: documented; several: it depends on the
            model, see :meth:`documented_input_layer`).
        default_archs: per dataset, its architecture when the file does not name one.
        input_layer_by_path: where the input layer depends on the model, the authors' rule that tells it from the
            file's place in their released tree (``None``: it must be stated).
    """

    repository: str
    file_keys: frozenset[str]
    weights_key: str
    arch_key: str | None
    prefixes: tuple[str, ...]
    input_layers: dict[str, tuple[InputLayerKind, ...]]
    default_archs: dict[str, str] = field(default_factory=dict)
    input_layer_by_path: Callable[[PurePath], InputLayerKind | None] | None = None

    def documented_input_layer(self, dataset: str, path: PurePath) -> InputLayerKind | None:
        """The input layer the authors document for this file, or ``None`` when it must be stated."""
        kinds = self.input_layers[dataset]
        if len(kinds) == 1:
            return kinds[0]
        return self.input_layer_by_path(path) if self.input_layer_by_path is not None else None


# SmoothAdv's README: which released folders used NormalizeLayer (the rest used InputCenterLayer).
SMOOTHADV_NORMALIZE_FOLDERS = {
    ("imagenet32",),
    ("cifar10", "finetune_cifar_from_imagenetPGD2steps"),
    ("cifar10", "self_training"),
}
SMOOTHADV_RELEASE_ROOT = "pretrained_models"


def smoothadv_input_layer(path: PurePath) -> InputLayerKind | None:
    """The input layer of a released SmoothAdv model, from its folder under ``pretrained_models/``.

    >>> smoothadv_input_layer(PurePath("pretrained_models/cifar10/PGD_2steps/eps_64/cifar10/resnet110/noise_0.12/c.pt"))
    'center'
    >>> smoothadv_input_layer(PurePath("x/pretrained_models/cifar10/self_training/a/checkpoint.pth.tar"))
    'normalize'
    >>> smoothadv_input_layer(PurePath("my_runs/cifar10/checkpoint.pth.tar")) is None
    True
    """
    parts = path.parts
    if SMOOTHADV_RELEASE_ROOT not in parts[:-1]:
        return None
    inside = parts[parts.index(SMOOTHADV_RELEASE_ROOT) + 1 : -1]
    if not inside or inside[0] not in ("cifar10", "imagenet", "imagenet32"):
        return None
    if (inside[0],) in SMOOTHADV_NORMALIZE_FOLDERS or tuple(inside[:2]) in SMOOTHADV_NORMALIZE_FOLDERS:
        return "normalize"
    return "center"


def _same_for(datasets: tuple[str, ...], kinds: tuple[InputLayerKind, ...]) -> dict[str, tuple[InputLayerKind, ...]]:
    return dict.fromkeys(datasets, kinds)


# torch.save of Sequential(normalize layer, net) with its epoch, architecture name and optimizer state.
_SEQUENTIAL_FILE = frozenset({"epoch", "arch", "state_dict", "optimizer"})
LAYOUTS: dict[str, Layout] = {
    "cohen": Layout(
        repository="locuslab/smoothing",
        file_keys=_SEQUENTIAL_FILE,
        weights_key="state_dict",
        arch_key="arch",
        prefixes=("1.module.", "1."),
        input_layers=_same_for(("cifar10", "imagenet"), ("normalize",)),
    ),
    "smoothadv": Layout(
        repository="Hadisalman/smoothing-adversarial",
        file_keys=_SEQUENTIAL_FILE,
        weights_key="state_dict",
        arch_key="arch",
        prefixes=("1.module.", "1."),
        input_layers=_same_for(("cifar10", "imagenet"), ("normalize", "center")),
        input_layer_by_path=smoothadv_input_layer,
    ),
    "macer": Layout(
        repository="RuntianZ/macer",
        file_keys=frozenset({"net", "epoch"}),
        weights_key="net",
        arch_key=None,
        prefixes=("",),
        input_layers=_same_for(("cifar10", "svhn", *MNIST_LIKE), ("identity",)),
        default_archs={"cifar10": "cifar_resnet110", "svhn": "cifar_resnet110", **dict.fromkeys(MNIST_LIKE, "lenet")},
    ),
    JEONG: Layout(
        repository="jh-jeong/smoothing-consistency, jh-jeong/smoothmix, alinlab/smoothing-catrs",
        file_keys=_SEQUENTIAL_FILE,
        weights_key="state_dict",
        arch_key="arch",
        prefixes=("1.module.", "1."),
        input_layers={
            **_same_for(("cifar10", "cifar100", "imagenet"), ("normalize",)),
            **_same_for(MNIST_LIKE, ("identity",)),
        },
    ),
    "ddrs": Layout(
        repository="MotasemAlfarra/Data_Dependent_Randomized_Smoothing",
        file_keys=frozenset({"epoch", "state_dict", "optimizer_param"}),
        weights_key="state_dict",
        arch_key=None,
        prefixes=("model.module.", ""),
        input_layers={"cifar10": ("normalize",), "imagenet": ("normalize", "center")},
        default_archs={"cifar10": "ddrs_resnet18", "imagenet": "resnet50"},
    ),
}

# origin (what the user names) -> (layout, the method its models were trained with)
ORIGINS: dict[str, tuple[str, str]] = {
    "cohen": ("cohen", "gaussian"),
    "smoothadv": ("smoothadv", "smoothadv"),
    "macer": ("macer", "macer"),
    "consistency": (JEONG, "consistency"),
    "smoothmix": (JEONG, "smoothmix"),
    "catrs": (JEONG, "catrs"),
    "ddrs": ("ddrs", "ddrs"),
}


def guess_origins(file_keys: set[str]) -> list[str]:
    """The origins whose checkpoints have exactly these top-level keys (to suggest one when the named one fails)."""
    return [origin for origin, (layout, _) in ORIGINS.items() if LAYOUTS[layout].file_keys == file_keys]
