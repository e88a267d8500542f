"""``python -m rsbench.leaderboard``: the published entries against the papers' own tables, a run joined and paired,
the envelope and the Pareto front, the outputs, the committed pages, and bad arguments refused before torch loads."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rsbench.leaderboard.__main__ import main
from rsbench.leaderboard.board import Board, Numbers, Settings, build, envelope, numbers, pareto_front
from rsbench.leaderboard.entries import L2, Entry, published_entries
from rsbench.leaderboard.make import PAGES_COMMAND, PUBLISHED, make_boards
from rsbench.leaderboard.render import markdown
from rsbench.published.catalogue import catalogue
from rsbench.report.rows import Row
from rsbench.report.stats import Estimate

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "experiments" / "fashion_mnist_table" / "runs" / "gaussian_sigma0.25"

# Cohen et al. 2019, Table 1: approximate certified top-1 accuracy (%) on ImageNet, per sigma and l2 radius.
COHEN_TABLE_1 = {
    0.25: {0.0: 67, 0.5: 49, 1.0: 0},
    0.5: {0.0: 57, 0.5: 46, 1.0: 37, 1.5: 29, 2.0: 0},
    1.0: {0.0: 44, 0.5: 38, 1.0: 33, 1.5: 26, 2.0: 19, 2.5: 15, 3.0: 12},
}
# Their CIFAR-10 table (locuslab/smoothing analysis/latex/vary_noise_cifar10: certified accuracy, two decimals).
COHEN_CIFAR10 = {
    0.12: {0.25: 0.59, 0.5: 0.00},
    0.25: {0.25: 0.60, 0.5: 0.43, 0.75: 0.27, 1.0: 0.00},
    0.5: {0.25: 0.55, 0.5: 0.41, 0.75: 0.32, 1.0: 0.23, 1.25: 0.15, 1.5: 0.09},
    1.0: {0.25: 0.39, 0.5: 0.34, 0.75: 0.28, 1.0: 0.22, 1.25: 0.17, 1.5: 0.14},
}


def cohen_entries(dataset: str) -> dict[float, Entry]:
    """Cohen et al.'s entries of ``dataset`` (certified on test images at the sigma they were trained at)."""
    entries, _ = published_entries(dataset, sources=["cohen2019"])
    return {e.sigma: e for e in entries if e.trained_sigma == e.sigma}


def test_cohens_imagenet_rows_equal_their_table_1_to_its_rounding() -> None:
    """The leaderboard's numbers for Cohen et al.'s released ImageNet logs (not shipped: from summary.csv) round to
    every cell of their Table 1 (whole percents, so within half a point)."""
    settings = Settings(tuple(r / 2 for r in range(7)))
    cohen = cohen_entries("imagenet")
    for sigma, table in COHEN_TABLE_1.items():
        entry = cohen[sigma]
        assert entry.row is None
        assert entry.summaries
        computed = numbers(entry, settings)
        for radius, published in table.items():
            assert abs(100 * computed.accuracy[radius].value - published) <= 0.5, (sigma, radius)
    assert cohen[0.5].images == 500
    assert cohen[0.25].images == 427
    assert cohen[0.5].subset == "every 100th validation image (500)"


def test_cohens_cifar10_rows_equal_their_cifar10_table_to_its_rounding() -> None:
    settings = Settings(tuple(r / 4 for r in range(7)))
    cohen = cohen_entries("cifar10")
    for sigma, table in COHEN_CIFAR10.items():
        computed = numbers(cohen[sigma], settings)
        for radius, published in table.items():
            assert abs(computed.accuracy[radius].value - published) <= 0.005, (sigma, radius)
    assert {e.images for e in cohen.values()} == {500}


# Salman et al. 2019, analysis/radii_to_best_models (their Tables 1 and 2: the best certified accuracy per radius
# over the models of a family, and which model): a few radii of each family.
SALMAN_BEST = {
    ("cifar10", "smoothadv", ""): {0.0: 0.8731, 0.25: 0.7303, 0.5: 0.5764, 1.0: 0.3827, 1.5: 0.2906, 2.25: 0.1591},
    ("cifar10", "gaussian", ""): {0.0: 0.8317, 0.5: 0.4279, 1.0: 0.2213, 2.0: 0.0663},
    ("imagenet", "smoothadv", ""): {0.0: 0.662, 0.5: 0.562, 1.0: 0.446, 2.0: 0.282, 3.0: 0.204, 3.5: 0.174},
    ("imagenet", "gaussian", ""): {0.0: 0.656, 0.5: 0.488, 1.0: 0.39, 2.0: 0.206, 3.0: 0.108},
    ("cifar10", "smoothadv", "self-training"): {0.0: 0.8985, 0.5: 0.6344, 1.0: 0.3957, 2.25: 0.1673},
}


