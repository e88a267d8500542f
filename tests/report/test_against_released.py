"""``python -m rsbench.report --against-released``: each row paired image by image with the authors' released run.

The runs here are written with rsbench's own writers from the authors' Fashion-MNIST Gaussian log itself (so the
expected differences are known by construction): the log against itself differs by exactly nothing, and a copy
whose correct radii all grow by 0.1 differs by 0.1 times the share of correct images.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import norm

from rsbench.certify.pipeline.records import CertificationRow, write_record
from rsbench.certify.pipeline.subset import indices_digest
from rsbench.certify.pipeline.summary import summarize, write_metrics
from rsbench.published.catalogue import rates_trained_with, released_logs, training_curve
from rsbench.report.__main__ import main

SIGMA = 0.25
EVERY_20TH = list(range(0, 10_000, 20))


def authors_records(indices: Sequence[int]) -> pd.DataFrame:
    (log,) = released_logs(dataset="fashion_mnist", method="gaussian", sigma=SIGMA)
    return log.read().records.set_index("idx").loc[list(indices)].reset_index()


def write_run(
    folder: Path, records: pd.DataFrame, *, seed: int = 0, dataset: str = "fashion_mnist", n: int = 100_000
) -> Path:
    """A finished run folder as rsbench writes it, certifying exactly ``records`` (n estimation samples, all votes
    for the prediction, alpha = 0.001; pA_lower the bound each radius needs). Radii above the authors' (whose cap is
    0.953 at n = 100,000) need a larger n: 10^7 certifies up to 1.21."""
    rows = [
        CertificationRow(
            idx=int(r.idx),
            label=int(r.label),
            predict=int(r.predict),
            radius=float(r.radius),
            correct=bool(r.correct),
            time=0.1,
            count=n,
            n=n,
            pA_lower=float(norm.cdf(r.radius / SIGMA)) if r.predict >= 0 else 0.4,
            sigma=SIGMA,
        )
        for r in records.itertuples()
    ]
    folder.mkdir(parents=True)
    write_record(folder / "certify.tsv", rows)
    indices = [row.idx for row in rows]
    subset = {"start": 0, "skip": 20, "test_size": 10_000, "digest": indices_digest(indices), "indices": indices}
    meta = {"method": "gaussian", "dataset": dataset, "arch": "lenet", "seed": seed, "mode": "standard"}
    summary = summarize(rows, sigma=SIGMA, n0=100, n=n, alpha=0.001, extra={**meta, "subset": subset})
    summary["hparams"] = {}
    write_metrics(summary, folder / "metrics.json")
    (folder / ".hydra").mkdir()
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["method=gaussian", f"seed={seed}"]))
    config = {"seed": seed, "trainer": {"max_epochs": 90}, "dataset": {"family": "mnist"}}  # as conf/dataset composes
    (folder / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


def against_released(tmp_path: Path, *runs: Path) -> pd.DataFrame:
    main([*map(str, runs), "--against-released", "--radii", "0", "0.5", "--out", str(tmp_path / "r"), "--no-plots"])
    return pd.read_csv(tmp_path / "r" / "released.csv")


def test_the_authors_own_run_against_itself_differs_by_nothing(tmp_path: Path) -> None:
    line = against_released(tmp_path, write_run(tmp_path / "run", authors_records(EVERY_20TH))).iloc[0]
    assert str(line["images"]) == "500"
    assert line["reference"] == "alinlab/smoothing-catrs@d4bc576 data/fmnist/noise_0.25/cohen/noise_0.25.tsv"
    assert (line["d_acr"], line["d_acr_low"], line["d_acr_high"]) == (0.0, 0.0, 0.0)  # identical scores: exact
    assert line["same_prediction"] == 1.0
    assert line["radius_correlation"] == pytest.approx(1.0, abs=1e-12)  # floating-point rounding of corrcoef
    assert line["score_correlation"] == pytest.approx(1.0, abs=1e-12)
    assert line["verdict"].startswith("within")
    assert line["acr_released_all"] == pytest.approx(0.670, abs=5e-4)  # the table's number, all 10,000 images


def test_a_shift_of_every_correct_radius_is_found_with_its_size_and_direction(tmp_path: Path) -> None:
    records = authors_records(EVERY_20TH)
    shifted = records.assign(radius=np.where(records["correct"], records["radius"] + 0.1, records["radius"]))
    line = against_released(tmp_path, write_run(tmp_path / "run", shifted, n=10**7)).iloc[0]
    share = float(records["correct"].mean())
    assert line["d_acr"] == pytest.approx(0.1 * share, rel=1e-9)  # float sums of 500 values
    assert line["d_acr_low"] > 0  # a constant-on-correct-images shift is far outside any interval around 0
    assert line["verdict"] == "rsbench above"
    assert line["d_acc@0"] == 0.0  # the same images are correct: certified accuracy at 0 is unchanged


def test_radii_of_wrong_answers_move_the_radius_correlation_but_not_the_score_correlation(tmp_path: Path) -> None:
    """A model certifying its wrong predictions at 1.0 instead of the authors' radii: its ACR and its scores (correct
    x radius) are the authors', so 'score r' is 1 and ΔACR 0, while 'radius r', counting wrong answers' radii, drops."""
    records = authors_records(EVERY_20TH)
    wrong = (records["predict"] >= 0) & ~records["correct"].astype(bool)
    assert wrong.sum() > 10  # the authors' Gaussian at sigma 0.25: 43 of the 500 images
    line = against_released(
        tmp_path, write_run(tmp_path / "run", records.assign(radius=records["radius"].where(~wrong, 1.0)), n=10**7)
    ).iloc[0]
    assert line["score_correlation"] == pytest.approx(1.0, abs=1e-12)  # the same scores: corrcoef rounding only
    assert line["d_acr"] == 0.0  # the same scores, subtracted image by image: exact
    assert line["radius_correlation"] < 0.95  # 1.0 is above every correct radius (the authors' cap is 0.953)


def test_seeds_give_the_spread_of_their_differences_beside_the_interval_over_images(tmp_path: Path) -> None:
    records = authors_records(EVERY_20TH)
    runs = [
        write_run(
            tmp_path / f"seed{s}",
            records.assign(radius=np.where(records["correct"], records["radius"] + d, 0)),
            seed=s,
            n=10**7,
        )
        for s, d in ((0, 0.0), (1, 0.2))
    ]
    line = against_released(tmp_path, *runs).iloc[0]
    share = float(records["correct"].mean())
    # per-seed ΔACR: 0 and 0.2 * share (radius of wrong images is 0 either way): sd = 0.2 * share / sqrt(2)
    assert line["d_acr_seed_sd"] == pytest.approx(0.2 * share / np.sqrt(2), rel=1e-9)
    assert line["d_acr"] == pytest.approx(0.1 * share, rel=1e-9)


def test_images_the_log_lacks_are_said_and_left_out(tmp_path: Path) -> None:
    records = authors_records(EVERY_20TH[:10])
    extra = records.iloc[:2].assign(idx=[10_000, 10_001])  # indices past the authors' 10,000 test images
    line = against_released(tmp_path, write_run(tmp_path / "run", pd.concat([records, extra]))).iloc[0]
    assert line["images"] == "10 of 12"


def test_a_row_of_other_images_has_no_released_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The embedded MNIST subset's test images are not MNIST's: nothing is paired, and the report says so."""
    run = write_run(tmp_path / "run", authors_records(EVERY_20TH[:10]), dataset="mnist_embedded")
    main([str(run), "--against-released", "--out", str(tmp_path / "r"), "--no-plots"])
    assert not (tmp_path / "r" / "released.csv").exists()
    assert "no row has a released log" in (tmp_path / "r" / "report.md").read_text()


