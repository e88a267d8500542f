"""Do speed options change the certificates? Two certifications of the same images with the same noise, compared.

    python -m rsbench.certify model.path=best.ckpt certify.seed=0 hydra.run.dir=fp32
    python -m rsbench.certify model.path=best.ckpt certify.seed=0 certify.precision=bf16 hydra.run.dir=bf16
    python -m rsbench.bench.precision_agreement fp32 bf16

Each image's noise comes from streams seeded by (certify.seed, image index) and is always drawn and added in fp32,
so ``precision=bf16`` (autocast of the network) or ``compile`` evaluate the very same noisy inputs as fp32: every
difference between the two ``certify.tsv`` files is a vote the network cast differently. (``channels_last`` also
places the noise differently in a multi-channel image, so there its comparison mixes the arithmetic with fresh noise;
for one-channel images, MNIST's and Fashion-MNIST's, both layouts are the same memory order and the noise is the
same.) The tool prints how often the prediction and the certification status agree, the radius differences, the
vote-count differences (|dk| / n is a lower bound on the share of noisy inputs the two networks classify
differently), and how many certificates land in another cell of the certified-accuracy table.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from rsbench.certify.pipeline.records import CertificationRow, read_rows
from rsbench.runs.floor import CommandParser


def compare(first: list[CertificationRow], second: list[CertificationRow], step: float = 0.25) -> dict[str, float]:
    """Agreement of two certifications of the same images (rows matched by image index).

    Returns:
        ``images``; ``same_prediction``, ``same_status`` (certified or abstained alike) and ``same_cell`` (the same
        grid bin floor(R / step), or both abstained) as fractions; ``radius_median`` and ``radius_max`` of |dR| over
        images certified by both; ``votes_mean`` and ``votes_max`` of |dk| / n; ``same_votes``, the fraction of images
        with the same vote count for the predicted class.
    """
    other = {row.idx: row for row in second}
    pairs = [(row, other[row.idx]) for row in first if row.idx in other]
    if not pairs:
        raise ValueError("the two certifications share no image index")
    both = [(a, b) for a, b in pairs if a.predict >= 0 and b.predict >= 0]
    radius = np.array([abs(a.radius - b.radius) for a, b in both]) if both else np.zeros(1)

    def cell(row: CertificationRow) -> int:
        return -1 if row.predict < 0 else math.floor(row.radius / step + 1e-12)

    votes = np.array([abs((a.count or 0) - (b.count or 0)) / max(a.n, 1) for a, b in pairs if a.n == b.n])
    return {
        "images": float(len(pairs)),
        "same_prediction": float(np.mean([a.predict == b.predict for a, b in pairs])),
        "same_status": float(np.mean([(a.predict >= 0) == (b.predict >= 0) for a, b in pairs])),
        "same_cell": float(np.mean([cell(a) == cell(b) for a, b in pairs])),
        "radius_median": float(np.median(radius)),
        "radius_max": float(radius.max()),
        "votes_mean": float(votes.mean()) if votes.size else math.nan,
        "votes_max": float(votes.max()) if votes.size else math.nan,
        "same_votes": float(np.mean(votes == 0)) if votes.size else math.nan,
    }


def main(argv: list[str] | None = None) -> int:
    """Compare the ``certify.tsv`` of two run directories and print the agreement."""
    parser = CommandParser("python -m rsbench.bench.precision_agreement", description=__doc__)
    parser.add_argument("reference", type=Path, help="run directory (or certify.tsv) of the reference, e.g. fp32")
    parser.add_argument("other", type=Path, help="run directory (or certify.tsv) of the option, e.g. bf16")
    parser.add_argument("--step", type=float, default=0.25, help="the certified-accuracy grid step")
    args = parser.parse_args(argv)
    rows = [read_rows(p / "certify.tsv" if p.is_dir() else p) for p in (args.reference, args.other)]
    result = compare(rows[0], rows[1], args.step)
    print(
        f"{int(result['images'])} images: same prediction {100 * result['same_prediction']:.2f}%, same status "
        f"(certified / abstained) {100 * result['same_status']:.2f}%, same table cell {100 * result['same_cell']:.2f}%"
        f"; |radius difference| median {result['radius_median']:.2e}, max {result['radius_max']:.2e}; "
        f"|vote difference| / n mean {result['votes_mean']:.2e}, max {result['votes_max']:.2e}; the same vote count "
        f"on {100 * result['same_votes']:.2f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
