"""The card of Stability training (:mod:`rsbench.methods.stability`), the Jeong lineage's ``train_stab.py``."""

from rsbench.methods.card import MethodCard

CARD = MethodCard(
    name="stability",
    target="rsbench.methods.stability.StabilityTraining",
    paper="Li, Chen, Wang and Carin, NeurIPS 2019 (as jh-jeong/smoothing-consistency's train_stab.py)",
    title="Stability",
    citation="Li et al., NeurIPS 2019",
    methods_table=2,
    repository="jh-jeong/smoothing-consistency",
    # No origin of its own: its released models are in the Jeong lineage's layout; import one with
    # origin=consistency method=stability.
    log_folders=("stab",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/stab/
    # train_stab.py: losses.update(loss_xent.item(), ...), the cross-entropy term alone.
    train_loss_column="train/cross_entropy",
)
