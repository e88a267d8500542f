"""The card of Gaussian data augmentation (:mod:`rsbench.methods.gaussian`): Cohen et al.'s code and releases."""

from rsbench.methods.card import SEQUENTIAL_FILE, CheckpointLayout, MethodCard, same_for

CARD = MethodCard(
    name="gaussian",
    target="rsbench.methods.gaussian.GaussianAugmentation",
    paper="Cohen, Rosenfeld and Kolter, ICML 2019",
    title="Gaussian",
    citation="Cohen et al., ICML 2019",
    methods_table=1,
    repository="locuslab/smoothing",
    origin="cohen",
    # train.py saves Sequential(NormalizeLayer, net): weight keys 1.* (ResNet-50 in DataParallel: 1.module.*).
    checkpoint_layout=CheckpointLayout(
        repository="locuslab/smoothing",
        file_keys=SEQUENTIAL_FILE,
        weights_key="state_dict",
        arch_key="arch",
        prefixes=("1.module.", "1."),
        input_layers=same_for(("cifar10", "imagenet"), ("normalize",)),
    ),
    log_folders=("cohen",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/cohen/
    ddrs_base=True,
)
