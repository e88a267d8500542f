"""Every per-image record is checked on the way in: ``rsbench.report`` and ``rsbench.leaderboard`` refuse an impossible
one in one ``rsbench: error:`` line naming the file, the line and the problem, before torch loads, and accept the
clean one (:mod:`rsbench.certify.pipeline.validate`).

Before these checks, a truncated last line read ``correct`` as NaN and then True, duplicate rows counted twice, a NaN,
infinite, negative or above-the-cap radius entered the ACR, an abstention could be "correct", a row's radius could
exceed its own pA_lower's, an edited metrics.json was believed, and a header alone or a non-numeric radius ended in a
traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from rsbench.certify.algorithm.bounds import radius_cap
from rsbench.certify.pipeline.validate import Facts, read_table
from rsbench.errors import DamagedFileError
from rsbench.leaderboard.__main__ import main as leaderboard
from rsbench.report.__main__ import main as report
from tests.run_folders import N, make_run
from tests.runs.test_refusals import run_module

CLEAN = (
    "idx\tlabel\tpredict\tradius\tcorrect\ttime\n"
    "0\t3\t3\t0.41\t1\t0:00:01.200000\n"
    "20\t7\t7\t0.12\t1\t1.5\n"
    "40\t1\t-1\t0.0\t0\t1.1\n"
    "60\t2\t5\t0.3\t0\t1.0\n"
)
"""A Cohen-format log at sigma 0.25 (radii with 2 or 3 digits, as released logs have them)."""

COHEN_CASES: dict[str, tuple[Callable[[str], str], str]] = {
    "truncated last line": (lambda t: t + "80\t4\t9\t0.2", "line 6: has 4 tab-separated fields where the header has 6"),
    "non-numeric radius": (lambda t: t.replace("0.12", "0.1x"), "line 3: radius '0.1x' is not a number"),
    "header only": (lambda t: t.splitlines(keepends=True)[0], "holds a header but no rows"),
    "duplicate idx": (lambda t: t + "20\t7\t7\t0.12\t1\t1.5\n", "line 6: image 20 appears twice (first on line 3)"),
    "nan radius": (lambda t: t.replace("0.41", "nan"), "line 2: radius nan is not a finite number"),
    "inf radius": (lambda t: t.replace("0.41", "inf"), "line 2: radius inf is not a finite number"),
    "negative radius": (lambda t: t.replace("0.41", "-0.41"), "line 2: radius -0.41 is negative"),
    "correct at an abstention": (
        lambda t: t.replace("40\t1\t-1\t0.0\t0", "40\t1\t-1\t0.0\t1"),
        "line 4: correct is 1 at an abstention",
    ),
    "correct at a wrong class": (
        lambda t: t.replace("60\t2\t5\t0.3\t0", "60\t2\t5\t0.3\t1"),
        "line 5: correct is 1 but predict 5 != label 2",
    ),
}


def cohen_log(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mnist" / "noise_0.25" / "mine" / "log.tsv"  # dataset and sigma in the path, as the board needs
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def report_refuses(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``python -m rsbench.report <path>``: exit status 2 and its one error line, on stderr (the command floor's)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        report([str(path), "--out", str(tmp_path / "report"), "--no-plots", "--no-published", *args])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error: "), error
    assert error.count("\n") == 1, error
    return error.rstrip("\n")


def leaderboard_refuses(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``python -m rsbench.leaderboard runs=[<path>]``: exit status 2 and its one error line."""
    capsys.readouterr()
    assert leaderboard([f"runs=[{path}]", "plot=false", f"out={tmp_path / 'board'}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error: "), error
    assert error.count("\n") == 1, error
    return error


@pytest.mark.parametrize("case", sorted(COHEN_CASES))
def test_a_damaged_or_impossible_cohen_log_is_refused_by_the_report_and_the_board_in_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected = COHEN_CASES[case]
    path = cohen_log(tmp_path, edit(CLEAN))
    for message in (report_refuses(path, tmp_path, capsys), leaderboard_refuses(path, tmp_path, capsys)):
        assert message.startswith(f"rsbench: error: {path}"), message
        assert expected in message, message


def test_a_radius_above_the_cap_of_a_log_s_protocol_is_refused_within_the_rounding_of_its_digits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At sigma 0.25, n = 100,000 and alpha = 0.001 the cap is 0.952864: 0.953 (3 digits) may be it rounded up, 0.954
    may not, nor 7.5 (which lifted a board's ACR from 0.216 to 0.458)."""
    cap = radius_cap(0.25, 100_000, 0.001)
    assert 0.9525 < cap < 0.953  # 0.953 is the cap written with 3 significant digits
    protocol = ("--n", "100000", "--alpha", "0.001")
    report(
        [
            str(cohen_log(tmp_path, CLEAN.replace("0.41", "0.953"))),
            "--out",
            str(tmp_path / "r"),
            "--no-plots",
            *protocol,
        ]
    )
    for radius in ("0.954", "7.5"):
        message = report_refuses(cohen_log(tmp_path, CLEAN.replace("0.41", radius)), tmp_path, capsys, *protocol)
        assert f"line 2: radius {radius} is above the cap 0.952864 that n = 100000 estimation samples" in message
    released_like = Facts(sigma=0.25, n=100_000, alpha=0.001)
    full = f"{cap + 1e-12!r}"  # a full-precision radius may exceed it by floating-point rounding only
    assert len(read_table(cohen_log(tmp_path, CLEAN.replace("0.41", full)), facts=released_like)) == 4
    with pytest.raises(DamagedFileError, match="above the cap"):
        read_table(cohen_log(tmp_path, CLEAN.replace("0.41", f"{cap + 1e-6!r}")), facts=released_like)


def test_the_clean_log_and_run_are_accepted_by_the_report_and_the_board(tmp_path: Path) -> None:
    path = cohen_log(tmp_path, CLEAN)
    report([str(path), "--out", str(tmp_path / "report"), "--no-plots", "--n", "100000", "--alpha", "0.001"])
    assert "mine" in (tmp_path / "report" / "report.md").read_text()
    run = make_run(tmp_path / "run", [0.3, 0.0, 0.6, 1.2])
    report([str(run), "--out", str(tmp_path / "report2"), "--no-plots", "--no-published"])
    assert leaderboard([f"runs=[{run}]", "dataset=mnist_embedded", "plot=false", f"out={tmp_path / 'b'}"]) == 0
    assert "Gaussian" in (tmp_path / "b" / "mnist_embedded.md").read_text()


def edit_row(run: Path, line: int, **values: object) -> None:
    """Set columns of one line of ``run/certify.tsv`` (line 1 is the header)."""
    path = run / "certify.tsv"
    lines = path.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split("\t")
    cells = lines[line - 1].rstrip("\n").split("\t")
    for key, value in values.items():
        cells[header.index(key)] = str(value)
    lines[line - 1] = "\t".join(cells) + "\n"
    path.write_text("".join(lines))


def edit_json(path: Path, **values: object) -> None:
    content = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**content, **values}))


