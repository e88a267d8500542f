"""The card of MACER (:mod:`rsbench.methods.macer`): Zhai et al.'s code and releases.

Under ``lbd_schedule=deferred`` (the Jeong lineage's ``--deferred``, the MNIST family's default) lambda is 0 before
``lbd_from_epoch``: those epochs train the classification term alone, with no radius hinge, so a checkpoint is MACER
from ``lbd_from_epoch`` on.
"""

from collections.abc import Mapping
from typing import Any

from rsbench.methods.card import MNIST_LIKE, CheckpointLayout, MethodCard, MethodEpoch, same_for


def hinge_epoch(method: Mapping[str, Any]) -> Any:
    """The first epoch with lambda > 0: ``lbd_from_epoch`` when deferred, else 0 (``MACER.lbd_at``)."""
    deferred = method.get("lbd_schedule", "constant") == "deferred"
    return method.get("lbd_from_epoch") if deferred and method.get("lbd_from_epoch") is not None else 0


CARD = MethodCard(
    name="macer",
    target="rsbench.methods.macer.MACER",
    paper="Zhai, Dan, He, Zhang, Gong, Hu, Wang and Wang, ICLR 2020",
    title="MACER",
    citation="Zhai et al., ICLR 2020",
    methods_table=4,
    repository="RuntianZ/macer",
    origin="macer",
    # {net, epoch} with the bare network's keys (conv1.weight): no input layer at all, the network takes raw [0,1]
    # pixels. Its ResNet_Cifar uses bearpaw's names (its AvgPool2d(8, stride=1) on an 8x8 map equals AvgPool2d(8)).
    checkpoint_layout=CheckpointLayout(
        repository="RuntianZ/macer",
        file_keys=frozenset({"net", "epoch"}),
        weights_key="net",
        arch_key=None,
        prefixes=("",),
        input_layers=same_for(("cifar10", "svhn", *MNIST_LIKE), ("identity",)),
        default_archs={"cifar10": "cifar_resnet110", "svhn": "cifar_resnet110", **dict.fromkeys(MNIST_LIKE, "lenet")},
    ),
    log_folders=("macer",),  # alinlab/smoothing-catrs data/<dataset>/noise_<s>/macer/
    # The released logs' train_macer.py (the Jeong lineage's) logs macer_train's cl_total, the classification loss
    # alone, and writes 0.0 in its train accuracy column (its loop measures none).
    train_loss_column="train/classification",
    logs_train_accuracy=False,
    # certify.sigma_mode=data_dependent on a MACER model: the DDRS paper's MACER-DS searches with n = 8 noise draws
    # (where certify.sigma_samples is left null).
    certify_defaults={"sigma_samples": 8},
    ddrs_base=True,
    method_epoch=MethodEpoch(
        hinge_epoch,
        keys=("lbd_schedule", "lbd_from_epoch"),
        before="the cross-entropy of the soft-smoothed classifier alone (lambda = 0: no radius hinge)",
    ),
)
