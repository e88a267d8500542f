"""``attack.tsv`` on the one record machinery: the validating reader refuses impossible rows, the writer resumes.

Every committed attack record is read (with its run's certificates), so a stricter reader cannot orphan them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rsbench.attack.records import COLUMNS, AttackRow, append_image, read_attack_rows, write_rows
from rsbench.certify.pipeline.records import read_records
from rsbench.errors import DamagedFileError, ProtocolMismatchError
from tests.helpers import ROOT

COMMITTED = sorted(ROOT.glob("experiments/**/attack.tsv"))
# image 0: certified class 4 at radius 1.2, robust at 0 and 0.5, broken at 1.0 by class 7: a contradiction
GOOD = [
    AttackRow(0, 4, 0.0, 4, True, 0.0, 4, 1.2, False, 0.5),
    AttackRow(0, 4, 0.5, 4, True, 0.4999999, 4, 1.2, False, 1.5),
    AttackRow(0, 4, 1.0, 7, False, 1.0000001, 4, 1.2, True, 1.5),
    AttackRow(1, 2, 0.0, -1, False, 0.0, -1, 0.0, False, 0.5),
]


def test_there_are_committed_attack_records_to_read() -> None:
    assert len(COMMITTED) >= 6, COMMITTED


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.parent.relative_to(ROOT / "experiments")))
def test_every_committed_attack_record_reads_against_its_certificates(path: Path) -> None:
    rows = read_attack_rows(path.parent, read_records(path.parent))
    assert len(rows) == len(path.read_text().splitlines()) - 1
    assert {row.idx for row in rows} <= set(read_records(path.parent))


def write(folder: Path, lines: list[str], header: str = "\t".join(COLUMNS)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attack.tsv").write_text("\n".join([header, *lines]) + "\n")
    return folder


def lines_with(position: int, **changes: object) -> list[str]:
    """GOOD's lines with the fields of row ``position`` replaced (given as written)."""
    lines = [row.to_line().rstrip("\n").split("\t") for row in GOOD]
    for name, value in changes.items():
        lines[position][COLUMNS.index(name)] = str(value)
    return ["\t".join(line) for line in lines]


def test_the_rows_written_read_back_and_a_crash_tail_is_dropped(tmp_path: Path) -> None:
    append_image(tmp_path, GOOD[:3])
    with (tmp_path / "attack.tsv").open("a") as file:
        file.write("1\t2\t0.0\t-1")  # a crash while appending image 1
    assert read_attack_rows(tmp_path) == GOOD[:3]
    append_image(tmp_path, GOOD[3:])  # the writer cuts the half line first
    assert read_attack_rows(tmp_path) == GOOD
    write_rows(tmp_path, [])
    assert (tmp_path / "attack.tsv").read_text() == "\t".join(COLUMNS) + "\n"


def test_appending_to_a_file_of_other_columns_is_refused(tmp_path: Path) -> None:
    write(tmp_path, [], header="\t".join(COLUMNS[:-1]))
    with pytest.raises(ProtocolMismatchError, match="holds rows with the columns"):
        append_image(tmp_path, GOOD[:1])


@pytest.mark.parametrize(
    ("lines", "problem"),
    [
        (["\t".join(COLUMNS[:-1])], r"line 1 is damaged: it does not start .* \(it lacks \['time'\]\)"),  # header
        (lines_with(1, radius="half"), "line 3 is damaged: radius 'half' is not a number"),
        (lines_with(1, contradiction="yes"), "line 3 is damaged: contradiction 'yes' is not 0 or 1"),
        (lines_with(0, idx=-1), "line 2 is damaged: idx -1 is negative"),
        (lines_with(1, distance=-0.1), "line 3 is damaged: distance -0.1 is not a finite number >= 0"),
        (lines_with(1, time="nan"), "line 3 is damaged: time nan is not a finite number >= 0"),
        (lines_with(1, distance=0.51), "distance 0.51 is above the attack radius 0.5"),
        (lines_with(1, correct=0), "line 3 is damaged: correct is False but predict 4, label 4"),
        (lines_with(3, certified_radius=0.3), "an abstained certificate .* has certified_radius 0.3"),
        (lines_with(2, contradiction=0), "line 4 is damaged: contradiction is 0 but predict 7 at radius 1.0 .* says 1"),
        (lines_with(1, contradiction=1), "line 3 is damaged: contradiction is 1 but predict 4"),
        (lines_with(2, radius=0.5, distance=0.5, contradiction=1), "radius 0.5 does not follow its radius 0.5"),
        (lines_with(0, predict=-1, correct=0), "line 3 is damaged: image 0 has a row after the radius 0.0 where"),
        (lines_with(1, certified_radius=1.3), "image 0's label or certificate changes between its rows"),
        ([*lines_with(0)[:1], *lines_with(0)[3:], *lines_with(0)[1:2]], "image 0's rows are not together"),
    ],
)
def test_an_impossible_attack_row_is_refused_naming_the_problem(tmp_path: Path, lines: list[str], problem: str) -> None:
    if len(lines) == 1:  # a header of missing columns
        write(tmp_path, [], header=lines[0])
    else:
        write(tmp_path, lines)
    with pytest.raises(DamagedFileError, match=problem):
        read_attack_rows(tmp_path)


def test_a_row_whose_certificate_is_not_certify_tsv_s_is_refused(tmp_path: Path) -> None:
    write(tmp_path, lines_with(0))
    certificates = {row.idx: row for row in read_records(COMMITTED[0].parent).values() if row.idx in (0, 1)}
    with pytest.raises(DamagedFileError, match=r"image 0's certificate .* is not certify.tsv's"):
        read_attack_rows(tmp_path, certificates)
    write(tmp_path / "b", lines_with(0, idx=5)[:1])
    with pytest.raises(DamagedFileError, match="image 5 was attacked but has no certificate"):
        read_attack_rows(tmp_path / "b", certificates)
