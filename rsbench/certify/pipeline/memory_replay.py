"""DDRS's memory-based certification (the DDRS repository's post-processing, UAI 2022), replayed over a run's rows.

The data-dependent certificates of a run (:func:`rsbench.certify.algorithm.data_dependent.certify_data_dependent`,
rows of ``certify_data_dependent.tsv``) are replayed in a fixed order and stored; a new point whose ball overlaps a
stored ball of another class has its radius shrunk to stay outside it, and a point inside such a ball takes the stored
class and the distance to that ball's boundary. Its certificates describe a *stateful* classifier whose answers depend
on the order of its queries (here: test index order) and on the subset certified; each stored certificate can fail with
probability alpha, so jointly up to (memory size) x alpha. rsbench keeps them ``sound = false``, as the
data-dependent rows they repair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from rsbench.certify.pipeline.records import CertificationRow

MEMORY_NOTE = (
    "memory-based: certificates of a stateful classifier replayed in test-index order over this subset; "
    "order- and subset-dependent, failure probability up to (memory size) x alpha jointly"
)


@dataclass(frozen=True)
class MemoryReport:
    """What the memory replay changed."""

    memory_size: int
    shrunk: int
    switched: int


def memory_replay(rows: Sequence[CertificationRow], images: Tensor) -> tuple[list[CertificationRow], MemoryReport]:
    """Replay data-dependent certificates in the given order through a memory of certified balls.

    For each row (in order), the stored balls of *other* classes that its ball overlaps (distance < R_j + R) are
    found. If the point lies inside one (distance < R_j), it takes that ball's class and the radius R_j - distance
    (the largest ball around it inside the stored one); otherwise its radius shrinks to min_j (distance - R_j). The
    resulting certificate is stored. Abstentions pass through and are not stored. Conflicts never raise.

    The promise: a certificate of radius R covers the *open* ball of radius R (Cohen et al.: every perturbation of
    norm < R), so after the replay any two stored balls of different classes satisfy R_i + R_j <= distance: they may
    touch (a shrunk radius is exactly distance - R_j, up to the rounding of the float64 distance), never overlap.

    Args:
        rows: the data-dependent certificates, in replay order.
        images: the images of ``rows`` in the same order, ``[N, C, H, W]`` in [0,1] pixel space.

    Returns:
        The replayed rows (``sound = false``) and a report of how many were shrunk or switched class.
    """
    if len(rows) != len(images):
        raise ValueError(f"got {len(rows)} rows but {len(images)} images")
    flat = images.reshape(len(images), -1).to(torch.float64)
    centers: list[int] = []
    radii: list[float] = []
    classes: list[int] = []
    replayed: list[CertificationRow] = []
    shrunk = switched = 0
    for position, row in enumerate(rows):
        prediction, radius = row.predict, row.radius
        if prediction != -1 and centers:
            stored = torch.as_tensor(centers)
            distances = torch.linalg.vector_norm(flat[stored] - flat[position], dim=1)
            stored_radii = torch.as_tensor(radii, dtype=torch.float64)
            other = torch.as_tensor(classes) != prediction
            conflict = other & (distances < stored_radii + radius)
            if bool(conflict.any()):
                margins = torch.where(conflict, distances - stored_radii, torch.inf)
                nearest = int(margins.argmin())
                margin = float(margins[nearest])
                if margin < 0:
                    prediction, radius = classes[nearest], -margin
                    switched += 1
                else:
                    radius = min(radius, margin)
                    shrunk += 1
        if prediction != -1:
            centers.append(position)
            radii.append(radius)
            classes.append(prediction)
        replayed.append(replace(row, predict=prediction, radius=radius, correct=prediction == row.label, sound=False))
    return replayed, MemoryReport(memory_size=len(centers), shrunk=shrunk, switched=switched)
