"""An ensemble of base classifiers as one base classifier (Horváth, Müller, Fischer and Vechev, ICLR 2022).

Smoothing an ensemble reduces the variance of the base classifier under noise, which raises pA where the members
disagree near the decision boundary and so the certified radius. The smoothed classifier is built on the ensemble's
top class, g(x) = argmax_c P(argmax f_bar(x + eps) = c), so CERTIFY and its guarantee are unchanged: the ensemble is
one deterministic function of its input, and each noisy sample is drawn once and shown to every member.

Aggregations (the authors' ``smooth_ensemble.py``, ``--aggregation_scheme``):

- ``logits`` (their default, scheme 0, the paper's soft-voting): f_bar = (1/k) sum_l f_l, the mean of the members'
  logits;
- ``softmax`` (scheme 2): the mean of the members' softmax probabilities;
- ``vote`` (scheme 1, hard voting): each member's top class gets one vote. The authors break ties between classes
  with equally many votes at random; here the lowest class index wins, which keeps the base classifier
  deterministic (both are sound: CERTIFY holds for any base classifier, randomised or not).

Their learned per-model weights (schemes 3 and 4, fitted to their own ten CIFAR-10 models) are not offered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor, nn

Aggregation = Literal["logits", "softmax", "vote"]
AGGREGATIONS: tuple[str, ...] = ("logits", "softmax", "vote")


class Ensemble(nn.Module):
    """k base classifiers answering as one: their scores aggregated per class (see the module docstring).

    Args:
        members: base classifiers mapping ``[B, C, H, W]`` in [0,1] pixel space to logits ``[B, num_classes]``
            (each with its own input layer).
        aggregation: ``logits`` (mean logit), ``softmax`` (mean probability) or ``vote`` (votes per class).
    """

    def __init__(self, members: Sequence[nn.Module], aggregation: Aggregation = "logits") -> None:
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"an ensemble needs at least 2 members, got {len(members)}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"ensemble aggregation must be one of {list(AGGREGATIONS)}, got {aggregation!r}")
        self.members = nn.ModuleList(members)
        self.aggregation: Aggregation = aggregation

    def forward(self, x: Tensor) -> Tensor:
        """The aggregated scores ``[B, num_classes]``; their argmax is the ensemble's class."""
        outputs = [member(x) for member in self.members]
        if self.aggregation == "logits":
            return torch.stack(outputs).float().mean(dim=0)
        if self.aggregation == "softmax":
            return torch.stack([out.float().softmax(dim=1) for out in outputs]).mean(dim=0)
        votes = torch.zeros_like(outputs[0], dtype=torch.float32)
        for out in outputs:
            votes.scatter_add_(1, out.argmax(dim=1, keepdim=True), torch.ones_like(votes[:, :1]))
        return votes