RUN_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "radius above its pA_lower": (
        lambda run: edit_row(run, 3, radius=0.9),  # its pA_lower certifies 0.6 at sigma 0.5
        "line 3 is damaged: radius 0.9 is above what its pA_lower certifies: sigma * Phi^-1(pA_lower) = 0.6",
    ),
    "radius above the cap": (
        lambda run: edit_row(run, 3, radius=7.5, pA_lower=repr(float(norm.cdf(7.5 / 0.5)))),
        "line 3 is damaged: radius 7.5 is above the cap 1.59929 that n = 10000 estimation samples at alpha = 0.001",
    ),
    "pA_lower above count / n": (
        lambda run: edit_row(run, 2, count=N // 2),
        "line 2 is damaged: pA_lower 0.7257468822499265 is above count / n = 5000 / 10000",
    ),
    "truncated row": (
        lambda run: (run / "certify.tsv").write_text(
            (run / "certify.tsv").read_text().replace("\t0.1\t10000\t10000\t", "\t0.1\t10000\t", 1)
        ),
        "line 2 is damaged: has 10 tab-separated fields where the header has 11 (cut short?)",
    ),
    "edited acr": (lambda run: edit_json(run / "metrics.json", acr=0.9), "metrics.json: acr is 0.9, its rows give 0.5"),
    "edited num_images": (
        lambda run: edit_json(run / "metrics.json", num_images=3),
        "metrics.json: num_images is 3, but it summarises 4 rows",
    ),
    "edited certified accuracy": (
        lambda run: edit_json(run / "metrics.json", certified_accuracy={"0.0": 0.75, "0.5": 1.0}),
        "metrics.json: certified_accuracy[0.5] is 1.0, its rows give 0.5",
    ),
    "metrics disagreeing with its protocol": (
        lambda run: edit_json(run / "certify_protocol.json", alpha=0.3, n=N),
        "metrics.json: alpha is 0.001, certify_protocol.json says 0.3",
    ),
}


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_an_impossible_run_record_or_summary_is_refused_by_the_report_and_the_board_in_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edit, expected = RUN_CASES[case]
    run = make_run(tmp_path / "run", [0.3, 0.6, 0.0, 1.1])  # sigma 0.5, n = 10,000, alpha = 0.001: ACR 0.5
    edit(run)
    for message in (report_refuses(run, tmp_path, capsys), leaderboard_refuses(run, tmp_path, capsys)):
        assert expected in message, message


@pytest.mark.parametrize("module", ["rsbench.report", "rsbench.leaderboard"])
def test_a_damaged_record_is_refused_before_torch_pandas_or_scipy_load(module: str, tmp_path: Path) -> None:
    path = cohen_log(tmp_path, CLEAN + "80\t4\t9\t0.2")
    seen = run_module(module, str(path) if module == "rsbench.report" else f"runs=[{path}]", cwd=tmp_path)
    assert seen["code"] == 2, seen
    assert not seen["traceback"], seen
    assert seen["heavy"] == [], f"imported {seen['heavy']} before refusing"
    errors = seen["errors"]
    assert isinstance(errors, list)
    assert len(errors) == 1, errors
    assert "line 6: has 4 tab-separated fields" in errors[0]


def test_every_committed_released_log_and_study_record_passes_the_checks() -> None:
    """The shipped released logs (with their index's sigma, n and alpha: the six ImageNet logs and two of Cohen et
    al.'s CIFAR-10 ones are consistent with alpha = 0.01 only, as index.csv says) and every committed run."""
    from rsbench.certify.pipeline.checked_runs import check_inputs
    from rsbench.published.catalogue import catalogue

    shipped = [log for log in catalogue(duplicates=True) if log.shipped]
    for log in shipped:
        assert len(read_table(log.file, facts=Facts(log.sigma, log.n, log.alpha), need_rows=True)) == log.images
    runs = sorted(path.parent for path in (Path(__file__).parents[2] / "experiments").rglob("metrics.json"))
    assert len(runs) > 100
    check_inputs(runs)
    images = np.array([log.images for log in shipped])
    assert images.sum() > 2_000_000  # every row of every shipped log was read
