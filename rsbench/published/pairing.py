"""A row against a published run on the images both certified: the one pairing of the report and the leaderboard.

``python -m rsbench.report --against-released`` pairs each rsbench row with the authors' released run of its method,
dataset and sigma (:mod:`rsbench.report.against_released`); the leaderboard pairs every entry with the best one of its
sigma, with a Gaussian entry and each user run with every published entry (:mod:`rsbench.leaderboard.board`). Both go
through :func:`pair_rows`: the shared images in the first row's order, both rows restricted to them, and
:func:`rsbench.report.paired.paired_table`'s line (ΔACR with its paired t interval and p; per radius the difference of
certified accuracy with McNemar's exact p, or the paired t over images of the run-averaged indicators with several
runs).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pandas as pd

from rsbench.report.paired import paired_table
from rsbench.report.rows import Row


@dataclass(frozen=True)
class Pairing:
    """Two rows on the images both certified.

    Attributes:
        images: the shared image indices, in the first row's order.
        ours, theirs: the two rows restricted to ``images``.
        line: :func:`~rsbench.report.paired.paired_table`'s line of ``ours`` against ``theirs`` (``d_acr``,
            ``d_acr_low``, ``d_acr_high``, ``p_acr``, per radius ``d_acc@r`` and ``p_acc@r``, ``test``).
    """

    images: list[int]
    ours: Row
    theirs: Row
    line: pd.Series


def restricted(row: Row, images: Sequence[int]) -> Row:
    """``row`` with only the records of ``images`` (which every run of it holds), in that order; itself if equal."""
    if list(row.images) == list(images):
        return row
    return Row(tuple(r.on_images(images) for r in row.results), row.settings)


def pair_rows(
    ours: Row,
    theirs: Row,
    radii: Sequence[float],
    confidence: float,
    theirs_images: Collection[int] | None = None,
) -> Pairing | None:
    """``ours`` against ``theirs`` on the images both certified; None when they share no image.

    Args:
        ours: the row compared (its images' order is the pairing's).
        theirs: the row it is compared with.
        radii: the radii of the certified-accuracy differences.
        confidence: of the ΔACR interval.
        theirs_images: ``theirs``' images as a set, when the caller keeps one (the leaderboard's entries do).
    """
    shared = theirs_images if theirs_images is not None else frozenset(theirs.images)
    common = [i for i in ours.images if i in shared]
    if not common:
        return None
    a, b = restricted(ours, common), restricted(theirs, common)
    return Pairing(common, a, b, paired_table([a, b], {0: b}, radii, confidence).iloc[0])
