"""Certify a group of images: the one composition of CERTIFY that the pipeline runs and ``make bench`` times.

Cohen et al.'s CERTIFY per image is select (n0 samples) then estimate (n fresh samples) then bound. Certifying K
images together only fills the forward passes: the n0 selection samples of all K images are drawn into whole batches
first (:meth:`~rsbench.certify.smooth.Smooth.select`), then each image's n estimation samples, several images per
batch only when n < batch_size (:meth:`~rsbench.certify.smooth.Smooth.estimate`); every image keeps its own two noise
streams, so its certificate is exactly the one it gets alone. A sequential design instead draws the estimation
samples look by look (:func:`rsbench.certify.sequential.certify_group`).

This module is the algorithm side of certification: it takes a smoothed classifier, images and seeds and yields
certificates, and knows nothing of settings, records, summaries or progress (those are the run-level pipeline,
:mod:`rsbench.certify.pipeline`). :func:`images_together` is how many images the pipeline packs into one group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from torch import Tensor

from rsbench.certify.designs import Design
from rsbench.certify.sequential import certify_group as certify_sequential_group
from rsbench.certify.smooth import Certificate, Smooth


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
    if design is not None:
        yield from enumerate(certify_sequential_group(smooth, xs, n0, batch_size, design, seeds=seeds))
        return
    start = time.perf_counter()
    selected = smooth.select(xs, n0, batch_size, seeds=seeds)
    selection_seconds = (time.perf_counter() - start) / len(xs)
    together = max(1, batch_size // n)
    for first in range(0, len(xs), together):
        part = slice(first, first + together)
        certificates = smooth.estimate(
            xs[part], selected[part], n0, n, alpha, batch_size, seeds=seeds[part], extra_seconds=selection_seconds
        )
        yield from enumerate(certificates, start=first)
