"""certify.tsv: format, full precision, resume after a crash, refusal to mix protocols; metrics and summaries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rsbench.certify.pipeline.metrics import (
    average_certified_radius,
    certified_accuracy,
    envelope,
    radius_grid,
    radius_key,
)
from rsbench.certify.pipeline.records import (
    COLUMNS,
    CertificationRow,
    RecordWriter,
    check_protocol,
    merge_records,
    read_records,
    read_rows,
    shard_record,
    write_protocol,
)
from rsbench.certify.pipeline.subset import certification_indices
from rsbench.certify.pipeline.summary import summarize, write_metrics
from rsbench.errors import ProtocolMismatchError
from tests.helpers import row

PROTOCOL = {"n0": 100, "n": 1000, "alpha": 0.001, "sigma": 0.25, "seed": 0, "max_images": 10}


def test_row_round_trips_at_full_precision() -> None:
    original = CertificationRow(7, 2, 2, 0.49999999999999994, True, 1.25, 999, 1000, 0.9984401, 0.25, sound=False)
    line = original.to_line()
    assert line.endswith("\n")
    assert line.split("\t")[:6] == ["7", "2", "2", "0.49999999999999994", "1", "1.25"]
    assert CertificationRow.from_line(line) == original


def test_abstention_row() -> None:
    abstain = CertificationRow(0, 4, -1, 0.0, False, 0.1, 480, 1000, 0.45, 0.5)
    assert abstain.to_line().split("\t")[2:5] == ["-1", "0.0", "0"]


def test_writer_creates_the_header_and_flushes_each_row(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path) as writer:
        writer.append(row(0))
        # visible on disk before close: a killed process loses at most the row being computed
        assert read_rows(path) == [row(0)]
    assert path.read_text().splitlines()[0].split("\t") == list(COLUMNS)


def test_writer_appends_to_an_existing_record(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path) as writer:
        writer.append(row(0))
        writer.append(row(1))
    with RecordWriter(path) as writer:
        writer.append(row(2))
    assert [r.idx for r in read_rows(path)] == [0, 1, 2]


def test_writer_drops_a_half_written_last_line(tmp_path: Path) -> None:
    path = tmp_path / "certify.tsv"
    with RecordWriter(path) as writer:
        writer.append(row(0))
    with path.open("a") as file:
        file.write(row(1).to_line()[:9])  # the process died in the middle of this write
    assert [r.idx for r in read_rows(path)] == [0]
    with RecordWriter(path) as writer:
        writer.append(row(1))
    assert read_rows(path) == [row(0), row(1)]


def test_other_protocol_is_refused_and_the_record_is_untouched(tmp_path: Path) -> None:
    write_protocol(tmp_path, PROTOCOL)
    with RecordWriter(tmp_path / "certify.tsv") as writer:
        writer.append(row(0))
    before = (tmp_path / "certify.tsv").read_text()
    check_protocol(tmp_path, PROTOCOL)
    with pytest.raises(ProtocolMismatchError, match=r"alpha: stored 0\.001, requested 0\.01"):
        check_protocol(tmp_path, {**PROTOCOL, "alpha": 0.01})
    assert (tmp_path / "certify.tsv").read_text() == before


def test_extendable_keys_may_change(tmp_path: Path) -> None:
    write_protocol(tmp_path, PROTOCOL)
    with RecordWriter(tmp_path / "certify.tsv") as writer:
        writer.append(row(0))
    check_protocol(tmp_path, {**PROTOCOL, "max_images": 20}, extendable={"max_images"})
    with pytest.raises(ProtocolMismatchError, match="max_images"):
        check_protocol(tmp_path, {**PROTOCOL, "max_images": 20})


def test_a_directory_without_rows_accepts_any_protocol(tmp_path: Path) -> None:
    write_protocol(tmp_path, PROTOCOL)
    check_protocol(tmp_path, {**PROTOCOL, "n": 5})


def test_record_without_protocol_is_not_resumed(tmp_path: Path) -> None:
    (tmp_path / "certify.tsv").write_text("\t".join(COLUMNS) + "\n" + row(0).to_line())
    with pytest.raises(ProtocolMismatchError, match=r"without certify_protocol\.json"):
        check_protocol(tmp_path, PROTOCOL)


def test_shards_merge_into_one_sorted_record(tmp_path: Path) -> None:
    assert shard_record(0, 1) == "certify.tsv"
    with RecordWriter(tmp_path / "certify.tsv") as writer:
        writer.append(row(4))
    for rank, indices in ((0, [0, 2]), (1, [1, 3])):
        with RecordWriter(tmp_path / shard_record(rank, 2)) as writer:
            for idx in indices:
                writer.append(row(idx))
    assert sorted(read_records(tmp_path)) == [0, 1, 2, 3, 4]
    merged = merge_records(tmp_path)
    assert [r.idx for r in merged] == [0, 1, 2, 3, 4]
    assert [r.idx for r in read_rows(tmp_path / "certify.tsv")] == [0, 1, 2, 3, 4]
    assert [p.name for p in tmp_path.glob("certify*.tsv")] == ["certify.tsv"]


def test_conflicting_rows_for_one_image_are_an_error(tmp_path: Path) -> None:
    with RecordWriter(tmp_path / "certify.tsv") as writer:
        writer.append(row(0, radius=0.5))
    with RecordWriter(tmp_path / shard_record(1, 2)) as writer:
        writer.append(row(0, radius=0.7))
    with pytest.raises(ValueError, match="disagree about image 0"):
        read_records(tmp_path)


def test_append_outside_the_context_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="entered"):
        RecordWriter(tmp_path / "certify.tsv").append(row(0))


def test_metrics_match_numpy_reference() -> None:
    rng = np.random.default_rng(0)
    radii = rng.uniform(0, 1, 200)
    correct = rng.uniform(size=200) < 0.7
    radii[~correct & (rng.uniform(size=200) < 0.5)] = 0.0
    assert average_certified_radius(radii, correct) == pytest.approx(np.mean(correct * radii))
    for r in (0.0, 0.25, 0.5, 0.9):
        assert certified_accuracy(radii, correct, r) == pytest.approx(np.mean(correct & (radii >= r)))


def test_threshold_is_inclusive_and_never_rounds_up() -> None:
    assert certified_accuracy([0.5], [True], 0.5) == 1.0
    assert certified_accuracy([0.4999999], [True], 0.5) == 0.0
    assert certified_accuracy([2.0], [False], 0.0) == 0.0  # wrong predictions never count


def test_radius_grid_stops_at_the_cap() -> None:
    assert radius_grid(0.9529) == [0.0, 0.25, 0.5, 0.75]
    assert radius_grid(1.0) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert radius_grid(3.8115)[-1] == 3.75
    assert radius_grid(0.0) == [0.0]
    assert [radius_key(r) for r in radius_grid(1.0)] == ["0.0", "0.25", "0.5", "0.75", "1.0"]


def test_summary_counts_abstentions_as_wrong(tmp_path: Path) -> None:
    rows = [row(0, 0.9), row(1, 0.3), row(2, 0.0, correct=False, predict=-1), row(3, 0.6, correct=False)]
    summary = summarize(rows, sigma=0.25, n0=100, n=100_000, alpha=0.001, extra={"method": "gaussian"})
    assert summary["acr"] == pytest.approx((0.9 + 0.3) / 4)
    assert summary["abstain_rate"] == 0.25
    assert summary["num_images"] == 4
    assert summary["certified_accuracy"] == {"0.0": 0.5, "0.25": 0.5, "0.5": 0.25, "0.75": 0.25}
    assert summary["radius_cap"] == pytest.approx(0.95286, abs=1e-5)
    assert summary["method"] == "gaussian"
    write_metrics(summary, tmp_path / "metrics.json")
    assert json.loads((tmp_path / "metrics.json").read_text()) == summary


@pytest.mark.parametrize(
    ("args", "expected"),
    [((10, 0, 1, None), list(range(10))), ((100, 0, 20, None), [0, 20, 40, 60, 80]), ((10, 2, 3, 2), [2, 5])],
)
def test_certification_indices(args: tuple[int, int, int, int | None], expected: list[int]) -> None:
    assert certification_indices(*args) == expected


def test_max_images_is_a_count_not_an_index() -> None:
    assert len(certification_indices(10_000, skip=20, max_images=7)) == 7  # Cohen's --max compared indices


def test_envelope_is_the_per_radius_maximum() -> None:
    nan = float("nan")
    best, which = envelope([[0.5, 0.1, nan], [nan, 0.3, 0.2], [nan, nan, nan]])
    assert best.tolist() == [0.5, 0.3, 0.2]  # exact: the envelope copies values, it computes none
    assert which.tolist() == [0, 1, 1]
    best, which = envelope([[nan, 0.4], [nan, 0.4]])
    assert math.isnan(best[0])  # no curve has a value at this radius
    assert which.tolist() == [-1, 0]  # ... so no curve reaches it; a tie goes to the first curve
    with pytest.raises(ValueError, match="shape"):
        envelope([0.5, 0.3])
