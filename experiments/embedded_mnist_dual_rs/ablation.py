"""The router recipe's ablation (ablation.sh): each variant's dual certificates over its router seeds, paired.

    python experiments/embedded_mnist_dual_rs/ablation.py experiments/embedded_mnist_dual_rs/runs/ablation \
        > experiments/embedded_mnist_dual_rs/report/ablation.md

reads ``<folder>/<variant>/seed<k>/dual_rs/certify.tsv`` (``python -m rsbench.certify model=dual``: dual rows, one
per test image, each certificate at alpha + beta) and ``<folder>/expert_sigma<s>/certify.tsv`` (the experts' own
certifications of the same images, which every variant's dual rows reuse), and prints a Markdown report:

* per variant: ACR as the mean over its router seeds with their sd, and certified accuracy (%) at some radii, the
  mean over seeds;
* paired on the same images against the paper's recipe (``paper``): the per-image score (correct x radius, what ACR
  averages) averaged over each variant's seeds, their mean difference with its 95% paired t interval over the images
  (``rsbench.report.stats.paired_difference``): the interval is over images, the seeds enter through the averages;
* the mechanism: how many correct images have the router's radius below the routed expert's (R_sigma binds,
  ``rsbench.report.dual.router_binds``), and where the router sends the images (the share per sigma), means over
  seeds. Neither is a certificate.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rsbench.certify.pipeline.dual_records import dual_rows
from rsbench.certify.pipeline.records import read_rows
from rsbench.report.dual import router_binds
from rsbench.report.stats import paired_difference

VARIANTS = {
    "paper": "the paper's recipe: soft labels, uncertified images dropped, w_e = 1/q_i, strong consistency, AdamW",
    "hard": "argmax labels (method.labels=hard), the rest as the paper's",
    "keep": "uncertified images kept (method.drop_uncertified=false)",
    "unweighted": "no rebalancing (method.rebalance=false)",
    "no_consistency": "no consistency term (method.consistency=none)",
    "v1": "every piece off and SGD with the dataset's recipe (rsbench's earlier router)",
    "lr0.001": "the paper's recipe at AdamW lr 0.001 (optimizer.lr=0.001) instead of its 0.01",
}
RADII = (0.0, 0.5, 1.0, 1.5, 2.0)


def scores(rows: Sequence) -> np.ndarray:
    """Per image: correct x radius (0 where wrong or abstained)."""
    return np.array([row.radius if row.correct else 0.0 for row in rows])


def seeds_of(folder: Path) -> dict[str, list]:
    """Each seed folder's dual rows (``seed<k>`` -> rows), for the seeds whose certification finished."""
    found = {}
    for seed in sorted(folder.glob("seed*")):
        record = seed / "dual_rs" / "certify.tsv"
        if (seed / "dual_rs" / "metrics.json").is_file():
            found[seed.name] = dual_rows(read_rows(record), record)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    """Print the report (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the ablation's runs (ablation.sh's $OUT, or its committed copy)")
    args = parser.parse_args(argv)
    runs = {v: seeds_of(args.folder / v) for v in VARIANTS if (args.folder / v).is_dir()}
    runs = {v: s for v, s in runs.items() if s}
    if "paper" not in runs:
        parser.error(f"{args.folder} holds no finished paper/seed<k>/dual_rs")
    images = [row.idx for row in next(iter(runs["paper"].values()))]
    for variant, seeds in runs.items():
        for seed, rows in seeds.items():
            if [row.idx for row in rows] != images:
                parser.error(f"{variant}/{seed} certified other images than paper's")
    metrics = json.loads((args.folder / "paper" / next(iter(runs["paper"])) / "dual_rs" / "metrics.json").read_text())
    sigmas = [float(s) for s in metrics["sigmas"]]
    paper_mean = np.mean([scores(rows) for rows in runs["paper"].values()], axis=0)
    print("# The dual RS router recipe, piece by piece (embedded MNIST)\n")
    print(
        f"{len(images)} test images (the first ones); experts at sigma {', '.join(f'{s:g}' for s in sigmas)} "
        f"(seed 0, their records reused by every variant); each certificate at alpha + beta = "
        f"{metrics.get('alpha', 0) + metrics.get('beta', 0):g}. Router seeds per variant as listed. Paired: the "
        "per-image score (correct x radius) averaged over the variant's seeds, minus the paper recipe's, with its "
        "95% paired t interval over the images. 'R_sigma binds': correct images whose router radius is below the "
        "routed expert's (not a certificate: a diagnostic). Command: the module docstring of ablation.py.\n"
    )
    header = ["variant", "seeds", "ACR (mean ± sd over seeds)", "Δ ACR vs paper [95%]"]
    header += [f"r={r:g} (%)" for r in RADII] + ["R_sigma binds"] + [f"to σ={s:g}" for s in sigmas] + ["abstain"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for variant, seeds in runs.items():
        per_seed = [scores(rows) for rows in seeds.values()]
        acrs = [float(s.mean()) for s in per_seed]
        sd = float(np.std(acrs, ddof=1)) if len(acrs) > 1 else float("nan")
        if variant == "paper":
            delta = "-"
        else:
            d = paired_difference(np.mean(per_seed, axis=0), paper_mean)
            delta = f"{d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
        accuracy = [
            100 * np.mean([np.mean([r.correct and r.radius >= radius for r in rows]) for rows in seeds.values()])
            for radius in RADII
        ]
        binds = np.mean(
            [
                router_binds(
                    np.array([r.correct for r in rows]),
                    np.array([r.router_radius or 0.0 for r in rows]),
                    np.array([r.expert_radius or 0.0 for r in rows]),
                )
                for rows in seeds.values()
            ]
        )
        shares = [
            np.mean([np.mean([r.expert == k for r in rows]) for rows in seeds.values()]) for k in range(len(sigmas))
        ]
        abstain = np.mean([np.mean([r.expert is None or r.expert < 0 for r in rows]) for rows in seeds.values()])
        cells = [variant, str(len(seeds)), f"{np.mean(acrs):.3f} ± {sd:.3f}", delta]
        cells += [f"{a:.1f}" for a in accuracy] + [f"{binds:.1f}"] + [f"{100 * s:.0f}%" for s in shares]
        cells += [f"{100 * abstain:.0f}%"]
        print("| " + " | ".join(cells) + " |")
    print()
    for variant in runs:
        print(f"- `{variant}`: {VARIANTS[variant]}")
    print()
    for sigma in sigmas:
        record = args.folder / f"expert_sigma{sigma}" / "certify.tsv"  # (run.sh's names: 0.25, 0.5, 1.0)
        if record.is_file():
            by_image = {row.idx: row for row in read_rows(record)}
            own = scores([by_image[i] for i in images])
            d = paired_difference(paper_mean, own)
            print(
                f"- the sigma {sigma:g} expert alone: ACR {own.mean():.3f} on the same images; the paper recipe's "
                f"dual RS minus it: {d.difference:+.3f} [{d.low:+.3f}, {d.high:+.3f}]"
            )


if __name__ == "__main__":
    main()