def test_a_fashion_mnist_run_stands_beside_fashion_mnist_numbers_not_mnist_ones(tmp_path: Path) -> None:
    """dataset.family=mnist says whose method hyperparameters a Fashion-MNIST run uses, not which table it is in."""
    run = write_run(tmp_path / "run", authors_records(EVERY_20TH))
    main([str(run), "--radii", "0", "0.5", "--out", str(tmp_path / "r"), "--no-plots"])
    published = pd.read_csv(tmp_path / "r" / "published.csv")
    assert set(published["source"]) == {"catrs2023_logs_fmnist"}


def test_a_run_trained_as_the_authors_log_says_tracks_it_exactly_and_one_without_a_log_says_so(
    tmp_path: Path,
) -> None:
    """A run whose CSV log is the authors' own training log (train accuracy and loss per epoch) differs by 0."""
    theirs = training_curve("gaussian", "fashion_mnist", SIGMA)
    assert theirs is not None
    run = write_run(tmp_path / "run", authors_records(EVERY_20TH))
    log = pd.DataFrame(
        {
            "epoch": theirs["epoch"],
            "step": theirs["epoch"] * 235 + 234,
            "train/acc": theirs["train_acc"] / 100,
            "train/loss_epoch": theirs["train_loss"],
            "train/lr": rates_trained_with(theirs["lr"].tolist()),
        }
    )
    test = pd.DataFrame({"epoch": [0], "step": [0], "test/acc_noisy": [theirs["test_acc"].iloc[-1] / 100]})
    (run / "logs").mkdir()
    pd.concat([log, test]).to_csv(run / "logs" / "training_metrics.csv", index=False)
    line = against_released(tmp_path, run).iloc[0]
    assert line["epochs_compared"] == 90
    assert line["d_train_acc_mean"] == pytest.approx(0.0, abs=1e-9)  # x/100*100: float rounding only
    assert line["d_train_acc_max_after_first"] == pytest.approx(0.0, abs=1e-9)
    assert line["test_acc"] == pytest.approx(line["test_acc_released"], abs=1e-9)
    assert line["noisy test acc"] == "88.2 / 88.2"
    assert (line["lr schedule"], line["lr_epochs_differing"]) == ("same (90 epochs)", 0)
    report = (tmp_path / "r" / "report.md").read_text().split("## Against the authors' released runs")[1]
    header = [cell.strip() for cell in report.strip().splitlines()[0].strip("|").split("|")]
    table = [line for line in report.strip().splitlines() if line.startswith("|")]
    assert {len(line.strip("|").split("|")) for line in table} == {len(header)}  # no "|" inside a cell
    last = ["same prediction", "radius r", "score r", "Δ train acc (epochs)", "Δ train loss", "noisy test acc"]
    assert header[-7:] == [*last, "lr schedule"]  # after every radius column
    assert line["d_train_loss_mean"] == pytest.approx(0.0, abs=1e-12)  # the same floats on both sides
    assert line["Δ train loss"] == "mean +0.000, at most 0.000 after the first"

    bare = against_released(tmp_path / "bare", write_run(tmp_path / "bare_run", authors_records(EVERY_20TH)))
    assert bare.iloc[0]["Δ train acc (epochs)"] == "-"


