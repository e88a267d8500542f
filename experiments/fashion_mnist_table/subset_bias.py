"""The authors' own Fashion-MNIST models on the every-20th test subset against the whole test set.

For each released run: its ACR on all 10,000 test images, on the subset (500 images: 0, 20, ..., 9980), and the
difference in standard errors of a 500-image mean drawn from 10,000 (with the finite-population correction).

The subset is one fixed selection, shared by every model, so the 21 differences are not independent evidence: they
say how far a number measured on the subset stands from the table's number for the same model, which is why the
Fashion-MNIST table pairs rsbench's run with the authors' run on the same images.

    python experiments/fashion_mnist_table/subset_bias.py
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from rsbench.published.catalogue import released_logs


def subset_bias(skip: int = 20) -> list[tuple[str, float, float, float, float]]:
    """(method, sigma, ACR on all images, ACR on every ``skip``-th image, difference in standard errors) per log.

    Raises:
        ValueError: ``skip`` < 2 (the subset would be the whole test set).
    """
    if skip < 2:
        raise ValueError(f"skip={skip}: the subset must leave images out (skip >= 2)")
    lines = []
    for log in released_logs():
        if log.dataset != "fashion_mnist":
            continue
        released = log.read()
        scores, images = np.asarray(released.scores), np.asarray(released.images)
        subset = scores[images % skip == 0]
        correction = math.sqrt(1 - len(subset) / len(scores))
        error = float(np.std(scores, ddof=1)) / math.sqrt(len(subset)) * correction
        full, part = float(scores.mean()), float(subset.mean())
        lines.append((log.method, log.sigma, full, part, (part - full) / error))
    return sorted(lines, key=lambda line: (line[1], line[0]))


def main(argv: list[str] | None = None) -> int:
    """Print the table as markdown."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", type=int, default=20, help="the subset: every SKIP-th test image (default 20)")
    args = parser.parse_args(argv)
    print("| method | sigma | ACR, all 10,000 | ACR, subset | subset minus all | in standard errors |")
    print("|---|---|---|---|---|---|")
    for method, sigma, full, part, z in subset_bias(args.skip):
        print(f"| {method} | {sigma:g} | {full:.3f} | {part:.3f} | {part - full:+.3f} | {z:+.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
