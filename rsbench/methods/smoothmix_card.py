"""The card of SmoothMix (:mod:`rsbench.methods.smoothmix`): Jeong et al.'s code and releases."""

from rsbench.methods.card import MethodCard
from rsbench.methods.consistency_card import JEONG_LAYOUT

CARD = MethodCard(
    name="smoothmix",
    target="rsbench.methods.smoothmix.SmoothMix",
    paper="Jeong, Park, Kim, Lee, Kim and Shin, NeurIPS 2021",
    title="SmoothMix",
    citation="Jeong et al., NeurIPS 2021",
    methods_table=6,
    published_variants={"mnist": "eta=5;one_step=false"},  # SmoothMix's Table 2 line the MNIST default is
    repository="jh-jeong/smoothmix",
    origin="smoothmix",
    checkpoint_layout=JEONG_LAYOUT,
    log_folders=("smoothmix",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/smoothmix/
    # train_smoothmix.py writes 0.0 in its log's train accuracy column (its loop measures none).
    logs_train_accuracy=False,
)
