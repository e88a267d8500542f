"""Dual randomized smoothing (Sun, Mao and Vechev, ICLR 2026, arXiv 2512.01782): a sound input-dependent sigma.

A router h maps an image to one of K noise levels sigma_1 < ... < sigma_K, and expert f_k is a base classifier for
sigma_k. Both are smoothed: the router at its own sigma_r, g_r(x) = argmax_k P(h(x + eta) = k), eta ~ N(0, sigma_r^2 I),
and each expert at its sigma, g_k(x) = argmax_c P(f_k(x + eps) = c), eps ~ N(0, sigma_k^2 I). The dual classifier is

    G(x) = g_{k(x)}(x)  with  k(x) = g_r(x),

randomized smoothing with an input-dependent sigma that is locally constant: CERTIFY on the router (at failure
probability beta) returns k and R_sigma such that g_r(x') = k for every ||x' - x|| < R_sigma; CERTIFY on expert k (at
alpha, on noise independent of the router's) returns c and R_c such that g_k(x') = c for every ||x' - x|| < R_c.
Within min(R_sigma, R_c) the router keeps choosing k, so G(x') = g_k(x') = c: the certificate of G is
(c, min(R_sigma, R_c)). It fails only if the router's or the chosen expert's certificate fails: probability at most
alpha + beta (the expert's bound holds conditionally on whichever k the router's independent noise chose). Where the
router abstains (its p_lower < 1/2) G(x) is unknown and the dual certificate abstains; where the expert abstains, so
does G. Running every expert and keeping the best radius would not be sound; only the routed expert's certificate
counts, which is also why an expert's own record (same seed, same protocol) may be reused for the routed images.

This differs from data-dependent smoothing (:mod:`rsbench.certify.algorithm.data_dependent`, DDRS), whose per-input
sigma is not certified to stay constant around x and whose radii are therefore not sound.

``DualSmooth`` runs it on top of :class:`~rsbench.certify.algorithm.smooth.Smooth` (fixed-n CERTIFY) or any certifier
with the same signature (sequential CERTIFY); the router's noise of image i comes from ``derive_seed(seed_i,
ROUTER_KEY)`` and the experts' from ``seed_i`` itself, so the expert rows are exactly those an expert's own
certification with the same seed writes. :func:`router_labels` gives the router's training labels from the experts'
certificates. A dual run's records and summary are the pipeline's (:mod:`rsbench.certify.pipeline.dual_records`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from rsbench.certify.algorithm.groups import Certifier
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.smooth import Certificate, Smooth

ABSTAIN = Smooth.ABSTAIN
ROUTER_KEY = 7
"""The seed key that separates the router's noise from the experts': image i's router draws come from
``derive_seed(seed_i, ROUTER_KEY)``, independent of the experts' ``seed_i`` streams."""


def router_seed(seed: int) -> int:
    """The seed of the router's noise for an image whose certification seed is ``seed``."""
    return derive_seed(seed, ROUTER_KEY)


@dataclass(frozen=True)
class DualCertificate:
    """The dual certificate of one image and the two certificates it is made of.

    Attributes:
        prediction: the certified class, or -1 (abstain).
        radius: min(R_sigma, R_c), 0 on abstention.
        expert: the index of the routed expert, or -1 when the router abstained.
        sigma: the routed expert's sigma (0.0 when the router abstained).
        router: the router's certificate (its ``prediction`` is the expert index).
        classifier: the routed expert's certificate (``None`` when the router abstained).
        alpha: the experts' failure probability.
        beta: the router's failure probability.
    """

    prediction: int
    radius: float
    expert: int
    sigma: float
    router: Certificate
    classifier: Certificate | None
    alpha: float
    beta: float

    @property
    def failure_probability(self) -> float:
        """alpha + beta: the probability that this certificate is wrong, at most."""
        return self.alpha + self.beta


