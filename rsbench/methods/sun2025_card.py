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

The authors' artifacts (eth-sri/acr-weakness@1c8ea59dc6a6a18b932039cdd8611aa7fda6be4f), as read there:

- training: ``code/train.py`` (flags ``--ds_hard --ds_epoch --ds_threshold --dataset_weight --dataset_weight_epoch
  --adv --attacker --epsilon --attack_steps --num-noise-vec --p_corr_file``), run by
  ``script/cifar10/train_{0.25,0.5,1.0}.sh`` and ``script/imagenet/train_*.sh``;
- training logs: ``logs/<dataset>/<epsilon>_<attack_steps>_<attacker>/ds_<ds_epoch>_<ds_threshold>/num_<m>/
  [dataset_weight_<k>/]noise_<sigma>/<arch>/<id>/log.txt``, tab-separated ``epoch time lr 'train loss' 'train acc'
  testloss 'test acc' 'remain data'``; 'train loss' is the mean cross-entropy over the m noisy (attacked) copies,
  averaged over the epoch; the p_A tables go to ``p_correct/train/<same folders>/epoch/<epoch-1>_<N>.{csv,npy}``;
- checkpoints: ``checkpoint.pth.tar`` ``{'epoch', 'arch', 'state_dict', 'optimizer'}``, the state dict of
  ``Sequential(NormalizeLayer (Identity for mnist/fmnist), net)`` (network weights under the prefix ``1.``); three
  CIFAR-10 models (sigma 0.25 / 0.5 / 1.0) in the mega.nz folder their README links (not read by the importer);
- certification logs (``rsbench/report/released``, source ``sun2025``): ``data/certify/<dataset>/ours/noise_<s>.tsv``
  (the folder ``ours`` is this method, :data:`CARD`'s ``log_folders``; CIFAR-10: all 10,000 test images, ACR 0.5642
  / 0.7603 / 0.8437 measured from the files, byte-identical to their ``test/certify/cifar10/<setting>/1/`` runs;
  ImageNet: 500 images, ``noise_0.25`` without a ``.tsv`` suffix), the other methods' logs in
  ``data/certify/<dataset>/<method>/`` under rsbench's names, the paper's Figure 9 curves in ``data/ecdf/``;
  certified with n0 = 100, n = 100,000, alpha = 0.001, batch 1000, skip 1;
- prerequisites: none on CIFAR-10; on ImageNet the authors' released p_A table (``--p_corr_file
  p_correct/train/imagenet/-1_50.npy``, from their mega.nz folder) as ``method.p_correct_file``.
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
    title="Sun et al.'s training",
    citation="Sun, Mao, Müller and Vechev, ICML 2025",
    methods_table=8,
    repository="eth-sri/acr-weakness",
    log_folders=("ours",),  # eth-sri/acr-weakness data/certify/<dataset>/ours/
    # Newer than CAT-RS's Table 1 (the CIFAR-10 line): the authors' own released CIFAR-10 runs.
    published_sources={"cifar10": "sun2025_logs_cifar10"},
    path_arguments=("p_correct_file",),  # a per-training-image p_A table (the authors' ImageNet --p_corr_file)
    execution_arguments=("estimate_batch_size",),  # noisy copies per forward pass of the p_A estimates: same draws
    method_epoch=MethodEpoch(
        stage_epoch,
        keys=("ds_epoch", "ds_hard"),
        before="Gaussian training with m noise copies (no image dropped or reweighted, no attack on the noise)",
    ),
)