@pytest.mark.parametrize("family", sorted(SALMAN_BEST))
def test_salmans_shipped_logs_give_their_tables_best_accuracy_per_radius(family: tuple[str, str, str]) -> None:
    """The envelope over Salman et al.'s shipped best_models logs of a family equals their table at every radius
    checked (counts over 10,000 or 500 images, so exactly, to the 4 decimals they print)."""
    dataset, method, training = family
    logs = [
        log
        for log in catalogue(source="salman2019", dataset=dataset, duplicates=True)
        if log.method == method
        and (
            log.training.startswith("CIFAR-10 training set +")
            if training
            else "," not in log.training and "+" not in log.training
        )
    ]
    assert logs
    for radius, best in SALMAN_BEST[family].items():
        achieved = max(log.summary.certified(radius) / log.summary.images for log in logs)
        assert achieved == pytest.approx(best, abs=5e-5), radius


# SmoothMix Table 5 (Jeong et al. 2021, Appendix G): MNIST ACR, mean and sd over 5 seeds.
TABLE_5 = {
    ("jeong2020", "gaussian", 0.25): (0.9108, 0.0003),
    ("jeong2020", "gaussian", 1.0): (1.6184, 0.0021),
    ("jeong2020", "stability", 0.5): (1.5719, 0.0028),
    ("jeong2020", "smoothadv", 1.0): (1.7786, 0.0017),
    ("jeong2020", "macer", 0.5): (1.5899, 0.0069),
    ("jeong2021", "smix_1.0_8_m0/tau_1.0/num_4", 1.0): (1.7867, 0.0020),
    ("jeong2021", "smix_1.0_8_m1/tau_1.0/num_4", 1.0): (1.8169, 0.0011),
    ("jeong2021", "smix_1.0_8_m0/tau_5.0/num_4", 1.0): (1.8185, 0.0016),
    ("jeong2021", "smix_1.0_8_m1/tau_5.0/num_4", 1.0): (1.8212, 0.0013),
    ("jeong2021", "smix_1.0_4_m0/tau_1.0/num_4", 0.5): (1.6776, 0.0007),
    ("jeong2021", "smix_1.0_2_m1/tau_5.0/num_4", 0.25): (0.9332, 0.0002),
}


@pytest.mark.parametrize("key", sorted(TABLE_5))
def test_the_several_runs_of_a_setting_give_smoothmix_table_5(key: tuple[str, str, float]) -> None:
    """The baselines' five runs (jh-jeong/smoothing-consistency) and SmoothMix's runs 21-25 (jh-jeong/smoothmix; run 0
    is Table 2's single run) give Table 5's mean and sd over seeds to its 4 decimals."""
    source, what, sigma = key
    logs = [
        log
        for log in catalogue(source=source, dataset="mnist")
        if log.sigma == sigma and (log.method == what if source == "jeong2020" else log.setting == what)
    ]
    if source == "jeong2021":
        logs = [log for log in logs if log.seed in ("21", "22", "23", "24", "25")]
    values = [log.summary.acr for log in logs]
    assert len(values) == 5
    mean, sd = TABLE_5[key]
    assert np.mean(values) == pytest.approx(mean, abs=5e-5)
    assert np.std(values, ddof=1) == pytest.approx(sd, abs=5e-5)