def combine(
    router: Certificate, classifier: Certificate | None, sigmas: Sequence[float], alpha: float, beta: float
) -> DualCertificate:
    """The dual certificate from the router's and the routed expert's certificates (see the module docstring).

    Args:
        router: CERTIFY of the smoothed router at ``beta``; its prediction indexes ``sigmas``.
        classifier: CERTIFY of the expert the router chose, at ``alpha`` (``None`` when the router abstained).
        sigmas: the experts' noise levels.
        alpha: the experts' failure probability.
        beta: the router's failure probability.
    """
    if router.prediction == ABSTAIN:
        return DualCertificate(ABSTAIN, 0.0, -1, 0.0, router, None, alpha, beta)
    expert = int(router.prediction)
    if classifier is None:
        raise ValueError(f"the router chose expert {expert}, but no certificate of it was given")
    if classifier.prediction == ABSTAIN:
        return DualCertificate(ABSTAIN, 0.0, expert, float(sigmas[expert]), router, classifier, alpha, beta)
    radius = min(router.radius, classifier.radius)
    return DualCertificate(
        int(classifier.prediction), radius, expert, float(sigmas[expert]), router, classifier, alpha, beta
    )


class DualSmooth:
    """A smoothed router over K smoothed experts: CERTIFY of the dual classifier (see the module docstring).

    Args:
        router: the smoothed router (its ``num_classes`` is K, its ``sigma`` the router's noise level).
        experts: the K smoothed experts, in the order of the router's outputs.
        certifier: how a group of images is certified (:func:`rsbench.certify.algorithm.groups.certifier`): the router's
            images, and the experts' unless ``expert_certifier`` is given.
        expert_certifier: how the experts' images are certified, when it differs (other n0 or n).
    """

    def __init__(
        self,
        router: Smooth,
        experts: Sequence[Smooth],
        certifier: Certifier,
        expert_certifier: Certifier | None = None,
    ) -> None:
        if router.num_classes != len(experts):
            raise ValueError(
                f"the router chooses among {router.num_classes} sigmas but {len(experts)} experts were given"
            )
        self.router = router
        self.experts = list(experts)
        self.router_certifier = certifier
        self.expert_certifier = expert_certifier or certifier

    @property
    def sigmas(self) -> list[float]:
        """The experts' noise levels, in router order."""
        return [expert.sigma for expert in self.experts]

    def certify_batch(
        self,
        xs: Tensor,
        seeds: Sequence[int],
        alpha: float,
        beta: float,
        *,
        expert_certificates: Callable[[int, list[int]], list[Certificate] | None] | None = None,
    ) -> list[DualCertificate]:
        """Dual CERTIFY of each image of ``xs``: the router at ``beta``, then the routed expert at ``alpha``.

        Args:
            xs: images ``[B, C, H, W]`` in [0,1].
            seeds: one certification seed per image (the experts' streams; the router's are derived from them).
            alpha: the experts' failure probability.
            beta: the router's failure probability.
            expert_certificates: ``(expert, positions) -> certificates`` already computed for those images (an
                expert's own record with the same seeds and protocol), or ``None`` to certify them here.
        """
        seeds = [int(seed) for seed in seeds]
        routes = self.router_certifier(self.router, xs, [router_seed(seed) for seed in seeds], beta)
        classified: dict[int, Certificate] = {}
        for expert in range(len(self.experts)):
            positions = [i for i, cert in enumerate(routes) if cert.prediction == expert]
            if not positions:
                continue
            given = expert_certificates(expert, positions) if expert_certificates is not None else None
            if given is None:
                given = self.expert_certifier(self.experts[expert], xs[positions], [seeds[i] for i in positions], alpha)
            classified.update(zip(positions, given, strict=True))
        return [combine(routes[i], classified.get(i), self.sigmas, alpha, beta) for i in range(len(xs))]


# ------------------------------------------------------------------------------------------- router labels


def router_labels(radii: np.ndarray) -> np.ndarray:
    """Each image's router label: the expert with the largest certified radius, ties to the smallest sigma.

    ``radii[i, k]`` is expert k's certified radius on training image i, 0 where it abstains or certifies a wrong
    class. Routing each image to its largest radius maximises 1[R >= r] at every radius r at once, so a perfect
    router is at least the per-radius envelope of the experts; images no expert certifies (all zero) go to the
    smallest sigma, the most accurate expert.

    >>> router_labels(np.array([[0.1, 0.4, 0.3], [0.0, 0.0, 0.0], [0.5, 0.5, 0.2]])).tolist()
    [1, 0, 0]
    """
    radii = np.asarray(radii, dtype=np.float64)
    if radii.ndim != 2:
        raise ValueError(f"radii must be [images, experts], got shape {radii.shape}")
    return np.argmax(radii, axis=1).astype(np.int64)  # argmax returns the first maximum: the smallest sigma
