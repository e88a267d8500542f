"""The card of CAT-RS (:mod:`rsbench.methods.catrs`): Jeong, Kim and Shin's code, releases and teacher."""

from rsbench.methods.card import MethodCard
from rsbench.methods.consistency_card import JEONG_LAYOUT

CARD = MethodCard(
    name="catrs",
    target="rsbench.methods.catrs.CATRS",
    paper="Jeong, Kim and Shin, AAAI 2023",
    repository="alinlab/smoothing-catrs",
    origin="catrs",
    checkpoint_layout=JEONG_LAYOUT,
    log_folders=("cat-rs",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/cat-rs/
    # train_catrs.py: losses.update(loss_xent.mean().item(), ...), L_low alone.
    train_loss_column="train/loss_low",
    checkpoint_arguments=("teacher_ckpt",),
    path_arguments=("teacher_cache_dir",),
    execution_arguments=("teacher_batch_size",),  # noisy copies per teacher forward pass: the same votes
    prerequisites=(
        "with soft_label=teacher (the default), a Gaussian teacher trained at sigma=0.25 with the same recipe and "
        "schedule: method.teacher_ckpt, or trained first into teacher_dir and reused when unset"
    ),
)
