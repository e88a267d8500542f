"""Which test images are certified: a start offset, every ``skip``-th image, at most ``max_images`` of them."""

from __future__ import annotations

import hashlib

from rsbench.errors import ConfigError


def certification_indices(num_images: int, start: int = 0, skip: int = 1, max_images: int | None = None) -> list[int]:
    """The dataset indices ``start, start + skip, ...`` below ``num_images``, the first ``max_images`` of them.

    ``max_images`` is a count of images, not an index (Cohen's ``--max`` compared against the index).
    Cohen et al. certify CIFAR-10 with skip=20 (500 images) and ImageNet with skip=100; the Jeong lineage
    certifies the whole test set (skip=1).

    >>> certification_indices(100, start=5, skip=20, max_images=3)
    [5, 25, 45]
    """
    if start < 0:
        raise ValueError(f"certify.start must be >= 0, got {start}")
    if skip < 1:
        raise ValueError(f"certify.skip must be >= 1, got {skip}")
    if max_images is not None and max_images < 1:
        raise ValueError(f"certify.max_images must be >= 1 or null (all), got {max_images}")
    indices = list(range(start, num_images, skip))
    return indices if max_images is None else indices[:max_images]


def require_images(
    num_images: int, start: int = 0, skip: int = 1, max_images: int | None = None, what: str = ""
) -> list[int]:
    """:func:`certification_indices`, refusing a subset that selects no image (its ACR would read as a result).

    Args:
        num_images: the size of the test split.
        start: the first index (``certify.start``).
        skip: the stride (``certify.skip``).
        max_images: at most this many images (``certify.max_images``).
        what: the test split's name in the message (e.g. ``the mnist_embedded test split``).

    Raises:
        ConfigError: no image is selected; the message gives the split's size.
    """
    indices = certification_indices(num_images, start, skip, max_images)
    if not indices:
        split = what or "the test split"
        raise ConfigError(
            f"certify.start={start} selects no test image: {split} has {num_images} images (indices 0 to "
            f"{num_images - 1}); choose certify.start below {num_images}"
        )
    return indices


def indices_digest(indices: list[int]) -> str:
    """A short SHA-256 of the index list, to name a subset in tables."""
    return hashlib.sha256(",".join(map(str, indices)).encode()).hexdigest()[:16]
