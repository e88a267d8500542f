"""The card of CAT-RS (:mod:`rsbench.methods.catrs`): Jeong, Kim and Shin's code, releases and teacher."""

from rsbench.methods.card import MethodCard
from rsbench.methods.consistency_card import JEONG_LAYOUT

CARD = MethodCard(
    name="catrs",
    target="rsbench.methods.catrs.CATRS",
    paper="Jeong, Kim and Shin, AAAI 2023",
    title="CAT-RS",
    citation="Jeong, Kim and Shin, AAAI 2023",
    methods_table=7,
    # SmoothMix's MNIST table (the MNIST line) has no CAT-RS row: its authors' released MNIST runs (CAT-RS App. C).
    published_sources={"mnist": "catrs2023_logs_mnist"},
    repository="alinlab/smoothing-catrs",
    origin="catrs",
    checkpoint_layout=JEONG_LAYOUT,
    log_folders=("cat-rs",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/cat-rs/
    # train_catrs.py: losses.update(loss_xent.mean().item(), ...), L_low alone.
    train_loss_column="train/loss_low",
    checkpoint_arguments=("teacher_ckpt",),
    path_arguments=("teacher_cache_dir",),
    execution_arguments=("teacher_batch_size",),  # noisy copies per teacher forward pass: the same votes
    lora_refusal=(
        "its teacher is a Gaussian run of the same architecture, checked weight for weight; train the teacher's "
        "LoRA run first and fine-tune from its checkpoint with method=gaussian instead"
    ),
    prerequisites=(
        "with soft_label=teacher (the default), a Gaussian teacher trained at sigma=0.25 with the same recipe and "
        "schedule: method.teacher_ckpt, or trained first into <prerequisite_dir>/teachers and reused when unset"
    ),
    prerequisite_folder="teachers",
)
