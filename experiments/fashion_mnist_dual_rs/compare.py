"""Dual RS against each expert, against the per-radius envelope of the experts and against DDRS, image by image.

    python experiments/fashion_mnist_dual_rs/compare.py experiments/fashion_mnist_dual_rs
    python experiments/fashion_mnist_dual_rs/compare.py <study> --dual round1/dual_rs --experts round1 --out <folder>

reads ``runs/dual_rs/certify.tsv`` (rsbench.dual; another folder with ``--dual``), ``runs/expert_sigma<s>/certify.tsv``
(each expert's own sound certification, the same images, seed and protocol; below another folder with ``--experts``)
and, when present, ``runs/ddrs_sigma<s>/`` (data-dependent sigma, NOT sound; compared on the images it certified,
which may be fewer, with dual RS on those images beside), and writes ``report/`` (or ``--out``): ``report.md``,
``per_radius.csv``, ``paired.csv`` and ``certified_accuracy.png``.

Per radius r, certified accuracy is the fraction of images certified correctly at radius >= r. The envelope at r is
the best expert at r (chosen after seeing the test images, so an optimistic baseline: the best any single global
sigma does at that radius). Paired differences (dual minus the other, same images): the difference of the two
fractions with its 95% paired t interval over images and McNemar's exact p-value on the discordant images, both
from rsbench.report (``rsbench.report.stats.paired_difference`` and ``mcnemar_test``, as its paired tables). ACR is
reported beside, with the same paired interval. Two
diagnostic columns, neither a certificate, split the gap to the experts: ``routed_expert_only`` (the routed expert's
radius without the router's, what the choice of sigma gives) and ``oracle_routing`` (each image sent to the expert
of its largest radius, what a perfect router would give).
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from rsbench.certify.pipeline.dual_records import dual_rows
from rsbench.certify.pipeline.metrics import envelope
from rsbench.certify.pipeline.records import read_records, read_rows
from rsbench.report.dual import certified_at, oracle_routing, routed_alone, router_binds
from rsbench.report.stats import mcnemar_test, paired_difference


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float]:
    """(difference of means, 95% paired t low, high, McNemar p) for per-image values a, b (0/1 or radii).

    The report's statistics: the interval of ``rsbench.report.stats.paired_difference``, McNemar's exact test
    (``mcnemar_test``) where both are 0/1 (certified or not), nan for radii.
    """
    difference = paired_difference(a, b)
    binary = set(np.unique(a)) <= {0, 1} and set(np.unique(b)) <= {0, 1}
    p = mcnemar_test(a.astype(bool), b.astype(bool)).p_value if binary else float("nan")
    return difference.difference, difference.low, difference.high, p


def load_expert(folder: Path, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Radii and correctness of ``indices`` in an rsbench certification record."""
    rows = read_records(folder)
    return (
        np.array([rows[i].radius for i in indices]),
        np.array([rows[i].predict == rows[i].label for i in indices]),
    )


