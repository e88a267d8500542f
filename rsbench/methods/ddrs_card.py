"""The card of data-dependent smoothing training, DS^2 (:mod:`rsbench.methods.ddrs`): Alfarra et al.'s code.

Before ``sigma_search_from_epoch`` the search takes K = 0 steps: every example keeps sigma_0 and the run trains its
base method at a fixed sigma, so a checkpoint is DDRS from that epoch on (or from the base method's own first epoch,
when that is later: MACER deferred).
"""

from collections.abc import Mapping
from typing import Any

from rsbench.methods.card import CheckpointLayout, MethodCard, MethodEpoch, method_card


def search_epoch(method: Mapping[str, Any]) -> Any:
    """The later of ``sigma_search_from_epoch`` (default 0) and the base method's first epoch under its DDRS recipe."""
    base = str(method.get("base", "gaussian"))
    recipe = (method.get("base_recipes") or {}).get(base) or {}
    arguments = {**dict(recipe), **dict(method.get("base_args") or {})}
    own = method.get("sigma_search_from_epoch", 0)
    base_epoch = method_card(base).first_method_epoch(arguments)
    return max(own, base_epoch) if isinstance(own, int) and not isinstance(own, bool) else own


CARD = MethodCard(
    name="ddrs",
    target="rsbench.methods.ddrs.data_dependent",
    paper="Alfarra, Bibi, Torr and Ghanem, UAI 2022",
    title="DDRS",
    repository="MotasemAlfarra/Data_Dependent_Randomized_Smoothing",
    origin="ddrs",
    # {epoch, state_dict, optimizer_param}; CIFAR-10 keys bare, normalisation inside forward and a softmax at the end
    # (rsbench's ddrs_resnet18: torchvision's ResNet-18 without the stem's BatchNorm); ImageNet's imagenet_wrapper
    # keys model.module.*, normalize or center (--center-only).
    checkpoint_layout=CheckpointLayout(
        repository="MotasemAlfarra/Data_Dependent_Randomized_Smoothing",
        file_keys=frozenset({"epoch", "state_dict", "optimizer_param"}),
        weights_key="state_dict",
        arch_key=None,
        prefixes=("model.module.", ""),
        input_layers={"cifar10": ("normalize",), "imagenet": ("normalize", "center")},
        default_archs={"cifar10": "ddrs_resnet18", "imagenet": "resnet50"},
        notes=("the authors' network ends in a softmax; rsbench's returns the logits before it (same top class)",),
    ),
    # The DDRS paper's per-input sigma search, for training and for certify.sigma_mode=data_dependent wherever
    # certify.sigma_samples / certify.sigma_objective are left null: n = 1 and the radius itself (Sec. 4 "unless
    # stated otherwise"), unless the base method's card says otherwise (conf/method/ddrs.yaml merges the two).
    certify_defaults={"sigma_samples": 1, "sigma_objective": "radius"},
    checkpoint_arguments=("init_ckpt",),  # a trained model to fine-tune (the paper's SmoothAdv-DS^2)
    method_epoch=MethodEpoch(
        search_epoch,
        keys=("sigma_search_from_epoch", "base", "base_args"),
        before="the base method at a fixed sigma_0 (K = 0 search steps)",
    ),
)
