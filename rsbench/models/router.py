"""Routers for dual randomized smoothing: any classifier over a list of sigmas, and the experts it routes to.

A :class:`Router` is a base classifier whose K outputs stand for the experts' noise levels ``sigmas`` (output k is
sigma_k, increasing), smoothed at its own noise level ``sigma`` (:mod:`rsbench.certify.algorithm.dual`). The ``router``
config group (``conf/router/``) builds one:

* ``checkpoint``: a router trained by ``python -m rsbench method=router``
  (:class:`rsbench.methods.router.RouterTraining`), whose signature holds ``method: router``, ``sigmas`` and the
  sigma it was trained (and is smoothed) at;
* ``model``: any model ``python -m rsbench.certify`` can read (``conf/model/``: your own module, an archive, a
  torchvision network ...) with its K outputs named by ``sigmas``;
* ``constant``: always the same expert (Dual RS then certifies that expert, its radius capped by the router's
  certificate: a check of the pipeline, and the single-sigma baseline inside the dual protocol).

Experts are :class:`~rsbench.certify.pipeline.certification.Subject` s built by :mod:`rsbench.models.builders` (rsbench
checkpoints, imported releases, your own modules), one per sigma, in the router's order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from rsbench.certify.pipeline.certification import Subject
from rsbench.checkpoint import read_classifier
from rsbench.errors import ConfigError
from rsbench.loading import file_digest
from rsbench.models import builders

ROUTER_METHOD = "router"
"""The ``method`` of a router checkpoint's signature."""


@dataclass(frozen=True)
class Router:
    """A classifier over the experts' sigmas, smoothed at its own sigma.

    Attributes:
        classifier: maps images ``[B, C, H, W]`` in [0,1] to K scores (input layer included).
        sigmas: the experts' noise levels, output k standing for ``sigmas[k]`` (increasing).
        sigma: the router's smoothing noise level.
        description: what identifies it in the records (``arch``, ``kind``).
        provenance: what it was built from (files and their SHA-256).
    """

    classifier: nn.Module
    sigmas: tuple[float, ...]
    sigma: float
    description: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_sigmas(self.sigmas)
        if not self.sigma > 0:
            raise ConfigError(f"router.sigma must be > 0, got {self.sigma!r}")

    @property
    def num_choices(self) -> int:
        """K, the number of experts it routes to."""
        return len(self.sigmas)


def check_sigmas(sigmas: Sequence[float], what: str = "router sigmas") -> None:
    """Refuse sigmas that are not positive and strictly increasing (output k is the k-th smallest)."""
    values = [float(s) for s in sigmas]
    if not values or any(s <= 0 for s in values) or any(b <= a for a, b in itertools.pairwise(values)):
        raise ConfigError(f"{what} must be positive and strictly increasing, got {values}")


def checkpoint(path: str, in_channels: int, sigma: float | None = None) -> Router:
    """A router trained by ``python -m rsbench method=router`` (its signature holds ``sigmas`` and its sigma).

    Args:
        path: the router's ``.ckpt``.
        in_channels: the dataset's image channels.
        sigma: smooth it at another sigma than it was trained at (``None``: its training sigma).
    """
    classifier, signature = read_classifier(path, f"router.path={path}", in_channels=in_channels)
    if signature.get("method") != ROUTER_METHOD or "sigmas" not in signature:
        raise ConfigError(
            f"router.path={path} is a {signature.get('method', 'unknown')} checkpoint, not a router (train one with "
            "python -m rsbench method=router ..., or use router=model for another classifier over the sigmas)"
        )
    sigmas = tuple(float(s) for s in signature["sigmas"])
    if int(signature["num_classes"]) != len(sigmas):
        raise ConfigError(f"router.path={path} has {signature['num_classes']} outputs for {len(sigmas)} sigmas")
    provenance = {"kind": "checkpoint", "path": str(path), "sha256": file_digest(path), "signature": dict(signature)}
    description = {"kind": "checkpoint", "arch": signature["arch"]}
    return Router(
        classifier, sigmas, float(sigma if sigma is not None else signature["sigma"]), description, provenance
    )


