"""The leaderboard's numbers and how it shows them: McNemar per radius for every pair shown, the envelope over the
radii an entry can certify with its ties and rows, the order of a table where entries share images, run names, the
legend, plain TSVs, and the provenance notes the published-result cards carry onto the board."""

from __future__ import annotations

import gzip
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from rsbench.leaderboard.__main__ import main
from rsbench.leaderboard.board import Board, Numbers, Settings, build, envelope
from rsbench.leaderboard.entries import L2, Entry, published_entries
from rsbench.leaderboard.make import make_boards
from rsbench.leaderboard.plot import plot_board
from rsbench.leaderboard.render import frame, markdown
from rsbench.published.catalogue import catalogue
from rsbench.report.published import load_published
from rsbench.report.stats import Estimate

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "experiments" / "fashion_mnist_table" / "runs" / "gaussian_sigma0.25"
DEFAULT_RUN = ROOT / "experiments" / "default_run" / "runs" / "seed_0"
SEQUENTIAL_RUN = ROOT / "experiments" / "embedded_mnist_dual_rs" / "runs" / "expert_sigma0.5"
SOURCES = ROOT / "rsbench" / "report" / "released" / "sources.yaml"


@pytest.fixture(scope="module")
def fashion() -> Board:
    """The Fashion-MNIST board (the CAT-RS authors' 21 shipped logs) with a committed 500-image run."""
    (board,) = make_boards(["fashion_mnist"], runs=[RUN])
    return board


def test_every_published_pair_shown_gets_mcnemar_per_radius(fashion: Board) -> None:
    """Published-vs-published pairs (each entry against its sigma's best) carry McNemar's exact p per radius on the
    page and in the CSV, the same p a direct count of the discordant images gives (to 1e-12: both are the same
    binomial tail, computed by two libraries)."""
    by_name = {e.name: e for e in fashion.entries}
    (smoothmix,) = [e for e in fashion.entries if e.method == "smoothmix" and e.sigma == 0.25]
    line = fashion.versus_leader[smoothmix.name]
    best = by_name[line["against"]]
    assert best.kind == smoothmix.kind == "published"
    ours, theirs = smoothmix.row.certified(0.5) > 0, best.row.certified(0.5) > 0  # one run: 0 or 1 per image
    only_ours, only_theirs = int(np.sum(ours & ~theirs)), int(np.sum(~ours & theirs))
    expected = stats.binomtest(min(only_ours, only_theirs), only_ours + only_theirs, 0.5).pvalue
    assert line["p_acc@0.5"] == pytest.approx(expected, abs=1e-12)
    numbers = frame(fashion).set_index("entry")
    assert numbers.loc[smoothmix.name, "vs_leader_p_acc@0.5"] == pytest.approx(expected, abs=1e-12)
    assert numbers.loc[smoothmix.name, "vs_leader_d_acc@0.5"] == pytest.approx((only_ours - only_theirs) / 10_000)
    gaussian = numbers.loc[smoothmix.name, "vs_gaussian_p_acc@0.5"]
    assert 0 <= gaussian <= 1
    page = markdown(fashion, "cmd")
    assert "## σ = 0.25: paired with the best, per radius" in page
    section = page.split("## σ = 0.25: paired with the best, per radius")[1].split("\n## ")[0]
    assert "Δ r=0.5 (p)" in section
    assert "SmoothMix" in section


def test_a_run_on_a_subset_of_an_entrys_images_ranks_by_the_paired_comparison(fashion: Board) -> None:
    """The 500-image run has the higher ACR over its own images than the authors' Gaussian entry over all 10,000, but
    on the run's 500 images the authors' entry has at least the run's ACR: the run goes below it."""
    (run,) = [e for e in fashion.entries if e.kind == "run"]
    (theirs,) = [e for e in fashion.entries if e.source == "catrs2023" and e.method == "gaussian" and e.sigma == 0.25]
    assert fashion.numbers[run.name].acr.value > fashion.numbers[theirs.name].acr.value
    on_its_images = float(np.mean(theirs.row.results[0].on_images(run.row.images).scores))
    assert on_its_images >= float(np.mean(run.row.scores))
    order = [e.name for e in fashion.ranked(0.25)]
    assert order.index(run.name) == order.index(theirs.name) + 1
    assert "the paired comparison" in markdown(fashion, "cmd")


