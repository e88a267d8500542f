"""Sequential CERTIFY on a real network against fixed n, and against what the replay's oracle predicts for it.

    python -m rsbench.bench.sequential_check FIXED_RUN SEQUENTIAL_RUN [SEQUENTIAL_RUN ...]

The runs certify the same images of the same model with the same ``certify.seed``, so each image's selection and
estimation streams are the same in every run: a sequential run reads the first samples of the stream fixed n reads
(``experiments/sequential_replay/real_models.sh`` makes such runs). For each sequential run it prints, measured on the
network: samples per image, the saving against fixed n, the paired certified-accuracy difference at every radius of
its grid and the ACR difference (95% intervals). Then it replays FIXED_RUN's own ``certify.tsv`` through the replay
benchmark's oracle (:mod:`rsbench.bench.replay`) with the same design, cap and n, and prints the oracle's figures
for the same images: how far the model of the model is from the model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from rsbench.bench import replay
from rsbench.certify.pipeline.records import CertificationRow, read_rows
from rsbench.runs.floor import CommandParser


def load(run: Path) -> tuple[dict[str, Any], dict[str, Any], list[CertificationRow]]:
    """A run's ``metrics.json``, ``certify_protocol.json`` and rows (sorted by image index)."""
    metrics = json.loads((run / "metrics.json").read_text())
    protocol = json.loads((run / "certify_protocol.json").read_text())
    return metrics, protocol, sorted(read_rows(run / "certify.tsv"), key=lambda row: row.idx)


def measured(fixed: list[CertificationRow], other: list[CertificationRow], radii: list[float]) -> dict[str, Any]:
    """Samples and paired differences of ``other`` against ``fixed`` on the images both certified."""
    by_index = {row.idx: row for row in fixed}
    pairs = [(by_index[row.idx], row) for row in other if row.idx in by_index]
    if len(pairs) < 2:
        raise ValueError(f"the runs share {len(pairs)} images; certify the same subset with the same seed")
    grid = np.asarray(radii)
    hit = np.array([[b.correct and b.radius >= r for r in grid] for _, b in pairs], dtype=float)
    base = np.array([[a.correct and a.radius >= r for r in grid] for a, _ in pairs], dtype=float)
    delta, half = replay.paired(hit - base)
    scores = np.array([[b.radius * b.correct - a.radius * a.correct] for a, b in pairs])
    acr, acr_half = replay.paired(scores)
    return {
        "images": len(pairs),
        "samples": np.array([b.n for _, b in pairs], dtype=float),
        "fixed_samples": np.array([a.n for a, _ in pairs], dtype=float),
        "delta": delta,
        "half": half,
        "acr": float(acr[0]),
        "acr_half": float(acr_half[0]),
    }


def _line(name: str, n0: int, figures: dict[str, Any], radii: list[float]) -> str:
    mean = n0 + figures["samples"].mean()
    fixed = n0 + figures["fixed_samples"].mean()
    cells = " ".join(f"{100 * d:+.1f}±{100 * h:.1f}" for d, h in zip(figures["delta"], figures["half"], strict=True))
    return (
        f"  {name:<22} {mean:>8,.0f} {np.median(n0 + figures['samples']):>8,.0f} {fixed / mean:>6.1f}x  "
        f"{figures['acr']:+.3f}±{figures['acr_half']:.3f}  {cells}"
    )


def main(argv: list[str] | None = None) -> int:
    """Compare each sequential run with the fixed-n run, measured and as the oracle predicts."""
    parser = CommandParser("python -m rsbench.bench.sequential_check", description=__doc__)
    parser.add_argument("fixed", type=Path, help="the fixed-n run directory")
    parser.add_argument("sequential", nargs="+", type=Path, help="sequential run directories (same images, seed)")
    parser.add_argument("--seed", type=int, default=0, help="the replay's seed")
    args = parser.parse_args(argv)
    fixed_metrics, fixed_protocol, fixed_rows = load(args.fixed)
    sigma, n, n0, alpha = (fixed_protocol[k] for k in ("sigma", "n", "n0", "alpha"))
    spec = replay.LogSpec(
        name=str(args.fixed),
        label=np.array([row.label for row in fixed_rows]),
        predict=np.array([row.predict for row in fixed_rows]),
        radius=np.array([row.radius for row in fixed_rows]),
        sigma=float(sigma),
        n0=int(n0),
        n=int(n),
        alpha=float(alpha),
    )
    print(
        f"{len(fixed_rows)} images, sigma={sigma}, n0={n0}, n={n}, alpha={alpha}; fixed-n ACR "
        f"{fixed_metrics['acr']:.4f}. Samples per image (n0 + estimation), the saving against fixed n, and paired "
        "differences against fixed n (ACR; certified accuracy in points at each radius), with 95% intervals"
    )
    for run in args.sequential:
        metrics, protocol, rows = load(run)
        design, cap = metrics.get("design", "looks"), float(protocol["radius_cap"])
        target = cap if design == "adaptive" else None
        radii = [cap] if target is not None else replay.table_radii(spec.sigma, spec.n, spec.alpha, largest=cap)
        figures = measured(fixed_rows, rows, list(radii))
        candidate = replay.Candidate(design, design)
        outcomes, decisions = replay.replay(
            spec, [candidate], seed=args.seed, radius_target=target, largest=None if target else cap
        )
        oracle = outcomes[1]
        predicted = {
            "samples": decisions[design].samples.astype(float),
            "fixed_samples": np.full(len(fixed_rows), float(n)),
            "delta": oracle.delta,
            "half": oracle.delta_half,
            "acr": oracle.acr_delta,
            "acr_half": oracle.acr_half,
        }
        radii_text = " ".join(f"{r:g}" for r in radii)
        print(f"\n{run} (design={design}, radius cap {cap:g}; radii {radii_text})")
        print(f"  {'':<22} {'mean':>8} {'median':>8} {'fewer':>7}  {'d.ACR':<13}  d.acc per radius (points)")
        print(_line("network", int(n0), figures, list(radii)))
        print(_line("oracle (replay)", int(n0), predicted, list(radii)))
        false = oracle.false
        print(f"  oracle: {false} false certificates of {oracle.images} (alpha = {alpha}); {oracle.promise}")
        if not math.isclose(metrics.get("n", n), n):
            print(f"  note: the run's n is {metrics.get('n')}, fixed n's is {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
