"""rsbench.files.ImageTable: the resumable per-image table (CAT-RS teacher votes, sun2025 p_A counts, router labels).

Its three users' resume tests are beside them (test_methods_adversarial, test_sun2025, test_dual_tool); here the
table's own contract: what counts as missing, what a partial file holds, which stored tables are refused and how.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

from rsbench import files
from rsbench.errors import DamagedFileError, ProtocolMismatchError
from rsbench.files import ImageTable
from rsbench.stop import StopRequested

KEY = {"seed": 0, "epoch": 3, "n": 16, "stream": 2, "sigmas": (0.25, 0.5)}


def table(path: Path | None, key: dict[str, object] = KEY, **options: object) -> ImageTable:
    return ImageTable(
        path, key, (4, 2), torch.float64, "test votes", partial=path and path.with_suffix(".part"), **options
    )  # type: ignore[arg-type]


def fill(target: ImageTable, rows: list[int]) -> None:
    for row in rows:
        target.put([row], torch.tensor([[row, row + 0.5]]))
        target.checkpoint()


def test_rows_are_missing_until_every_entry_is_put() -> None:
    memory = table(None)
    assert memory.missing() == [0, 1, 2, 3]
    memory.put([2], torch.tensor([[1.0, 2.0]]))
    memory.values[0, 0] = 1.0  # half a row is still missing
    assert memory.missing() == [0, 1, 3]
    assert memory.missing([3, 2, 1]) == [3, 1]
    integers = ImageTable(None, {}, (3,), torch.int64, "counts")
    integers.put(torch.tensor([1]), torch.tensor([0]))  # 0 is a count; -1 is missing
    assert integers.missing() == [0, 2]


def test_a_stop_saves_the_rows_so_far_and_a_new_table_resumes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = table(tmp_path / "whole.pt")
    fill(whole, whole.missing())
    expected = whole.finish({"extra": 1})
    cut = table(tmp_path / "t.pt")
    fill(cut, [0, 1])
    monkeypatch.setattr(files, "stop_requested", lambda: signal.SIGTERM)
    with pytest.raises(StopRequested):
        fill(cut, [2])
    monkeypatch.setattr(files, "stop_requested", lambda: None)
    assert not (tmp_path / "t.pt").exists()  # only the partial file until finished
    resumed = table(tmp_path / "t.pt")
    assert resumed.resumed
    assert not resumed.finished
    assert resumed.missing() == [3]
    fill(resumed, resumed.missing())
    assert torch.equal(resumed.finish({"extra": 1}), expected)
    assert not (tmp_path / "t.part").exists()
    stored = torch.load(tmp_path / "t.pt", weights_only=True)
    assert stored["key"] == {**KEY, "sigmas": [0.25, 0.5]}
    assert stored["extra"] == 1
    assert table(tmp_path / "t.pt").finished


def test_a_table_of_other_settings_is_refused_naming_each_setting(tmp_path: Path) -> None:
    first = table(tmp_path / "t.pt")
    fill(first, [0])
    first.save()
    with pytest.raises(ProtocolMismatchError, match=r"(?s)epoch: stored 3, requested 4.*seed: stored 0, requested 1"):
        table(tmp_path / "t.pt", {**KEY, "seed": 1, "epoch": 4})
    with pytest.raises(ProtocolMismatchError, match="view: stored '<missing>', requested 'eval'"):
        table(tmp_path / "t.pt", {**KEY, "view": "eval"})
    torch.save({"table": torch.zeros(4, 2, dtype=torch.float64)}, tmp_path / "t.part")  # no key, no legacy_key
    with pytest.raises(ProtocolMismatchError, match="seed: stored '<missing>', requested 0"):
        table(tmp_path / "t.pt")
    assert table(tmp_path / "t.pt", legacy_key=lambda stored: KEY).missing() == []


def test_a_table_of_another_shape_or_type_or_no_table_is_refused(tmp_path: Path) -> None:
    for content, problem in (
        ({"key": KEY, "table": torch.zeros(5, 2, dtype=torch.float64)}, r"shape and type \(5, 2\)"),
        ({"key": KEY, "table": torch.zeros(4, 2, dtype=torch.float32)}, "torch.float32, not"),
        ({"key": KEY}, "no 'table' entry"),
    ):
        torch.save(content, tmp_path / "t.part")
        with pytest.raises(DamagedFileError, match=problem):
            table(tmp_path / "t.pt")
    (tmp_path / "t.part").write_text("not a torch file")
    with pytest.raises(DamagedFileError, match="cannot be read"):
        table(tmp_path / "t.pt")