def main() -> None:
    """Write the report (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--dual", default="dual_rs", help="the dual certification, a folder in <study>/runs")
    parser.add_argument("--experts", default=".", help="the folder in <study>/runs holding expert_sigma<s>/")
    parser.add_argument("--out", type=Path, help="where the report goes (default <study>/report)")
    parser.add_argument("--radii", type=float, nargs="+", default=[0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5])
    args = parser.parse_args()
    runs, out = args.study / "runs", args.out or args.study / "report"
    out.mkdir(parents=True, exist_ok=True)
    dual = dual_rows(read_rows(runs / args.dual / "certify.tsv"), runs / args.dual / "certify.tsv")
    dual_metrics = json.loads((runs / args.dual / "metrics.json").read_text())
    indices = [r.idx for r in dual]
    dual_r = np.array([r.radius for r in dual])
    dual_c = np.array([r.correct for r in dual])
    # the routed expert's own certificate with the router's radius left out: NOT a certificate (nothing protects the
    # choice of sigma), shown to separate what the choice of sigma costs from what the router's certificate costs
    labels = np.array([r.label for r in dual])
    routed = routed_alone(np.array([r.expert_radius for r in dual]), np.array([r.expert_predict for r in dual]), labels)
    binds = router_binds(dual_c, np.array([r.router_radius for r in dual]), routed[0])
    sigmas = dual_metrics["sigmas"]
    experts = {s: load_expert(runs / args.experts / f"expert_sigma{s}", indices) for s in sigmas}
    oracle = oracle_routing([experts[s] for s in sigmas])
    ddrs, ddrs_on = {}, {}  # DDRS may certify fewer images: compared on those, dual RS on the same ones beside
    for folder in sorted(runs.glob("ddrs_sigma*")):
        rows = read_records(folder)
        on = [k for k, i in enumerate(indices) if i in rows]
        ddrs[folder.name] = load_expert(folder, [indices[k] for k in on])
        ddrs_on[folder.name] = np.array(on, dtype=int)
    ddrs_header = [h for name in ddrs for h in (f"{name} ({len(ddrs_on[name])} images)", "dual_rs (same images)")]
    header = [
        "radius",
        "dual_rs",
        "routed_expert_only",
        *[f"sigma{s}" for s in sigmas],
        "envelope",
        "envelope_sigma",
        "oracle_routing",
        *ddrs_header,
    ]
    per_radius, paired_rows = [], []
    best_sigma = envelope([[certified_at(experts[s], r).mean() for r in args.radii] for s in sigmas])[1]
    for r, which in zip(args.radii, best_sigma, strict=True):
        dual_at = certified_at((dual_r, dual_c), r)
        at = {s: certified_at(experts[s], r) for s in sigmas}
        best = sigmas[which]
        per_radius.append(
            [r, dual_at.mean(), certified_at(routed, r).mean(), *[at[s].mean() for s in sigmas]]
            + [at[best].mean(), best, certified_at(oracle, r).mean()]
            + [v for name in ddrs for v in (certified_at(ddrs[name], r).mean(), dual_at[ddrs_on[name]].mean())]
        )
        for s in sigmas:
            paired_rows.append([r, f"sigma={s}", *paired(dual_at.astype(int), at[s].astype(int))])
        paired_rows.append([r, f"envelope (sigma={best})", *paired(dual_at.astype(int), at[best].astype(int))])
        for name in ddrs:
            own = certified_at(ddrs[name], r).astype(int)
            paired_rows.append([r, f"{name} (NOT sound)", *paired(dual_at[ddrs_on[name]].astype(int), own)])
    acr = {"dual_rs": float(np.where(dual_c, dual_r, 0).mean())}
    for s in sigmas:
        radii, correct = experts[s]
        acr[f"sigma{s}"] = float(np.where(correct, radii, 0).mean())
        paired_rows.append(["ACR", f"sigma={s}", *paired(np.where(dual_c, dual_r, 0), np.where(correct, radii, 0))])
    for name, (radii, correct) in ddrs.items():
        acr[f"{name} (NOT sound, {len(radii)} images)"] = float(np.where(correct, radii, 0).mean())
        acr[f"dual_rs on the same {len(radii)} images"] = float(np.where(dual_c, dual_r, 0)[ddrs_on[name]].mean())
    with (out / "per_radius.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([header, *per_radius])
    with (out / "paired.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows(
            [["radius", "against", "difference", "low95", "high95", "mcnemar_p"], *paired_rows]
        )
    chosen = dual_metrics["chosen_sigma"]
    dataset = {"fashion_mnist": "Fashion-MNIST", "mnist_embedded": "the embedded MNIST"}.get(
        dual_metrics["dataset"], dual_metrics["dataset"]
    )
    chosen_subset = dual_metrics.get("subset", {})
    skip = int(chosen_subset.get("skip", 1))
    subset = f"every {skip}th from {chosen_subset.get('start', 0)}" if skip > 1 else f"the first {len(indices)}"
    lines = [
        f"# Dual RS on {dataset} against each expert, their envelope and DDRS",
        "",
        f"{len(indices)} test images ({subset}), paired: the same images, seeds and experts. Dual RS certificates "
        f"hold at alpha + beta = {dual_metrics['alpha']} + {dual_metrics['beta']} = "
        f"{dual_metrics['failure_probability']}; "
        f"each expert's at alpha = {dual_metrics['alpha']}. Router at sigma {dual_metrics['router_sigma']}; it chose "
        + ", ".join(f"sigma {s}: {n} images" for s, n in chosen.items())
        + f"; abstained on {dual_metrics['router_abstain_rate']:.1%}. Protocol: {dual_metrics['mode']} CERTIFY, "
        f"n0 = {dual_metrics['n0']}, n = {dual_metrics['n']} "
        f"(router {dual_metrics['router_n0']} / {dual_metrics['router_n']}).",
        "",
        "## Certified accuracy per radius (the headline)",
        "",
        "| radius | " + " | ".join(header[1:]) + " |",
        "|" + "---|" * len(header),
    ]
    for row in per_radius:
        cells = [f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "routed_expert_only: the routed expert's own certificate with the router's radius left out. It is NOT a "
        "certificate (nothing certifies that nearby inputs get the same sigma); it separates what the choice of "
        f"sigma costs from what the router's certificate costs. The router's radius is the smaller one (it binds) "
        f"on {binds} of the {int(dual_c.sum())} images dual RS classifies correctly. oracle_routing: each "
        "image sent to the expert of its largest radius, known after certifying every expert on it (what the "
        "router's labels ask for; certified at r where any expert is): the most a router over these experts can reach.",
    ]
    if ddrs:
        lines += [
            "",
            "DDRS columns: data-dependent sigma certificates, NOT sound (each input's own sigma, not certified "
            "to stay constant nearby); shown only to compare with the sound dual certificate, on the images DDRS "
            "certified, with dual RS on the same images beside.",
        ]
    lines += ["", "## ACR (beside)", "", "| | ACR |", "|---|---|", *[f"| {k} | {v:.4f} |" for k, v in acr.items()]]
    lines += [
        "",
        "## Paired differences, dual RS minus the other (95% paired t interval over images, McNemar p)",
        "",
        "| radius | against | difference | 95% interval | McNemar p |",
        "|---|---|---|---|---|",
    ]
    for r, against, diff, low, high, p in paired_rows:
        lines.append(f"| {r} | {against} | {diff:+.3f} | [{low:+.3f}, {high:+.3f}] | {p:.3g} |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    figure, axes = plt.subplots(figsize=(6.5, 4))
    grid = np.linspace(0, max(args.radii), 200)
    axes.plot(
        grid, [certified_at((dual_r, dual_c), r).mean() for r in grid], lw=2.5, label="dual RS (sound, alpha+beta)"
    )
    for s in sigmas:
        axes.plot(grid, [certified_at(experts[s], r).mean() for r in grid], lw=1.2, ls="--", label=f"sigma={s} alone")
    for name in ddrs:
        label = f"{name} (NOT sound, {len(ddrs_on[name])} images)"
        axes.plot(grid, [certified_at(ddrs[name], r).mean() for r in grid], lw=1, ls=":", label=label)
    axes.set(xlabel="l2 radius", ylabel="certified accuracy", ylim=(0, 1))
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    axes.set_title(f"{dataset}, {len(indices)} test images", fontsize=10)
    figure.tight_layout()
    figure.savefig(out / "certified_accuracy.png", dpi=120)
    print((out / "report.md").read_text())


if __name__ == "__main__":
    main()
