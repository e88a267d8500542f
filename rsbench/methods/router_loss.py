"""The dual RS router's training targets and loss (Sun, Mao and Vechev, ICLR 2026), each piece its own function.

The router labels table (``python -m rsbench.dual stage=labels``, :data:`LABELS_VERSION`) holds, for each training
image, every expert's certified radius at a small n (0 where the expert abstains or certifies a wrong class, NaN
where the image was not labelled) and the argmax label. From it, as the paper trains its router (as reported; its
code could not be read offline):

* :func:`soft_targets`: ``softmax_k R(x, sigma_k)`` over the experts, the radii in l2 units and no temperature (the
  paper states none); :func:`hard_targets` is the one-hot argmax (rsbench's earlier router);
* :func:`certified`: the images some expert certifies; the others are left out (``drop_uncertified``);
* :func:`expert_shares` and :func:`rebalance_weights`: q_k, the mean target over the kept images (for one-hot
  targets, the share of labels that pick expert k), and w_k = 1 / (K' q_k) with K' the experts of q_k > 0 (the
  paper's w_e = 1 / q_i, scaled so that sum_k q_k w_k = 1: the kept images' mean weight is 1 and the loss keeps
  the scale the consistency weight lambda was chosen for); an expert no image picks gets weight 0;
* :func:`router_loss`: the weighted soft cross-entropy of every noisy copy plus Jeong and Shin's consistency term
  (:func:`rsbench.methods.consistency.consistency_terms`, unweighted).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rsbench.errors import ConfigError
from rsbench.methods.consistency import consistency_terms

LABELS_VERSION = 2
"""The router labels table's format: ``version``, ``labels`` [N] (int64, -1 where not labelled), ``radii`` [N, K]
(float64, NaN where not labelled), ``sigmas`` [K], ``protocol``. A table without ``version`` (rsbench before it)
is read as version 1: the same keys, ``radii`` possibly missing."""

UNLABELLED = -1


@dataclass(frozen=True)
class LabelTable:
    """A router labels table as read: the argmax labels, the radii (``None`` in a version-1 table without them)."""

    labels: Tensor
    radii: Tensor | None
    sigmas: list[float]
    version: int


def read_label_table(path: str | Path, option: str = "method.labels_file") -> LabelTable:
    """The router labels table at ``path``, checked; a newer or damaged one is refused naming ``option``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"{option}={str(path)!r} is not a file (write it with python -m rsbench.dual stage=labels)")
    table = torch.load(path, map_location="cpu", weights_only=True)
    version = int(table.get("version", 1)) if isinstance(table, dict) else 0
    if version > LABELS_VERSION or version < 1 or "labels" not in table or "sigmas" not in table:
        raise ConfigError(
            f"{option}={str(path)!r} is not a router labels table this rsbench reads (version {version}, up to "
            f"{LABELS_VERSION}): write it again with python -m rsbench.dual stage=labels"
        )
    labels = table["labels"].long()
    sigmas = [float(s) for s in table["sigmas"]]
    radii = table.get("radii")
    if radii is None and version >= 2:
        raise ConfigError(f"{option}={str(path)!r} is a version-{version} table without radii (damaged)")
    if radii is not None and tuple(radii.shape) != (len(labels), len(sigmas)):
        raise ConfigError(
            f"{option}={str(path)!r}: radii of shape {tuple(radii.shape)}, expected {(len(labels), len(sigmas))}"
        )
    return LabelTable(labels, None if radii is None else radii.double(), sigmas, version)


def soft_targets(radii: Tensor) -> Tensor:
    """``softmax`` over the experts (the last axis) of the certified radii: each row a distribution, no temperature.

    >>> soft_targets(torch.tensor([[0.0, 0.0]])).tolist()
    [[0.5, 0.5]]
    """
    return torch.softmax(radii.double(), dim=-1)


def hard_targets(labels: Tensor, num_experts: int) -> Tensor:
    """One-hot rows of the argmax labels (a label of -1, not labelled, gives a zero row)."""
    targets = torch.zeros(len(labels), num_experts, dtype=torch.float64)
    known = labels >= 0
    targets[known, labels[known]] = 1.0
    return targets


def certified(radii: Tensor) -> Tensor:
    """The rows where some expert certifies the image (a radius > 0); unlabelled rows (NaN) are not."""
    return (torch.nan_to_num(radii, nan=0.0) > 0).any(dim=-1)


