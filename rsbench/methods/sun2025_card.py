"""The card of Sun et al. 2025's training (:mod:`rsbench.methods.sun2025`, ``method=sun2025``).

Paper: Sun, Mao, Müller and Vechev, "Average Certified Radius is a Poor Metric for Randomized Smoothing", ICML 2025
(code and per-image logs: eth-sri/acr-weakness). The CIFAR-10 default (``dataset=cifar10 sigma=<s>``) is the
authors' ``script/cifar10/train_<s>.sh``, whose released runs certify ACR 0.564 / 0.760 / 0.844 at sigma 0.25 /
0.5 / 1.0 (all 10,000 test images, n = 100,000, alpha = 0.001); the MNIST family has no published setting.
Cost relative to Gaussian training (measured on CPU, docs/sun2025.md): 4.1x per batch before ``ds_epoch`` (m = 4
noisy copies), 22x after it at sigma 0.5 (the attack's steps), 13.7x over the authors' 150-epoch CIFAR-10 schedule.
Certificate: Cohen et al.'s CERTIFY of the trained model, sound at failure probability alpha (the method changes
training only). A checkpoint is sun2025 from the stage epoch E on (``ds_epoch`` with ``ds_hard``, else 0): before
it the run is Gaussian training with m noise copies, so ``protocol=rsbench`` selects among epochs E, E + 1, ...
"""

from collections.abc import Mapping
from typing import Any

from rsbench.methods.card import MethodCard, MethodEpoch


def stage_epoch(method: Mapping[str, Any]) -> Any:
    """E: ``method.ds_epoch`` with ``ds_hard`` (the class's defaults: true, 60), else 0 (``Sun2025.stage_epoch``)."""
    return method.get("ds_epoch", 60) if method.get("ds_hard", True) else 0


CARD = MethodCard(
    name="sun2025",
    target="rsbench.methods.sun2025.Sun2025",
    paper="Sun, Mao, Müller and Vechev, ICML 2025",
    repository="eth-sri/acr-weakness",
    path_arguments=("p_correct_file",),  # a per-training-image p_A table (the authors' ImageNet --p_corr_file)
    execution_arguments=("estimate_batch_size",),  # noisy copies per forward pass of the p_A estimates: same draws
    method_epoch=MethodEpoch(
        stage_epoch,
        keys=("ds_epoch", "ds_hard"),
        before="Gaussian training with m noise copies (no image dropped or reweighted, no attack on the noise)",
    ),
)
