"""``experiments/fashion_mnist_dual_rs/compare.py`` on four hand-made images whose every column is counted by hand.

The records are written with rsbench's own writers (``write_record`` for the experts, ``RecordWriter`` with the
dual header and ``summarize_dual`` for the dual certification), so the script reads what a real run leaves. Every
column is a fraction of four images, so one image more or less moves it by 0.25: the values are compared within 1e-9
(``FRACTION``), far below that step and far above any rounding of a mean of four booleans. No radius sits at a
radius asked for.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist

import pytest

from rsbench.certify.pipeline.dual_records import DUAL_RECORD, summarize_dual
from rsbench.certify.pipeline.records import CertificationRow, RecordWriter, write_record
from rsbench.certify.pipeline.summary import write_metrics
from rsbench.report.stats import mcnemar_test, paired_difference

pytestmark = pytest.mark.study

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "fashion_mnist_dual_rs" / "compare.py"
SIGMAS = (0.25, 0.5, 1.0)
FRACTION = 1e-9  # the tolerance on a fraction of four images (see the module docstring)
# test image (every 20th) -> (label, each expert's (predict, radius)); image 40 is misclassified by every expert
EXPERTS = {
    0: (0, [(0, 0.5), (0, 0.3), (0, 0.2)]),
    20: (0, [(0, 0.1), (0, 0.1), (0, 1.5)]),
    40: (0, [(1, 0.4), (1, 0.4), (1, 0.4)]),
    60: (0, [(0, 0.2), (0, 1.0), (0, 0.8)]),
}
# image -> (routed expert, the router's radius): the router's radius binds on image 0 only
ROUTES = {0: (0, 0.1), 20: (2, 2.0), 40: (1, 0.9), 60: (2, 1.0)}


def expert_run(folder: Path, k: int) -> None:
    """Expert k's certify.tsv over the four images."""
    rows = []
    for idx, (label, experts) in EXPERTS.items():
        predict, radius = experts[k]
        rows.append(
            CertificationRow(
                idx=idx,
                label=label,
                predict=predict,
                radius=radius,
                correct=predict == label,
                time=0.1,
                count=100,
                n=100,
                pA_lower=NormalDist().cdf(radius / SIGMAS[k]),  # the bound that certifies the radius
                sigma=SIGMAS[k],
            )
        )
    folder.mkdir(parents=True)
    write_record(folder / "certify.tsv", rows)


def dual_run(folder: Path) -> None:
    """The dual certify.tsv and metrics.json: radius min(router, routed expert), correct where the expert is."""
    rows = []
    for idx, (label, experts) in EXPERTS.items():
        k, router_radius = ROUTES[idx]
        predict, expert_radius = experts[k]
        rows.append(
            CertificationRow(
                idx=idx,
                label=label,
                predict=predict,
                radius=min(router_radius, expert_radius),
                correct=predict == label,
                time=0.1,
                count=100,
                n=100,
                pA_lower=NormalDist().cdf(expert_radius / SIGMAS[k]),  # the routed expert's bound
                sigma=SIGMAS[k],
                expert=k,
                router_radius=router_radius,
                router_pA_lower=0.9,
                router_n=100,
                expert_predict=predict,
                expert_radius=expert_radius,
                alpha=0.001,
                beta=0.001,
            )
        )
    folder.mkdir(parents=True)
    with RecordWriter(folder / "certify.tsv", DUAL_RECORD) as writer:
        for row in rows:
            writer.append(row)
    extra = {"dataset": "mnist_embedded", "mode": "standard", "n0": 10, "n": 100, "router_n0": 10, "router_n": 100}
    extra["subset"] = {"start": 0, "skip": 20, "max_images": None}
    summary = summarize_dual(rows, sigmas=SIGMAS, router_sigma=1.0, cap=2.5, extra=extra)
    write_metrics(summary, folder / "metrics.json")


def test_the_diagnostic_columns_separate_the_router_certificate_from_its_choice(tmp_path: Path) -> None:
    for k, sigma in enumerate(SIGMAS):
        expert_run(tmp_path / "runs" / f"expert_sigma{sigma}", k)
    dual_run(tmp_path / "runs" / "dual_rs")
    subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--radii", "0.25", "0.9"], check=True, capture_output=True
    )
    table = {row["radius"]: row for row in csv.DictReader((tmp_path / "report" / "per_radius.csv").open())}
    # r = 0.25: dual certifies images 20 (1.5) and 60 (0.8), not 0 (the router's 0.1 binds); without the router's
    # radius image 0 counts too; oracle routing: images 0, 20 and 60; the best single expert (sigma 0.5 or 1.0): two
    at_quarter = table["0.25"]
    assert float(at_quarter["dual_rs"]) == pytest.approx(0.5, abs=FRACTION)
    assert float(at_quarter["routed_expert_only"]) == pytest.approx(0.75, abs=FRACTION)
    assert float(at_quarter["oracle_routing"]) == pytest.approx(0.75, abs=FRACTION)
    assert float(at_quarter["envelope"]) == pytest.approx(0.5, abs=FRACTION)
    # r = 0.9: dual and routed only image 20; oracle routing adds image 60 through sigma 0.5 (1.0), not routed there
    at_nine = table["0.9"]
    assert float(at_nine["dual_rs"]) == pytest.approx(0.25, abs=FRACTION)
    assert float(at_nine["routed_expert_only"]) == pytest.approx(0.25, abs=FRACTION)
    assert float(at_nine["oracle_routing"]) == pytest.approx(0.5, abs=FRACTION)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "binds) on 1 of the 3 images" in report
    assert "4 test images (every 20th from 0)" in report


def test_another_dual_run_and_expert_folder_report_where_asked(tmp_path: Path) -> None:
    for k, sigma in enumerate(SIGMAS):
        expert_run(tmp_path / "runs" / "round1" / f"expert_sigma{sigma}", k)
    dual_run(tmp_path / "runs" / "round1" / "dual_rs")
    out = tmp_path / "report" / "round1"
    arguments = ["--dual", "round1/dual_rs", "--experts", "round1", "--out", str(out)]
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), *arguments], check=True, capture_output=True)
    assert (out / "report.md").is_file()
    assert (out / "per_radius.csv").is_file()
    assert not (tmp_path / "report" / "report.md").exists()


def test_the_paired_statistics_are_the_reports(tmp_path: Path) -> None:
    """paired.csv holds rsbench.report's paired interval and McNemar test (it used to bootstrap on its own)."""
    for k, sigma in enumerate(SIGMAS):
        expert_run(tmp_path / "runs" / f"expert_sigma{sigma}", k)
    dual_run(tmp_path / "runs" / "dual_rs")
    subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--radii", "0.25"], check=True, capture_output=True)
    table = {
        (row["radius"], row["against"]): row for row in csv.DictReader((tmp_path / "report" / "paired.csv").open())
    }
    # r = 0.25, images 0, 20, 40, 60: dual certifies 20 and 60, the sigma 0.25 expert image 0 alone
    dual, alone = [0, 1, 0, 1], [1, 0, 0, 0]
    expected, test = paired_difference(dual, alone), mcnemar_test(dual, alone)
    row = table[("0.25", "sigma=0.25")]
    # the same computation on the same four values, written with repr: within 1e-9 (FRACTION)
    assert float(row["difference"]) == pytest.approx(expected.difference, abs=FRACTION)
    assert float(row["low95"]) == pytest.approx(expected.low, abs=FRACTION)
    assert float(row["high95"]) == pytest.approx(expected.high, abs=FRACTION)
    assert float(row["mcnemar_p"]) == pytest.approx(test.p_value, abs=FRACTION)
