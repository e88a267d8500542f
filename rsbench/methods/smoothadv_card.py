"""The card of SmoothAdv (:mod:`rsbench.methods.smoothadv`): Salman et al.'s code and releases.

Their code builds a NormalizeLayer, but their README says which layer each released model was trained with:
``imagenet32/``, ``cifar10/finetune_cifar_from_imagenetPGD2steps/`` and ``cifar10/self_training/`` used
NormalizeLayer; ``imagenet/`` and every other ``cifar10/`` folder InputCenterLayer (x - mean). The importer reads
that folder from the file's path inside the released ``pretrained_models/`` tree (:func:`released_input_layer`);
elsewhere the layer must be stated.
"""

from pathlib import PurePath

from rsbench.methods.card import SEQUENTIAL_FILE, CheckpointLayout, InputLayerKind, MethodCard, same_for

NORMALIZE_FOLDERS = {
    ("imagenet32",),
    ("cifar10", "finetune_cifar_from_imagenetPGD2steps"),
    ("cifar10", "self_training"),
}
"""The released folders whose models used NormalizeLayer (SmoothAdv's README); the rest used InputCenterLayer."""
RELEASE_ROOT = "pretrained_models"


def released_input_layer(path: PurePath) -> InputLayerKind | None:
    """The input layer of a released SmoothAdv model, from its folder under ``pretrained_models/``.

    >>> released_input_layer(PurePath("pretrained_models/cifar10/PGD_2steps/eps_64/cifar10/resnet110/noise_0.12/c.pt"))
    'center'
    >>> released_input_layer(PurePath("x/pretrained_models/cifar10/self_training/a/checkpoint.pth.tar"))
    'normalize'
    >>> released_input_layer(PurePath("my_runs/cifar10/checkpoint.pth.tar")) is None
    True
    """
    parts = path.parts
    if RELEASE_ROOT not in parts[:-1]:
        return None
    inside = parts[parts.index(RELEASE_ROOT) + 1 : -1]
    if not inside or inside[0] not in ("cifar10", "imagenet", "imagenet32"):
        return None
    if (inside[0],) in NORMALIZE_FOLDERS or tuple(inside[:2]) in NORMALIZE_FOLDERS:
        return "normalize"
    return "center"


CARD = MethodCard(
    name="smoothadv",
    target="rsbench.methods.smoothadv.SmoothAdv",
    paper="Salman, Yang, Li, Zhang, Zhang, Razenshteyn and Bubeck, NeurIPS 2019",
    title="SmoothAdv",
    citation="Salman et al., NeurIPS 2019",
    methods_table=5,
    repository="Hadisalman/smoothing-adversarial",
    origin="smoothadv",
    # Cohen's file (Sequential(layer, net)); normalize or center, by folder (above).
    checkpoint_layout=CheckpointLayout(
        repository="Hadisalman/smoothing-adversarial",
        file_keys=SEQUENTIAL_FILE,
        weights_key="state_dict",
        arch_key="arch",
        prefixes=("1.module.", "1."),
        input_layers=same_for(("cifar10", "imagenet"), ("normalize", "center")),
        input_layer_by_path=released_input_layer,
    ),
    log_folders=("salman",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/salman/
    # certify.sigma_mode=data_dependent on a SmoothAdv model: the DDRS authors' DS-SmoothAdv script ascends relu(R)
    # (CIFAR10/train_smooth_adv.py), where certify.sigma_objective is left null.
    certify_defaults={"sigma_objective": "relu_radius"},
    ddrs_base=True,
)