def model(model: Subject, sigmas: Sequence[float], sigma: float | None = None) -> Router:
    """Any classifier ``python -m rsbench.certify`` can build (``conf/model/``) used as a router over ``sigmas``.

    Args:
        model: the classifier (its class count must be ``len(sigmas)``).
        sigmas: the experts' noise levels its outputs stand for.
        sigma: its smoothing sigma (``None``: the sigma the model states).
    """
    if model.num_classes != len(sigmas):
        raise ConfigError(f"the router model has {model.num_classes} outputs for {len(sigmas)} sigmas {list(sigmas)}")
    description = {"kind": "model", "arch": model.description.get("arch", "unknown")}
    return Router(
        model.classifier,
        tuple(float(s) for s in sigmas),
        float(sigma if sigma is not None else model.sigma),
        description,
        dict(model.provenance),
    )


def denoised(router: Router, compose: Callable[..., Subject]) -> Router:
    """``router`` behind a denoiser: ``compose`` is a ``conf/model/`` ``denoised`` or ``diffusion`` builder.

    ``compose(classifier=...)`` is :func:`rsbench.models.builders.denoised` or
    :func:`~rsbench.models.builders.diffusion` with its denoiser's arguments bound (the node's ``classifier`` left
    out: the router is it), so a router behind a denoiser is built exactly as a denoised classifier is. The smoothed
    router is then ``router(D(x + delta))`` at the router's own sigma; its weights' fingerprint covers both parts, so
    records of the bare router are not reused.

    Raises:
        ConfigError: the denoiser was made for another noise level than the router's sigma.
    """
    bare = Subject(router.classifier, router.num_choices, router.sigma, dict(router.description), router.provenance)
    composed = compose(classifier=bare)
    if abs(float(composed.sigma) - router.sigma) > 1e-9:
        raise ConfigError(
            f"the router's denoiser is for sigma={composed.sigma}, the router is smoothed at sigma={router.sigma}: "
            "give a denoiser trained (or a diffusion model set) for the router's sigma, or set router.sigma"
        )
    record = composed.provenance["denoiser"]
    description = {
        **dict(router.description),
        "arch": composed.description["arch"],
        "denoiser": {key: record[key] for key in ("kind", "sha256", "timestep") if key in record},
    }
    return Router(composed.classifier, router.sigmas, router.sigma, description, dict(composed.provenance))


class ConstantVote(nn.Module):
    """Votes for output ``choice`` of ``k`` on every input (a router that always picks one expert)."""

    def __init__(self, k: int, choice: int) -> None:
        super().__init__()
        if not 0 <= choice < k:
            raise ConfigError(f"router.choice must be in [0, {k}), got {choice}")
        self.k = k
        self.choice = choice
        self.register_buffer("anchor", torch.zeros(()))  # a device to follow

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One-hot scores of ``choice`` for every image."""
        scores = torch.zeros(len(x), self.k, device=x.device)
        scores[:, self.choice] = 1.0
        return scores


def constant(sigmas: Sequence[float], choice: int, sigma: float) -> Router:
    """A router that always chooses expert ``choice`` (smoothed at ``sigma``, its certificate is the radius cap)."""
    values = tuple(float(s) for s in sigmas)
    return Router(ConstantVote(len(values), choice), values, float(sigma), {"kind": "constant", "arch": "constant"})


def experts(
    paths: Sequence[str] | None, models: Sequence[Subject] | None, num_classes: int, in_channels: int
) -> list[Subject]:
    """The experts, one per sigma: rsbench checkpoints at ``paths`` and/or models built from ``conf/model/`` nodes.

    Raises:
        ConfigError: none given, or their sigmas are not strictly increasing.
    """
    built = [builders.checkpoint(str(path), num_classes, in_channels) for path in paths or []]
    built += list(models or [])
    if not built:
        raise ConfigError("experts: give one rsbench checkpoint per sigma (experts=[a.ckpt,b.ckpt,c.ckpt])")
    check_sigmas([e.sigma for e in built], "the experts' sigmas (in the order given)")
    return built