def test_a_setting_with_several_runs_shows_their_spread_from_records_or_numbers_alike() -> None:
    logs = [
        log for log in catalogue(source="jeong2020", dataset="mnist") if log.method == "gaussian" and log.sigma == 0.25
    ]
    settings = Settings((0.0, 0.5))
    base = dict(
        name="g", label="Gaussian", kind="published", source="jeong2020", source_text="J", method="gaussian",
        dataset="mnist", arch="lenet", sigma=0.25, trained_sigma=0.25, threat=L2, training="", subset="", images=10000,
        n0=100, n=100000, alpha=0.001, logs=tuple(logs),
    )  # fmt: skip
    from_numbers = numbers(Entry(**base, summaries=tuple(log.summary for log in logs)), settings)
    from_records = numbers(Entry(**base, row=Row(tuple(log.read() for log in logs), ())), settings)
    assert len(from_numbers.acr_runs) == len(from_records.acr_runs) == 5
    assert from_numbers.acr_sd == pytest.approx(0.0003, abs=5e-5)  # SmoothMix Table 5: 0.9108 +- 0.0003
    assert from_numbers.acr_sd == pytest.approx(from_records.acr_sd, abs=1e-6)
    # Several runs: the records' interval is over the run-averaged scores, whose sd is below the runs' mean sd, which
    # is all summary.csv keeps: the interval from the numbers is the wider, by about 1e-4 here.
    assert from_numbers.acr.low < from_records.acr.low < from_records.acr.high < from_numbers.acr.high
    one = {**base, "logs": tuple(logs[:1])}
    alone = numbers(Entry(**one, summaries=(logs[0].summary,)), settings)
    read = numbers(Entry(**one, row=Row((logs[0].read(),), ())), settings)
    # One run: the t interval from summary.csv's mean and sd is the one over the records (sd kept to 6 decimals).
    assert alone.acr.low == pytest.approx(read.acr.low, abs=1e-6)
    assert alone.acr.high == pytest.approx(read.acr.high, abs=1e-6)
    for radius in settings.radii:
        assert from_numbers.accuracy[radius].low == pytest.approx(from_records.accuracy[radius].low, abs=1e-12)
        assert from_numbers.accuracy_sd[radius] == pytest.approx(from_records.accuracy_sd[radius], abs=1e-12)


def test_a_run_joins_its_board_and_is_paired_with_the_field_on_its_images() -> None:
    """A committed Fashion-MNIST run (every 20th test image) against the CAT-RS authors' Gaussian run of its sigma: the
    pair is computed on the run's 500 images, and its ΔACR and per-radius difference are the ones a direct
    computation on the two sets of records gives."""
    (board,) = make_boards(["fashion_mnist"], runs=[RUN])
    (run,) = [e for e in board.entries if e.kind == "run"]
    assert (run.images, run.subset, run.sigma) == (500, "every 20th test image (500)", 0.25)
    lines = {line["against"]: line for line in board.runs_against_field if line["run"] == run.name}
    (theirs,) = [e for e in board.entries if e.source == "catrs2023" and e.method == "gaussian" and e.sigma == 0.25]
    line = lines[theirs.name]
    assert line["images"] == 500
    released = theirs.row.results[0].on_images(run.row.images)
    mine = run.row.results[0]
    assert line["d_acr"] == pytest.approx(float(np.mean(mine.scores - released.scores)), abs=1e-12)
    only_mine = int(np.sum(mine.certified(0.5) & ~released.certified(0.5)))
    only_theirs = int(np.sum(~mine.certified(0.5) & released.certified(0.5)))
    assert line["d_acc@0.5"] == pytest.approx((only_mine - only_theirs) / 500, abs=1e-12)
    assert 0 <= line["p_acc@0.5"] <= 1
    assert line["d_acr_low"] <= line["d_acr"] <= line["d_acr_high"]
    assert len(lines) == 21  # every published Fashion-MNIST entry holds the run's images
    page = markdown(board, "cmd")
    assert "**Gaussian** (your run)" in page
    assert f"## {run.name} against the field" in page
    assert board.versus_leader[run.name]["images"] == 500


def entry(name: str, sigma: float = 0.5, kind: str = "published") -> Entry:
    return Entry(
        name=name, label=name, kind=kind, source="x", source_text="x", method="m", dataset="d", arch="a",
        sigma=sigma, trained_sigma=sigma, threat=L2, training="", subset="", images=100, n0=100, n=100000, alpha=0.001,
    )  # fmt: skip


def test_the_envelope_takes_the_best_entry_per_radius_and_the_front_drops_only_dominated_entries() -> None:
    settings = Settings((0.0, 0.5, 1.0))
    accuracies = {"A": (0.9, 0.5, 0.0), "B": (0.8, 0.6, 0.2), "C": (0.7, 0.4, 0.1), "D": (0.9, 0.5, 0.0)}
    entries = [entry(name) for name in accuracies]
    board = Board(
        "d",
        L2,
        settings,
        entries,
        {
            name: Numbers(
                Estimate(sum(values) / 3, 0, 1),
                (0.0,),
                {r: Estimate(v, v - 0.1, v + 0.1) for r, v in zip(settings.radii, values, strict=True)},
                {r: math.nan for r in settings.radii},
            )
            for name, values in accuracies.items()
        },
    )
    best = envelope(board)
    assert best["entry"].tolist() == ["A", "B", "B"]
    assert best["accuracy"].tolist() == [0.9, 0.6, 0.2]
    assert pareto_front(board) == ["A", "B", "D"]  # C is beaten by B everywhere; A and D tie, so neither dominates


