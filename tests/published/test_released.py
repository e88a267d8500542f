import gzip
import hashlib
import math
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rsbench.published.catalogue import catalogue, released_logs, source_cards
from rsbench.report.load import ReportError

# ACR of the CAT-RS authors' Fashion-MNIST logs over all 10,000 test images, as issue 19 states them (3 decimals).
FASHION_MNIST_ACR = {
    ("gaussian", 0.25): 0.670,
    ("gaussian", 0.5): 1.056,
    ("gaussian", 1.0): 1.316,
    ("catrs", 0.25): 0.757,
    ("catrs", 0.5): 1.274,
    ("catrs", 1.0): 1.607,
}


def test_every_indexed_log_is_shipped_whole():
    logs = released_logs()
    assert len(logs) == 44  # CIFAR-10: 20, MNIST: 3 (CAT-RS), Fashion-MNIST: 21
    for log in logs:
        with gzip.open(log.file, "rt") as file:
            frame = pd.read_csv(file, sep="\t")
        assert list(frame.columns) == ["idx", "label", "predict", "radius", "correct"]
        assert len(frame) == log.images == 10000
        assert frame["idx"].is_unique
        assert log.reference.startswith("alinlab/smoothing-catrs@d4bc576 data/")
        # the authors' wall clock per image at n = 100,000 on their GPU: about 1 s for LeNet, 8-22 s for ResNet-110
        assert (0.3 < log.seconds_per_image < 1.1) if log.arch == "lenet" else (8 < log.seconds_per_image < 23)


def test_fashion_mnist_logs_cover_seven_methods_at_three_sigmas():
    logs = released_logs(dataset="fashion_mnist")
    assert {(log.method, log.sigma) for log in logs} == {
        (m, s)
        for m in ("gaussian", "stability", "smoothadv", "macer", "consistency", "smoothmix", "catrs")
        for s in (0.25, 0.5, 1.0)
    }


@pytest.mark.parametrize(("key", "acr"), sorted(FASHION_MNIST_ACR.items()))
def test_a_released_log_reads_as_a_result_with_its_published_acr(key, acr):
    (log,) = released_logs(dataset="fashion_mnist", method=key[0], sigma=key[1])
    result = log.read()
    assert (result.method, result.dataset, result.arch) == (key[0], "fashion_mnist", "lenet")
    assert (result.protocol["n"], result.protocol["n0"]) == (100000, 100)
    # radii are printed with 3 significant digits, so the ACR recomputes to the stated 3 decimals only
    assert result.scores.mean() == pytest.approx(acr, abs=5e-4)


def test_published_rows_of_released_logs_are_the_shipped_logs_recomputed():
    """Every published line that cites a shipped log holds that log's ACR and certified accuracies (to the 4 and 2
    decimals the CSV keeps), so the published numbers and the per-image data cannot drift apart."""
    from rsbench.report.published import load_published, published_radii

    published = load_published()
    radii = published_radii(published)
    by_path = {log.path: log for log in released_logs()}
    checked = 0
    for _, line in published[published["source"].str.startswith("catrs2023_logs")].iterrows():
        path = line["reference"].split("@d4bc576 ")[1].split(" ")[0]
        result = by_path[path].read()
        assert (result.method, result.dataset) == (line["method"], line["dataset"]), path
        assert result.scores.mean() == pytest.approx(line["acr"], abs=5e-4 if len(f"{line['acr']}") < 6 else 5e-5)
        for radius in radii:
            value = line[f"acc@{radius:g}"]
            if not pd.isna(value):
                assert 100 * result.certified(radius).mean() == pytest.approx(value, abs=5e-3), (path, radius)
        checked += 1
    assert checked == 44


# ---- every released log (rsbench.published.catalogue.catalogue): cards, licences, numbers, the clone reader ----

FOLDER = Path(__file__).resolve().parents[2] / "rsbench" / "report" / "released"


def test_every_shipped_log_holds_the_numbers_its_summary_states():
    """summary.csv (the numbers of logs rsbench may not ship) is computed from the same files: ACR, its sd and the
    counts at radii of the 1/16 grid agree with every shipped copy (the copies keep the authors' 3 or 4 digits, so
    equality is exact up to the 6 decimals summary.csv keeps)."""
    shipped = [log for log in catalogue() if log.shipped]
    assert len(shipped) == 311
    for log in shipped:
        frame = pd.read_csv(log.file, sep="\t")
        assert list(frame.columns) == ["idx", "label", "predict", "radius", "correct"], log.path
        assert len(frame) == log.images == log.summary.images, log.path
        assert frame["idx"].is_unique, log.path
        scores = np.where(frame["correct"] == 1, frame["radius"], 0.0)
        assert scores.mean() == pytest.approx(log.summary.acr, abs=1e-6), log.path
        assert scores.std(ddof=1) == pytest.approx(log.summary.acr_sd, abs=1e-6), log.path
        for radius in (0.0, 0.5, 1.0, 1.5):
            certified = int(((frame["correct"] == 1) & (frame["radius"] >= radius)).sum())
            assert certified == log.summary.certified(radius), (log.path, radius)


def test_only_licensed_repositories_ship_and_each_ships_its_licence():
    cards = source_cards()
    assert {name for name, card in cards.items() if card["licence"] == "none"} == {"cohen2019", "sun2025"}
    every = catalogue(duplicates=True)
    for log in every:
        if log.shipped:
            assert cards[log.source]["licence"] == "MIT", log.path
            licence = FOLDER / ("LICENSE" if log.source == "catrs2023" else f"{log.source}/LICENSE")
            assert licence.read_text().lstrip().startswith("MIT License"), licence
    assert {log.source for log in every if not log.shipped and not log.same_as} >= {"cohen2019", "sun2025"}
    assert not (FOLDER / "cohen2019").exists()
    assert not (FOLDER / "sun2025").exists()


