"""The card of Consistency regularization (:mod:`rsbench.methods.consistency`), and the Jeong lineage's layout.

Jeong and Shin's code (jh-jeong/smoothing-consistency), copied by SmoothMix (jh-jeong/smoothmix) and CAT-RS
(alinlab/smoothing-catrs), saves Cohen's file; its CIFAR and ImageNet models have a NormalizeLayer, its MNIST and
Fashion-MNIST models ``nn.Identity`` (:data:`JEONG_LAYOUT`, which their cards share).
"""

from rsbench.methods.card import MNIST_LIKE, SEQUENTIAL_FILE, CheckpointLayout, MethodCard, same_for

JEONG_LAYOUT = CheckpointLayout(
    repository="jh-jeong/smoothing-consistency, jh-jeong/smoothmix, alinlab/smoothing-catrs",
    file_keys=SEQUENTIAL_FILE,
    weights_key="state_dict",
    arch_key="arch",
    prefixes=("1.module.", "1."),
    input_layers={
        **same_for(("cifar10", "cifar100", "imagenet"), ("normalize",)),
        **same_for(MNIST_LIKE, ("identity",)),
    },
)
"""The layout shared by smoothing-consistency, smoothmix and smoothing-catrs."""

CARD = MethodCard(
    name="consistency",
    target="rsbench.methods.consistency.ConsistencyRegularization",
    paper="Jeong and Shin, NeurIPS 2020",
    title="Consistency",
    citation="Jeong and Shin, NeurIPS 2020",
    methods_table=3,
    repository="jh-jeong/smoothing-consistency",
    origin="consistency",
    checkpoint_layout=JEONG_LAYOUT,
    log_folders=("consistency",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/consistency/
    # train_consistency.py: losses.update(loss_xent.item(), ...), the cross-entropy term alone.
    train_loss_column="train/cross_entropy",
)