def numbered(name: str, sigma: float, n: int, values: tuple[float, ...], radii: tuple[float, ...]) -> tuple:
    entry = Entry(
        name=name, label=name, kind="run", source="run", source_text=name, method="gaussian", dataset="d",
        arch="a", sigma=sigma, trained_sigma=sigma, threat=L2, training="", subset="", images=100, n0=100, n=n,
        alpha=0.001,
    )  # fmt: skip
    accuracy = {r: Estimate(v, max(v - 0.1, 0), min(v + 0.1, 1)) for r, v in zip(radii, values, strict=True)}
    return entry, Numbers(Estimate(float(np.mean(values)), 0, 1), (0.0,), accuracy, {r: math.nan for r in radii})


def test_the_envelope_takes_only_radii_an_entry_can_certify_and_flags_ties() -> None:
    """Two runs at n = 10,000 (caps 0.80 at sigma 0.25, 0.675 at sigma 0.21): r = 1 is beyond both, so it has no
    envelope line (it used to name one of them, at 0%); at r = 0 they tie, and both rows are named."""
    radii = (0.0, 0.5, 1.0)
    a, numbers_a = numbered("A", 0.25, 10_000, (0.98, 0.94, 0.0), radii)
    b, numbers_b = numbered("B", 0.21, 10_000, (0.98, 0.90, 0.0), radii)
    assert a.cap == pytest.approx(0.7996, abs=1e-4)
    assert b.cap < 1.0
    board = Board("d", L2, Settings(radii), [a, b], {"A": numbers_a, "B": numbers_b})
    best = envelope(board)
    assert best["radius"].tolist() == [0.0, 0.5]
    assert best["tied"].tolist() == ["B", ""]
    assert best["row"].tolist() == ["σ = 0.25 #1", "σ = 0.25 #1"]
    assert best["tied_rows"].tolist() == ["σ = 0.21 #1", ""]
    board.envelope = best
    page = markdown(board, "cmd")
    assert "A (tied with B)" in page
    assert "σ = 0.25 #1; σ = 0.21 #1" in page


def test_published_entries_are_named_by_what_sets_them_apart_not_by_a_number() -> None:
    """Salman et al.'s self-trained CIFAR-10 models with and without ImageNet32 pre-training share label and sigma:
    their names say the training data (they used to be "#1" and "#2", which no table showed)."""
    entries, _ = published_entries("cifar10")
    names = [e.name for e in entries]
    assert len(set(names)) == len(names)
    assert not [name for name in names if re.search(r" #\d+$", name)]
    assert any("ImageNet32 pre-training + self-training, σ=0.25]" in name for name in names)


def test_a_runs_name_holds_its_own_settings_not_question_marks() -> None:
    """The default run leaves certify.max_images at null; beside a run that set it, its name says so."""
    (board,) = make_boards(["mnist_embedded"], runs=[DEFAULT_RUN, SEQUENTIAL_RUN])
    labels = sorted(e.label for e in board.entries)
    assert all("=?" not in label for label in labels), labels
    assert any("certify.max_images=null" in label for label in labels), labels
    assert any("certify.max_images=300" in label for label in labels), labels


def test_a_long_legend_label_never_widens_the_figure(tmp_path: Path) -> None:
    """A run named by many settings (hundreds of characters) is wrapped in the legend: the PNG keeps the width of
    a board with short names (9 inches at 110 dpi, less the trimmed margins; it used to grow with the label)."""
    from matplotlib.image import imread

    entries, _ = published_entries("fashion_mnist")
    few = [e for e in entries if e.sigma == 0.25][:3]
    long = replace(few[0], name=few[0].name + " (" + " ".join(f"setting_{i}=value_{i}" for i in range(25)) + ")")
    board = build([long, *few[1:]], "fashion_mnist", L2, Settings((0.0, 0.25, 0.5)))
    width = imread(str(plot_board(board, tmp_path / "board.png"))).shape[1]
    assert width <= 9 * 110