def test_the_package_data_stays_small():
    """About 13 MB: 311 logs of 10,000 or 500 images at ~40 KB / ~5 KB gzipped (the cap the issue set: 10-15 MB)."""
    size = sum(p.stat().st_size for p in FOLDER.rglob("*") if p.is_file())
    assert size < 15e6


def test_a_copy_names_a_listed_file_with_the_same_bytes():
    every = catalogue(duplicates=True)
    by_place = {f"{log.repository}:{log.path}": log for log in every}
    copies = [log for log in every if log.same_as]
    assert len(copies) == 28
    for copy in copies:
        original = by_place[copy.same_as]
        assert original.sha256 == copy.sha256
        assert not original.same_as
        assert not copy.shipped


def test_every_card_names_its_repository_commit_licence_and_protocol():
    for name, card in source_cards().items():
        assert len(card["commit"]) == 40, name
        assert "/" in card["repository"], name
        assert card["licence"] in ("MIT", "none"), name
        assert (card["protocol"]["n0"], card["protocol"]["n"]) == (100, 100000), name
        assert all(card[key] for key in ("paper", "facts", "gpu")), name
    sources = {log.source for log in catalogue()}
    assert sources == set(source_cards())


def test_cohens_cifar10_logs_at_sigma_025_and_05_were_certified_at_alpha_001_per_their_largest_radius():
    """CERTIFY's radius is at most sigma * Phi^-1(alpha^(1/n)): 0.953 at sigma 0.25, alpha 0.001, n = 100,000; Cohen
    et al.'s logs reach 0.978 (3.91 sigma), which only alpha = 0.01 allows (as published.csv's cohen2019_logs say)."""
    logs = {(log.sigma, log.trained_sigma): log for log in catalogue(source="cohen2019", dataset="cifar10")}
    assert logs[(0.25, 0.25)].alpha == 0.01
    assert logs[(0.5, 0.5)].alpha == 0.01
    assert logs[(1.0, 1.0)].alpha == 0.001
    assert logs[(0.12, 0.12)].alpha == 0.001
    assert logs[(0.25, 0.25)].summary.largest_radius == pytest.approx(0.978)


def test_a_log_that_is_not_shipped_is_read_from_a_clone_by_path_after_its_sha256_is_checked(tmp_path: Path):
    """The reader takes the work tree's file, or ``git show <commit>:<path>`` from a bare clone, and refuses a file
    whose SHA-256 differs from the index's (another version of the log)."""
    (log,) = [x for x in catalogue(source="cohen2019", dataset="cifar10") if x.sigma == 1.0]
    content = b"idx\tlabel\tpredict\tradius\tcorrect\ttime\n0\t3\t3\t1.5\t1\t0:00:01\n20\t8\t5\t0.25\t0\t0:00:01\n"
    clone = tmp_path / "smoothing"
    (clone / Path(log.path).parent).mkdir(parents=True)
    (clone / log.path).write_bytes(content)
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "add", "."], check=True)
    subprocess.run(
        ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True
    )
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    faithful = replace(log, sha256=hashlib.sha256(content).hexdigest(), commit=commit.strip())
    with pytest.raises(ReportError, match=r"clone https://github\.com/locuslab/smoothing"):
        faithful.read()
    result = faithful.read([clone])
    assert result.images == (0, 20)
    assert result.scores.tolist() == [1.5, 0.0]
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(clone), str(bare)], check=True)
    assert faithful.read([bare]).images == (0, 20)
    assert faithful.located([bare])
    assert not log.located([clone])
    with pytest.raises(ReportError):
        replace(faithful, sha256="0" * 64).read([clone])
    assert math.isnan(faithful.certify_seconds) or faithful.certify_seconds > 0


def test_one_reader_of_cohens_layout_serves_the_index_and_the_report() -> None:
    """A Cohen log's index line and a user's copy of it under the same folders are read by the same parser."""
    from pathlib import PurePosixPath

    from rsbench.published.paths import cohen_layout, parse
    from rsbench.report.load import cohen_layout as report_reader

    logs = catalogue(source="cohen2019", duplicates=True)
    assert len(logs) > 10
    assert report_reader is cohen_layout
    for log in logs:
        layout = cohen_layout(PurePosixPath(log.path))
        parsed = parse("cohen2019", log.path)
        assert layout is not None, log.path
        assert parsed is not None, log.path
        assert (layout.arch, layout.trained_sigma, layout.split) == (log.arch, log.trained_sigma, log.split)
        assert (parsed.arch, parsed.trained_sigma, parsed.split) == (log.arch, log.trained_sigma, log.split)


def test_the_report_and_the_leaderboard_pair_through_one_function() -> None:
    """``--against-released`` and the leaderboard's pairs are one computation: the same numbers for the same rows."""
    from rsbench.leaderboard.board import Settings, pair
    from rsbench.leaderboard.entries import published_entries
    from rsbench.published.pairing import pair_rows

    entries, _ = published_entries("fashion_mnist", sources=["catrs2023"])
    first, second = [e for e in entries if e.row is not None and math.isclose(e.sigma, 0.5)][:2]
    settings = Settings(radii=(0.0, 0.5))
    board_line = pair(first, second, settings)
    assert first.row is not None
    assert second.row is not None
    assert board_line is not None
    direct = pair_rows(first.row, second.row, settings.radii, settings.confidence)
    assert direct is not None
    assert board_line["images"] == len(direct.images)
    for key in ("d_acr", "d_acr_low", "p_acr", "d_acc@0.5"):
        assert board_line[key] == pytest.approx(direct.line[key], rel=1e-12)  # the same computation, bit for bit
