"""``rsbench.report`` and ``rsbench.leaderboard`` read dual randomized-smoothing runs, with alpha + beta beside them.

A dual run's ``certify.tsv`` is rsbench's row type with the router's and the expert's columns; both tools used to
refuse it. Here a hand-made run of four images (radii and correctness chosen by hand, so ACR is their mean of
correct x radius: 0.25 x (0.3 + 0.5 + 0 + 0) = 0.2, exact in binary to 1e-12) and the committed Fashion-MNIST dual run
(written before the one row type) are read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rsbench.certify.algorithm.dual import combine
from rsbench.certify.algorithm.smooth import Certificate
from rsbench.certify.pipeline.dual_records import DUAL_RECORD, dual_row, summarize_dual
from rsbench.certify.pipeline.records import CertificationRow, RecordWriter, write_record
from rsbench.certify.pipeline.summary import write_metrics
from rsbench.leaderboard.entries import run_entries
from rsbench.report.load import read_run
from tests.helpers import ROOT
from tests.run_folders import run_report

SIGMAS = (0.25, 0.5)
COMMITTED = ROOT / "experiments" / "fashion_mnist_dual_rs" / "runs" / "dual_rs"
EXACT = 1e-12  # ACR of four radii written at full precision: only the order of summation differs


def cert(prediction: int, radius: float, sigma: float) -> Certificate:
    """A certificate whose pA_lower certifies ``radius`` at ``sigma`` (as a real one's does), 100 of 100 votes."""
    from statistics import NormalDist

    lower = NormalDist().cdf(radius / sigma) if prediction >= 0 else 0.3
    return Certificate(prediction, radius, lower, 100, max(prediction, 0), 10, 100, 0.001, sigma, 0.1)


def dual_run(folder: Path, expert_records: list[str] | None = None) -> Path:
    """Four images: two certified (0.3 by the router's radius, 0.5), one wrong, one the router abstained on."""
    routes = [(cert(1, 0.3, 1.0), cert(3, 0.6, 0.5)), (cert(1, 0.9, 1.0), cert(3, 0.5, 0.5))]
    routes += [(cert(1, 0.9, 1.0), cert(5, 0.4, 0.5)), (cert(-1, 0.0, 1.0), None)]
    rows = [dual_row(i, 3, combine(r, c, SIGMAS, 0.001, 0.002)) for i, (r, c) in enumerate(routes)]
    folder.mkdir(parents=True)
    with RecordWriter(folder / "certify.tsv", DUAL_RECORD) as writer:
        for row in rows:
            writer.append(row)
    extra = {"dataset": "mnist_embedded", "arch": "lenet", "mode": "standard", "n0": 10, "n": 100}
    extra["subset"] = {"start": 0, "skip": 1, "max_images": 4, "test_size": 4, "indices": [0, 1, 2, 3]}
    extra["expert_records"] = expert_records
    write_metrics(summarize_dual(rows, sigmas=SIGMAS, router_sigma=1.0, cap=1.0, extra=extra), folder / "metrics.json")
    return folder


def test_a_dual_run_is_a_result_at_alpha_plus_beta(tmp_path: Path) -> None:
    (result,) = read_run(dual_run(tmp_path / "dual"))
    assert result.method == "dual_rs"
    assert "alpha + beta = 0.001 + 0.002" in result.variant
    assert "experts at sigma 0.25, 0.5, router at 1" in result.variant
    assert (result.beta, result.protocol["alpha"], result.protocol["beta"]) == (0.002, 0.001, 0.002)
    assert result.sigma == 0.5  # the largest expert's: the table it stands in
    assert result.scores.mean() == pytest.approx(0.2, abs=EXACT)


def test_the_report_shows_alpha_plus_beta_beside_the_radius(tmp_path: Path) -> None:
    frame = run_report(tmp_path, str(dual_run(tmp_path / "dual")))
    assert frame["acr"].tolist() == pytest.approx([0.2], abs=EXACT)
    assert (frame["alpha"].tolist(), frame["beta"].tolist()) == ([0.001], [0.002])
    report = (tmp_path / "report" / "report.md").read_text()
    assert "alpha (+ beta)=0.001 + 0.002" in report  # one row: the caption says it


def test_the_committed_dual_run_reads_as_its_metrics_say() -> None:
    """The Fashion-MNIST study's record, written before the one row type (no count column), read and checked."""
    (result,) = read_run(COMMITTED)
    metrics = json.loads((COMMITTED / "metrics.json").read_text())
    assert result.scores.mean() == pytest.approx(metrics["acr"], abs=1e-9)  # the validator's own tolerance
    assert len(result.records) == metrics["num_images"] == 500
    assert "alpha + beta = 0.001 + 0.001" in result.variant


def test_the_leaderboard_lists_a_dual_run_with_alpha_plus_beta(tmp_path: Path) -> None:
    (entry,) = run_entries([dual_run(tmp_path / "dual")])
    assert entry.kind == "run"
    assert "alpha + beta = 0.001 + 0.002" in entry.label
    assert entry.row is not None
    assert float(pd.Series(entry.row.first.scores).mean()) == pytest.approx(0.2, abs=EXACT)


# each expert's own (predict, radius) on the four images (label 3); expert 1's are the routed ones above
EXPERT_ROWS = ([(3, 0.2), (3, 0.7), (3, 0.1), (2, 0.4)], [(3, 0.6), (3, 0.5), (5, 0.4), (3, 0.3)])


def expert_record(folder: Path, k: int) -> str:
    """Expert k's certify.tsv over the four images (pA_lower certifying each radius at its sigma)."""
    from statistics import NormalDist

    rows = [
        CertificationRow(i, 3, p, r, p == 3, 0.1, 100, 100, NormalDist().cdf(r / SIGMAS[k]), SIGMAS[k])
        for i, (p, r) in enumerate(EXPERT_ROWS[k])
    ]
    folder.mkdir(parents=True)
    write_record(folder / "certify.tsv", rows)
    return str(folder)


def test_the_report_splits_a_dual_run_with_diagnostics_labelled_not_certificates(tmp_path: Path) -> None:
    """R_sigma binding, the routed expert alone and oracle routing: in the report, each said to be no certificate."""
    records = [expert_record(tmp_path / f"expert{k}", k) for k in range(2)]
    run_report(tmp_path, str(dual_run(tmp_path / "dual", records)), "--radii", "0", "0.5")
    table = pd.read_csv(tmp_path / "report" / "dual.csv")
    by = {line["numbers"]: line for _, line in table.iterrows()}
    assert set(by) == {
        "dual RS (certificates)",
        "routed expert alone (NOT certificates)",
        "oracle routing (NOT certificates)",
    }
    assert set(table["R_sigma binds"]) == {"1 of 2"}  # image 0: the router's 0.3 under the expert's 0.6
    # ACR over four images, shown to 3 decimals: dual (0.3 + 0.5) / 4; routed alone (0.6 + 0.5) / 4; oracle, the
    # best correct radius of each image (0.6, 0.7, 0.1, 0.3) / 4
    assert [by[k]["ACR"] for k in sorted(by)] == pytest.approx([0.2, 0.425, 0.275], abs=5e-4)
    assert by["oracle routing (NOT certificates)"]["acc@0.5"] == pytest.approx(50.0, abs=0.05)  # images 0 and 1
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Dual RS diagnostics (NOT certificates)" in report


def test_without_expert_records_the_report_says_oracle_routing_needs_them(tmp_path: Path) -> None:
    run_report(tmp_path, str(dual_run(tmp_path / "dual")))
    numbers = pd.read_csv(tmp_path / "report" / "dual.csv")["numbers"].tolist()
    assert "oracle routing: needs the run's expert_records" in numbers