def expert_shares(targets: Tensor, kept: Tensor) -> Tensor:
    """q_k: the mean target of the kept rows (the share of their labels that pick expert k, for one-hot targets)."""
    if not bool(kept.any()):
        raise ConfigError("the router labels keep no training image (no expert certifies any labelled image)")
    return targets[kept].double().mean(dim=0)


def rebalance_weights(shares: Tensor) -> Tensor:
    """w_k = 1 / (K' q_k) for the experts with q_k > 0 (K' of them), 0 for the others: sum_k q_k w_k = 1.

    >>> rebalance_weights(torch.tensor([0.5, 0.25, 0.25])).tolist()
    [0.6666666666666666, 1.3333333333333333, 1.3333333333333333]
    """
    present = shares > 0
    weights = torch.zeros_like(shares, dtype=torch.float64)
    weights[present] = 1.0 / (int(present.sum()) * shares[present].double())
    return weights


def router_loss(
    logits: Tensor, targets: Tensor, weights: Tensor | None, lbd: float, eta: float
) -> tuple[Tensor, dict[str, Tensor]]:
    """Weighted soft cross-entropy of every noisy copy + ``lbd * mean KL(p_bar || p_i) + eta * H(p_bar)``.

    ``mean_{b, i} [-sum_k w_k t_{b,k} log softmax(z_{b,i})_k] + mean_b [lbd * KL_b + eta * H_b]``, the cross-entropy
    over all m * B rows (as method=consistency averages it) and the consistency terms over the B images (weights
    ``None``: every w_k = 1). With m = 1 the KL term is 0. A term whose weight is 0 is left out of the loss (computed
    without a graph, for the log): its gradient would otherwise be 0 x -inf = nan wherever a probability underflows
    to 0 (``F.kl_div``'s gradient in its target is log p_bar), as AdamW's first steps at lr 0.01 can make it.

    Args:
        logits: ``[B, m, K]``, the router's logits on m noisy copies of each of B images.
        targets: ``[B, K]``, each image's target distribution over the experts.
        weights: ``[K]`` rebalancing weights, or ``None``.
        lbd: the consistency weight lambda.
        eta: the entropy weight eta.

    Returns:
        The loss and its terms (``cross_entropy``, ``consistency_kl``, ``entropy``).
    """
    targets = targets.to(logits.dtype)
    if weights is not None:
        targets = targets * weights.to(logits)
    log_probs = F.log_softmax(logits, dim=2)
    cross_entropy = -(targets.unsqueeze(1) * log_probs).sum(dim=2).mean()
    with torch.set_grad_enabled(torch.is_grad_enabled() and (lbd != 0 or eta != 0)):
        kl, entropy = consistency_terms(logits)
    kl, entropy = kl.mean(), entropy.mean()
    terms = {"cross_entropy": cross_entropy, "consistency_kl": kl, "entropy": entropy}
    loss = cross_entropy
    if lbd != 0:
        loss = loss + lbd * kl
    if eta != 0:
        loss = loss + eta * entropy
    return loss, terms


def training_targets(table: LabelTable, labels: str, drop_uncertified: bool) -> tuple[Tensor, Tensor]:
    """``(targets [N, K], kept [N])`` for ``method.labels`` and ``method.drop_uncertified`` (the module doc)."""
    labelled = table.labels != UNLABELLED
    if table.radii is None:
        if labels == "soft" or drop_uncertified:
            raise ConfigError(
                "method.labels_file holds only argmax labels (a version-1 table without radii): soft labels and "
                "method.drop_uncertified need the radii; write it again with python -m rsbench.dual stage=labels, "
                "or pass method.labels=hard method.drop_uncertified=false"
            )
        return hard_targets(table.labels, len(table.sigmas)), labelled
    labelled = labelled & ~torch.isnan(table.radii).any(dim=1)
    kept = labelled & certified(table.radii) if drop_uncertified else labelled
    if labels == "soft":
        targets = torch.zeros_like(table.radii)
        targets[labelled] = soft_targets(table.radii[labelled])
    else:
        targets = hard_targets(table.labels, len(table.sigmas))
    return targets, kept


def describe_targets(
    sigmas: list[float], shares: Tensor, weights: Tensor | None, kept: int, labelled: int
) -> dict[str, Any]:
    """A JSON-safe summary of the targets: the kept images, q_k and w_k per sigma (logged when the router starts)."""

    def per_sigma(values: Tensor) -> dict[str, float]:
        return {repr(s): float(v) for s, v in zip(sigmas, values.tolist(), strict=True)}

    return {
        "kept": kept,
        "labelled": labelled,
        "shares": per_sigma(shares),
        "weights": None if weights is None else per_sigma(weights),
    }