def copied_log(folder: Path) -> Path:
    """The first 200 images of the shipped Fashion-MNIST Gaussian sigma 0.25 log, as a plain TSV at ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(ROOT / "rsbench/report/released/fashion_mnist/gaussian/sigma_0.25.tsv.gz", "rt") as file:
        lines = file.read().splitlines()[:201]
    path = folder / "mine.tsv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_plain_tsv_whose_path_names_no_sigma_or_dataset_is_told_which_key_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = copied_log(tmp_path / "bare")
    assert main([f"runs=[{bare}]", "plot=false"]) == 2
    error = capsys.readouterr().err
    assert "pass sigma=<s>" in error
    assert "--sigma" not in error
    assert error.count("\n") == 1
    with_sigma = copied_log(tmp_path / "noise_0.25")
    assert main([f"runs=[{with_sigma}]", "plot=false"]) == 2  # used to be dropped from every board with exit 0
    assert "pass dataset=<name>" in capsys.readouterr().err
    assert main([f"runs=[{bare}]", "sigma=0.25", "dataset=fashion_mnist", "plot=false"]) == 0
    page = capsys.readouterr().out
    assert "# Leaderboard: Fashion-MNIST" in page
    assert "(your run)" in page
    assert main(["sigma=-1"]) == 2
    assert "sigma must be a number > 0" in capsys.readouterr().err


def test_the_cards_provenance_notes_reach_the_board() -> None:
    """SmoothMix's CIFAR-10 sigma 0.5 logs that do not reproduce the paper's rows, the paper row no log backs, and Sun
    et al.'s ImageNet SmoothAdv logs that re-certify Salman et al.'s models are said on the boards."""
    cifar, notes = published_entries("cifar10")
    smoothmix = [e for e in cifar if e.method == "smoothmix" and e.sigma == 0.5 and e.source != "sun2025"]
    assert len(smoothmix) == 2
    assert all("does not reproduce" in e.note for e in smoothmix)
    assert any(note.startswith("no released log") and "σ=1" in note and "SmoothMix" in note for note in notes)
    imagenet, _ = published_entries("imagenet")
    sun = [e for e in imagenet if e.source == "sun2025" and e.method == "smoothadv"]
    assert len(sun) == 3
    assert all("re-certification of one of Salman et al.'s" in e.note for e in sun)
    page = markdown(build(cifar, "cifar10", L2, Settings((0.0, 0.5)), notes), "cmd")
    assert "no released log (CAT-RS (Jeong et al. 2023), σ=1)" in page


NOTE = re.compile(r"ACR ([\d.]+) against ([\d.]+) and up to ([\d.]+) points per radius")


def test_the_numbers_a_card_note_states_are_the_data() -> None:
    """Each "ACR x against y and up to z points" of a card's log_notes: x is the log's ACR (4 decimals), y the ACR of
    a published.csv line of its method, dataset and sigma, z the largest difference at that line's radii (1 decimal)."""
    cards = yaml.safe_load(SOURCES.read_text())
    published = load_published()
    checked = 0
    for source, card in cards.items():
        for path, note in card.get("log_notes", {}).items():
            match = NOTE.search(note)
            if match is None:
                continue
            (log,) = [log for log in catalogue(source=source, duplicates=True) if log.path == path]
            acr, paper, points = (float(g) for g in match.groups())
            # 4 decimals of an ACR summary.csv keeps to 6 (0.73565 may print as 0.7356): half a unit plus 1e-6
            assert abs(log.summary.acr - acr) <= 5e-5 + 1e-6, path
            lines = published[
                (published["method"] == log.method)
                & (published["dataset"] == log.dataset)
                & np.isclose(published["sigma"].astype(float), log.sigma)
                & np.isclose(published["acr"].astype(float), paper)
            ]
            assert not lines.empty, path
            line = lines.iloc[0]
            radii = [c for c in published.columns if c.startswith("acc@") and not pd.isna(line[c])]
            gaps = [abs(100 * log.summary.certified(float(c[4:])) / log.summary.images - float(line[c])) for c in radii]
            assert round(max(gaps), 1) == pytest.approx(points, abs=1e-9), path
            checked += 1
    assert checked == 2


def test_the_docs_name_every_released_log_certified_at_alpha_001() -> None:
    """All six of Cohen et al.'s ImageNet logs (and their CIFAR-10 sigma 0.25 and 0.5 logs) reach radii only
    alpha = 0.01 allows; the leaderboard page says so, and the card too."""
    cohen = catalogue(source="cohen2019", duplicates=True)
    imagenet = [log for log in cohen if log.dataset == "imagenet"]
    assert len(imagenet) == 6
    assert all(log.alpha == 0.01 for log in imagenet)
    cifar = sorted(log.sigma for log in cohen if log.dataset == "cifar10" and log.alpha == 0.01)
    assert cifar == [0.25, 0.5]
    page = " ".join((ROOT / "docs" / "leaderboard.md").read_text().split())
    assert "the CIFAR-10 sigma 0.25 and 0.5 logs and all six ImageNet logs" in page
    card = " ".join(yaml.safe_load(SOURCES.read_text())["cohen2019"]["facts"].split())
    assert "all six ImageNet logs" in card
