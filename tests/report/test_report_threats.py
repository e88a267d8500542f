"""The report with threat models and attacks: every row names its norm and noise, rows of different norms are never
merged, compared or paired, and attacked runs get a table of empirical beside certified accuracy.

Run folders are written with rsbench's writers (tests/run_folders.py's ``make_run``, the attack's own records).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rsbench.attack.evaluate import contradicts
from rsbench.attack.records import AttackRow, append_image
from rsbench.certify.pipeline.records import read_rows
from rsbench.report.__main__ import main
from tests.run_folders import make_run, radii_of, run_report

L1 = {"norm": "l1", "noise": "laplace"}


def test_rows_name_their_threat_model_and_norms_are_never_merged(tmp_path: Path) -> None:
    radii = radii_of(np.random.default_rng(0))
    make_run(tmp_path / "l2", radii)
    make_run(tmp_path / "l1", radii, extra=L1)  # the same method, sigma, seed and overrides: only the norm differs
    frame = run_report(tmp_path, str(tmp_path), "--no-published")
    assert sorted(zip(frame["norm"], frame["noise"], strict=True)) == [("l1", "laplace"), ("l2", "gaussian")]
    assert set(frame["seeds"]) == {1}  # two rows, not two seeds of one
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| norm " in markdown  # shown as columns where rows differ


def test_a_report_of_one_threat_model_names_it_in_the_caption(tmp_path: Path) -> None:
    make_run(tmp_path / "a", radii_of(np.random.default_rng(1)), extra=L1)
    run_report(tmp_path, str(tmp_path), "--no-published")
    assert "norm=l1, noise=laplace" in (tmp_path / "report" / "report.md").read_text()


def test_rows_of_different_norms_are_never_paired(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    make_run(tmp_path / "gaussian", radii_of(rng))
    make_run(tmp_path / "other_l1", radii_of(rng), method="other", extra=L1)
    make_run(tmp_path / "uniform_l2", radii_of(rng), method="other", extra={"norm": "l2", "noise": "uniform"})
    run_report(tmp_path, str(tmp_path), "--baseline", str(tmp_path / "gaussian"), "--no-published")
    paired = pd.read_csv(tmp_path / "report" / "paired.csv")
    l1 = paired[paired["row"] == 0].iloc[0]  # rows sort by threat model: l1 first
    assert "certifies l2 (gaussian noise), not l1 (laplace noise)" in l1["note"]
    assert np.isnan(l1.get("d_acr", np.nan))
    assert paired["d_acr"].notna().sum() == 1  # the l2 row of another noise is paired (Yang et al.'s comparison)
    run_report(tmp_path, str(tmp_path), "--baseline", "gaussian", "--no-published")  # by method: same threat only
    by_method = pd.read_csv(tmp_path / "report" / "paired.csv")
    assert "d_acr" not in by_method or by_method["d_acr"].isna().all()
    assert by_method["note"].str.contains("threat model").all()


def test_published_numbers_are_only_beside_gaussian_l2_rows(tmp_path: Path) -> None:
    radii = radii_of(np.random.default_rng(3))
    make_run(tmp_path / "l2", radii)
    make_run(tmp_path / "linf", radii / 28, extra={"norm": "linf", "noise": "gaussian"})
    main([str(tmp_path), "--out", str(tmp_path / "report"), "--no-plots"])
    published = pd.read_csv(tmp_path / "report" / "published.csv")
    assert len(published) > 0
    assert published["acr"].to_numpy() == pytest.approx(np.full(len(published), np.mean(radii)))  # the l2 row only


def attacked_run(folder: Path, seed: int, broken_at: dict[int, float]) -> Path:
    """A certified run with an attack.tsv: image i is broken at ``broken_at[i]`` (robust at every radius if absent)."""
    radii = [0.9, 0.7, 0.4, 0.0]  # image 3 is wrong
    make_run(folder, radii, seed=seed, overrides=["attack=smoothadv"])
    certified = read_rows(folder / "certify.tsv")
    grid = [0.0, 0.25, 0.5, 0.75]
    for cert in certified:
        rows = []
        for radius in grid:
            correct = cert.correct and radius < broken_at.get(cert.idx, np.inf)
            predict = cert.label if correct else cert.label + 1
            contradiction = contradicts(predict, radius, cert)  # image 0, broken at 0.75 < its radius 0.9
            rows.append(
                AttackRow(
                    cert.idx,
                    cert.label,
                    radius,
                    predict,
                    correct,
                    radius,
                    cert.predict,
                    cert.radius,
                    contradiction,
                    1.0,
                )
            )
            if not correct:
                break
        append_image(folder, rows)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["attack"] = {
        "name": "smoothadv",
        "num_steps": 20,
        "num_noise": 32,
        "n": 1000,
        "alpha": 0.001,
        "radii": grid,
        "contradictions": 0,
        "contradictions_expected_at_most": 0.01,
        "cost_ratio": 2.0,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


def test_attacked_runs_get_empirical_beside_certified_accuracy(tmp_path: Path) -> None:
    attacked_run(tmp_path / "s0", 0, {0: 0.75, 1: 0.5})
    attacked_run(tmp_path / "s1", 1, {1: 0.75})
    main([str(tmp_path), "--out", str(tmp_path / "report"), "--no-plots", "--no-published"])
    table = pd.read_csv(tmp_path / "report" / "attack.csv").set_index("r")
    # r = 0.5: seed 0 keeps images 0 and 2 (1 broke at 0.5), seed 1 images 0, 1, 2; certified: 0.9 and 0.7 >= 0.5
    assert table.at[0.5, "empirical"].startswith("62.5 ± 17.7")
    assert table.at[0.5, "certified"].startswith("50.0 ± 0.0")
    assert table.at[0.0, "gap"].startswith("+0.0")
    assert table.at[0.5, "gap"].startswith("+12.5")
    assert table.at[0.75, "empirical"].startswith("37.5")  # seed 0: image 2 only (0 broken at 0.75); seed 1: 0, 2
    assert set(table["cost (x certification)"]) == {2.0}
    assert "Empirical robust accuracy beside certified accuracy" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.parametrize("missing", ["attack.tsv"])
def test_a_row_with_an_unattacked_seed_has_no_attack_line(tmp_path: Path, missing: str) -> None:
    attacked_run(tmp_path / "s0", 0, {})
    (attacked_run(tmp_path / "s1", 1, {}) / missing).unlink()
    main([str(tmp_path), "--out", str(tmp_path / "report"), "--no-plots", "--no-published"])
    assert not (tmp_path / "report" / "attack.csv").exists()