def test_a_board_without_records_still_ranks_and_pairs_nothing() -> None:
    """Entries known by their numbers only (no licence, no clone) get intervals but no pairs."""
    logs = [log for log in catalogue(source="sun2025", dataset="imagenet")]
    entries, notes = published_entries("imagenet")
    sun = [e for e in entries if e.source == "sun2025"]
    assert sun
    assert all(e.row is None for e in sun)
    assert len(logs) == len(sun)
    board = build(sun, "imagenet", L2, Settings((0.0, 1.0)))
    assert not board.versus_leader
    assert not board.leader
    assert not board.runs_against_field
    assert any("not shipped" in note for note in notes)


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("dataset=cifar11", "dataset=cifar11 is not a dataset (allowed: cifar10"),
        ("runs=[/no/such/run]", "runs: /no/such/run does not exist"),
        ("radii=[0,-1]", "radii=[0,-1] must be a list of radii >= 0"),
        ("confidence=1.5", "confidence=1.5 must be a number between 0 and 1"),
        ("ci_method=exact", "ci_method=exact is not a choice (allowed: beta"),
        ("plot=maybe", "plot must be true or false, got 'maybe'"),
        ("sigma=-1", "sigma must be a number > 0"),
        ("datset=cifar10", "unknown key 'datset' (allowed: dataset, runs,"),
        ("datset=cifar10", "; did you mean dataset?)"),
        ("runs=[a=b]", "quote a value holding = or ,"),
        ("colour=red", "unknown key 'colour' (allowed: dataset"),
        ("cifar10", "'cifar10' is not key=value"),
    ],
)
def test_a_bad_argument_is_one_error_line_before_torch_is_imported(argument: str, message: str) -> None:
    code = (
        "import sys; from rsbench.leaderboard.__main__ import main; "
        f"rc = main([{argument!r}]); print(rc, 'torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.split() == ["2", "False"]
    assert done.stderr.startswith("rsbench: error: "), done.stderr
    assert message in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_out_writes_markdown_csv_latex_and_the_plot(tmp_path: Path) -> None:
    assert main(["dataset=imagenet", f"out={tmp_path}", "radii=[0,0.5,1]"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imagenet.csv", "imagenet.md", "imagenet.png", "imagenet.tex"]
    frame = pd.read_csv(tmp_path / "imagenet.csv")
    assert {"acr", "acr_low", "acr_high", "acc@0.5", "acc@0.5_low", "acc@0.5_high", "vs_leader_d_acr"} <= set(frame)
    assert (frame["acr_low"] <= frame["acr"]).all()
    assert (frame["acr"] <= frame["acr_high"]).all()
    assert "\\toprule" in (tmp_path / "imagenet.tex").read_text()
    assert (tmp_path / "imagenet.png").stat().st_size > 10_000


def test_the_documented_example_runs_as_typed(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/leaderboard.md's first command, on the shipped Fashion-MNIST logs and a committed run."""
    page = (ROOT / "docs" / "leaderboard.md").read_text()
    (command,) = re.findall(r"^python -m rsbench\.leaderboard (dataset=fashion_mnist runs=\S+)$", page, re.M)
    assert main(command.split()) == 0
    printed = capsys.readouterr().out
    assert "# Leaderboard: Fashion-MNIST" in printed
    assert "(your run)" in printed


def committed_page_agrees(dataset: str) -> None:
    (board,) = make_boards([dataset])
    committed = (ROOT / "docs" / "leaderboard" / f"{dataset}.md").read_text()
    assert committed == markdown(board, PAGES_COMMAND), (
        f"docs/leaderboard/{dataset}.md is not what `{PAGES_COMMAND}` writes now: run it and commit the pages"
    )
    assert (ROOT / "docs" / "leaderboard" / f"{dataset}.png").is_file()


def test_the_committed_imagenet_page_is_what_the_command_writes_now() -> None:
    committed_page_agrees("imagenet")


@pytest.mark.slow
@pytest.mark.parametrize("dataset", [d for d in PUBLISHED if d != "imagenet"])
def test_every_committed_page_is_what_the_command_writes_now(dataset: str) -> None:
    committed_page_agrees(dataset)
