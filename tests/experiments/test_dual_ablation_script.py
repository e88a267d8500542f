"""``experiments/embedded_mnist_dual_rs/ablation.py`` on two hand-made images, two variants, counted by hand.

Two experts (sigma 0.25, 0.5). Image 0 (label 0) is certified by expert 0 at radius 0.4 and by expert 1 at 0.8;
image 1 (label 0) is misclassified by expert 0 and certified by expert 1 at 0.6. ``paper`` has two router seeds:
seed 0 sends both images to expert 0 (scores 0.4, 0: ACR 0.2), seed 1 to expert 1 with the router's radius 0.5
binding on image 0 (scores 0.5, 0.6: ACR 0.55); ``hard`` has one seed, both to expert 1 (0.8, 0.6: ACR 0.7). The
ACRs are sums of two radii over two, compared within 1e-9 (float rounding of one sum, written as printed to 3
decimals: the check is on the printed text).
"""

from __future__ import annotations

from pathlib import Path
from statistics import NormalDist

import pytest

from rsbench.certify.pipeline.dual_records import DUAL_RECORD, summarize_dual
from rsbench.certify.pipeline.records import CertificationRow, RecordWriter, write_record
from rsbench.certify.pipeline.summary import write_metrics
from tests.scripts import experiment_script

pytestmark = pytest.mark.study

SIGMAS = (0.25, 0.5)
EXPERTS = {0: [(0, 0.4), (0, 0.8)], 1: [(1, 0.3), (0, 0.6)]}  # image -> each expert's (predict, radius); labels 0


def certified(idx: int, predict: int, radius: float, sigma: float, **dual: object) -> CertificationRow:
    """A row whose bound certifies ``radius`` (a dual row: the routed expert's radius, its ``expert_radius``)."""
    expert_radius = float(dual.get("expert_radius", radius))  # type: ignore[arg-type]
    bound = NormalDist().cdf(expert_radius / sigma)
    return CertificationRow(idx, 0, predict, radius, predict == 0, 0.1, 100, 100, bound, sigma, **dual)  # type: ignore[arg-type]


def dual_run(folder: Path, routes: dict[int, tuple[int, float]]) -> None:
    """A dual record: image -> (routed expert, router radius); radius min(router, expert)."""
    rows = []
    for idx, (k, router_radius) in routes.items():
        predict, radius = EXPERTS[idx][k]
        dual = {"expert": k, "router_radius": router_radius, "router_pA_lower": NormalDist().cdf(router_radius)}
        dual |= {"router_n": 100, "expert_predict": predict, "expert_radius": radius, "alpha": 0.0005, "beta": 0.0005}
        rows.append(certified(idx, predict, min(radius, router_radius), SIGMAS[k], **dual))
    folder.mkdir(parents=True)
    with RecordWriter(folder / "certify.tsv", DUAL_RECORD) as writer:
        for row in rows:
            writer.append(row)
    extra = {"dataset": "mnist_embedded", "mode": "standard", "n0": 10, "n": 100, "router_n0": 10, "router_n": 100}
    extra["subset"] = {"start": 0, "skip": 1, "max_images": None}
    write_metrics(summarize_dual(rows, sigmas=SIGMAS, router_sigma=1.0, cap=2.0, extra=extra), folder / "metrics.json")


def test_each_variant_over_its_seeds_paired_with_the_paper_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for k, sigma in enumerate(SIGMAS):
        (tmp_path / f"expert_sigma{sigma}").mkdir()
        rows = [certified(idx, *EXPERTS[idx][k], sigma) for idx in EXPERTS]
        write_record(tmp_path / f"expert_sigma{sigma}" / "certify.tsv", rows)
    dual_run(tmp_path / "paper" / "seed0" / "dual_rs", {0: (0, 2.0), 1: (0, 2.0)})
    dual_run(tmp_path / "paper" / "seed1" / "dual_rs", {0: (1, 0.5), 1: (1, 2.0)})
    dual_run(tmp_path / "hard" / "seed0" / "dual_rs", {0: (1, 2.0), 1: (1, 2.0)})
    experiment_script("embedded_mnist_dual_rs/ablation").main([str(tmp_path)])
    lines = {line.split("|")[1].strip(): line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")}
    paper = [cell.strip() for cell in lines["paper"].strip("|").split("|")]
    hard = [cell.strip() for cell in lines["hard"].strip("|").split("|")]
    # ACR 0.2 and 0.55: mean 0.375, sd |0.55 - 0.2| / sqrt(2) = 0.247; R_sigma binds on 1 of seed 1's, 0 of seed 0's
    assert paper[1:3] == ["2", "0.375 ± 0.247"]
    assert paper[9] == "0.5"
    assert paper[10:12] == ["50%", "50%"]  # half the images to each expert, over the two seeds
    # hard against the seed-averaged paper scores (0.45, 0.3): differences 0.35 and 0.3, mean +0.325
    assert hard[1:3] == ["1", "0.700 ± nan"]
    assert hard[3].startswith("+0.325 [")
