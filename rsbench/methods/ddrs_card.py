"""The card of data-dependent smoothing training, DS^2 (:mod:`rsbench.methods.ddrs`): Alfarra et al.'s code."""

from rsbench.methods.card import CheckpointLayout, MethodCard

CARD = MethodCard(
    name="ddrs",
    target="rsbench.methods.ddrs.data_dependent",
    paper="Alfarra, Bibi, Torr and Ghanem, UAI 2022",
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
)
