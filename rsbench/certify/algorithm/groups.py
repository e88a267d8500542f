"""Certify a group of images: the one composition of CERTIFY that the pipeline, dual smoothing and ``make bench`` run.

Cohen et al.'s CERTIFY per image is select (n0 samples) then estimate (n fresh samples) then bound. Certifying K
images together only fills the forward passes (:meth:`rsbench.certify.algorithm.smooth.Smooth.certify_each`: the n0
selection samples of all K images in whole batches first, then each image's n estimation samples, several images per
batch only when n < batch_size); every image keeps its own two noise streams, so its certificate is exactly the one
it gets alone. A sequential design instead draws the estimation samples look by look
(:func:`rsbench.certify.algorithm.sequential.certify_group`). :func:`certify_images` chooses between the two, and
:func:`certifier` is the same as a :data:`Certifier` (what dual smoothing's router and experts are certified with).

This module is the algorithm side of certification: it takes a smoothed classifier, images and seeds and yields
certificates, and knows nothing of settings, records, summaries or progress (those are the run-level pipeline,
:mod:`rsbench.certify.pipeline`). :func:`images_together` is how many images the pipeline packs into one group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from torch import Tensor

from rsbench.certify.algorithm.designs import Design
from rsbench.certify.algorithm.sequential import certify_group as certify_sequential_group
from rsbench.certify.algorithm.smooth import Certificate, Smooth


def images_together(batch_size: int, n0: int, n: int, images_per_batch: int | None = None) -> int:
    """How many images are certified together: ``images_per_batch``, else enough for n0 samples to fill a batch.

    >>> images_together(1000, 100, 10_000), images_together(1000, 100, 10_000, images_per_batch=3)
    (10, 3)
    """
    return images_per_batch or max(1, batch_size // min(n0, n))


def certify_images(
    smooth: Smooth,
    xs: Tensor,
    seeds: Sequence[int | None],
    *,
    n0: int,
    n: int,
    alpha: float,
    batch_size: int,
    design: Design | None = None,
) -> Iterator[tuple[int, Certificate]]:
    """CERTIFY each image of ``xs``; yield ``(position in the group, certificate)`` as each one is decided.

    Args:
        smooth: the smoothed classifier.
        xs: images ``[K, C, H, W]`` in [0,1] pixel space.
        seeds: one seed per image (its selection and estimation streams derive from it).
        n0: selection samples per image.
        n: estimation samples per image (the most per image with a sequential design).
        alpha: the failure probability of each certificate.
        batch_size: noisy samples per forward pass.
        design: a sequential design (its goal holds alpha and n); ``None``: Cohen et al.'s fixed-n CERTIFY.
    """
    if design is None:
        return smooth.certify_each(xs, n0, n, alpha, batch_size, seeds=seeds)
    return enumerate(certify_sequential_group(smooth, xs, n0, batch_size, design, seeds=seeds))


Certifier = Callable[[Smooth, Tensor, list[int], float], list[Certificate]]
"""``certify(smooth, images, seeds, alpha) -> certificates``: fixed-n or sequential CERTIFY of a group of images."""
DesignFor = Callable[[float, float], Design | None]
"""``design(sigma, alpha)``: the sequential design certifying at them, or ``None`` for fixed-n CERTIFY."""


def certifier(n0: int, n: int, batch_size: int, design: DesignFor | None = None) -> Certifier:
    """:func:`certify_images` with (n0, n) as a :data:`Certifier`: fixed-n CERTIFY, or ``design``'s up to n samples."""

    def certify(smooth: Smooth, xs: Tensor, seeds: list[int], alpha: float) -> list[Certificate]:
        chosen = design(smooth.sigma, alpha) if design is not None else None
        found = certify_images(smooth, xs, seeds, n0=n0, n=n, alpha=alpha, batch_size=batch_size, design=chosen)
        return [cert for _, cert in found]

    return certify