def test_the_published_line_of_a_subset_run_says_what_the_selection_alone_moves(tmp_path: Path) -> None:
    """The published ACR (0.670 on all 10,000 images) was recomputed from the same released log: beside a run on the
    every-20th subset, the published table says what that log gives on those 500 images, so a gap that is only the
    subset's selection is not read as the model's."""
    run = write_run(tmp_path / "run", authors_records(EVERY_20TH))
    main([str(run), "--published-source", "catrs2023_logs_fmnist", "--out", str(tmp_path / "r"), "--no-plots"])
    line = pd.read_csv(tmp_path / "r" / "published.csv").iloc[0]
    same, everywhere = (
        float(np.mean(np.where(r["correct"] == 1, r["radius"], 0.0)))
        for r in (authors_records(EVERY_20TH), authors_records(range(10_000)))
    )
    assert line["acr_published_same_images"] == pytest.approx(same, rel=1e-12)  # the same mean of the same floats
    assert line["acr_published_same_images"] == pytest.approx(line["acr"], rel=1e-12)  # the run is the log itself
    assert (
        f"the released run's ACR on these 500 images is {same:.3f} ({everywhere:.3f} on its 10,000): "
        f"the selection alone moves ACR by {same - everywhere:+.3f}"
    ) in line["differs"]


def test_a_run_on_all_the_logs_images_gets_no_selection_note(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", authors_records(range(10_000)))
    main([str(run), "--published-source", "catrs2023_logs_fmnist", "--out", str(tmp_path / "r"), "--no-plots"])
    line = pd.read_csv(tmp_path / "r" / "published.csv").iloc[0]
    assert pd.isna(line["acr_published_same_images"])
    assert "selection" not in line["differs"]


def test_several_rows_get_their_p_adjusted_for_multiplicity_by_holms_step_down(tmp_path: Path) -> None:
    """Three rows of other settings against the same released run: Holm's adjusted p, computed here by hand from the
    three plain p-values, beside each (sorted p times k, k - 1, 1 with the running maximum, capped at 1)."""
    records = authors_records(EVERY_20TH)
    rng = np.random.default_rng(0)
    runs = []
    for i, spread in enumerate((0.0, 0.02, 0.05)):  # 0: identical (p = 1); then noisier radii: smaller p, or not
        jitter = rng.normal(0.01, spread, len(records)) if spread else 0.0
        jittered = np.maximum(records["radius"] + jitter, 0.0)  # (no radius is negative)
        noisy = records.assign(radius=np.where(records["correct"], jittered, records["radius"]))
        run = write_run(tmp_path / f"run{i}", noisy, n=10**7)
        overrides = ["method=gaussian", "seed=0", f"trainer.max_epochs={90 + i}"]  # three settings: three rows
        (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
        runs.append(run)
    lines = against_released(tmp_path, *runs)
    assert len(lines) == 3
    plain = lines["p_acr"].to_numpy()
    order = np.argsort(plain)
    expected = np.empty(3)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * plain[i]))
        expected[i] = running
    assert lines["p_acr_holm"].to_numpy() == pytest.approx(expected, rel=1e-12)  # the same arithmetic on the same p
    assert (lines["p_acr_holm"] >= lines["p_acr"]).all()
    report = (tmp_path / "r" / "report.md").read_text()
    assert "'Holm p': the ΔACR p adjusted for the 3 rows compared" in report
    header = next(line for line in report.splitlines() if "| released run" in line)
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[columns.index("p") + 1] == "Holm p"


def test_a_single_row_has_no_multiplicity_to_adjust_for(tmp_path: Path) -> None:
    lines = against_released(tmp_path, write_run(tmp_path / "run", authors_records(EVERY_20TH)))
    assert "p_acr_holm" not in lines
    assert "Holm p" not in (tmp_path / "r" / "report.md").read_text()
