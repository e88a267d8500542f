"""Certification sharded over independent jobs (issue 41): slices, a stopped shard resumed, the merge, refusals.

The merge must give the unsharded run's rows (every column but ``time``, which is wall-clock) and summary, because
each image's noise streams derive from (seed, image index) alone, whichever job certifies it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rsbench.certify.merge import main as merge_main
from rsbench.certify.pipeline import Certification, merge_shards
from rsbench.certify.records import RecordWriter, read_rows
from rsbench.certify.settings import CertifySettings
from rsbench.certify.sharding import Sharding, check_shard
from rsbench.errors import DamagedFileError, ProtocolMismatchError, RunDirectoryBusyError
from tests.classifiers import IMAGES, SUBJECT

KEYS = {"n0": 20, "n": 200, "alpha": 0.01, "batch_size": 100}
SUMMARY_KEYS = ("acr", "certified_accuracy", "abstain_rate", "num_images", "radius_cap", "subset", "mean_samples")


def untimed(directory: Path, stem: str = "certify") -> list[tuple]:
    """Every column of a record but ``time``."""
    return [
        (r.idx, r.label, r.predict, r.radius, r.correct, r.count, r.n, r.pA_lower, r.sigma, r.sound)
        for r in read_rows(directory / f"{stem}.tsv")
    ]


def test_shards_slice_the_subset_like_ddp_ranks_and_cover_it_once() -> None:
    indices = list(range(3, 100, 7))
    shares = [Sharding(k, 3).share(indices) for k in range(3)]
    assert sorted(i for share in shares for i in share) == indices  # every image once
    assert shares[1] == indices[1::3]  # the k-th interleaved slice
    # a shard run under DDP: rank r of w in shard k takes positions k + K r, k + K (r + w), ...
    assert Sharding(1, 3).share(indices, rank=1, world_size=2) == indices[1::3][1::2]


@pytest.mark.parametrize(
    ("shard", "num_shards", "message"),
    [
        (2, 2, "certify.shard=2 does not exist with certify.num_shards=2: shards are numbered 0 to 1"),
        (-1, 2, "certify.shard=-1 does not exist"),
        (0, 0, "certify.num_shards must be an integer >= 1 (1: no sharding), got 0"),
        (0, 1.5, "certify.num_shards must be an integer >= 1"),
    ],
)
def test_a_shard_that_does_not_exist_is_refused_in_one_line(shard: int, num_shards: int, message: str) -> None:
    with pytest.raises(ValueError, match=r"^certify\.") as refused:
        check_shard(shard, num_shards)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match=re.escape(message)):
        CertifySettings.from_keys(shard=shard, num_shards=num_shards)


@pytest.mark.parametrize("mode", ["standard", "sequential", "data_dependent"])
def test_a_stopped_shard_resumes_and_the_merge_is_the_unsharded_run(tmp_path: Path, mode: str) -> None:
    keys = dict(KEYS)
    if mode == "sequential":
        keys.update(mode="sequential", n=2000, first_look=100)
    if mode == "data_dependent":
        keys.update(sigma_mode="data_dependent", sigma_iters=2, sigma_samples=2)
    whole = Certification(CertifySettings.from_keys(**keys), tmp_path / "whole").run(SUBJECT, IMAGES)
    shared = tmp_path / "shared"
    shards = [Certification(CertifySettings.from_keys(**keys, shard=k, num_shards=3), shared) for k in range(3)]

    calls: list[int] = []
    stopped = shards[0].run(SUBJECT, IMAGES, should_stop=lambda: bool(calls.append(1)) or len(calls) == 2)
    assert stopped.stopped
    assert stopped.summary is None
    first = shards[1].run(SUBJECT, IMAGES)
    assert first.summary is None
    assert first.waiting == (0, 2)
    assert not (shared / "metrics.json").exists()
    with pytest.raises(DamagedFileError, match=r"shards 0 \(\d+ images\), 2 \(4 images\) of 3 have images left"):
        merge_shards(shared)
    assert shards[2].run(SUBJECT, IMAGES).waiting == (0,)
    last = shards[0].run(SUBJECT, IMAGES)  # resumed after its rows: the last to finish merges
    assert last.summary is not None

    assert untimed(shared) == untimed(tmp_path / "whole")
    if mode == "data_dependent":
        assert untimed(shared, "certify_fixed_sigma") == untimed(tmp_path / "whole", "certify_fixed_sigma")
    assert sorted(p.name for p in shared.glob("*.tsv")) == sorted(p.name for p in (tmp_path / "whole").glob("*.tsv"))
    merged, alone = (json.loads((d / "metrics.json").read_text()) for d in (shared, tmp_path / "whole"))
    assert whole.summary is not None
    for key in SUMMARY_KEYS:
        assert merged[key] == alone[key], key
    assert merged["shards"] == 3
    assert [s["images"] for s in merged["cost"]["shards"]] == [4, 4, 4]
    assert merged["cost"]["samples"] == alone["cost"]["samples"]
    assert merged["cost"]["images"] == alone["cost"]["images"] == 12


def test_the_merge_command_merges_and_refuses_what_is_missing(tmp_path: Path, capsys) -> None:
    shared = tmp_path / "shared"
    Certification(CertifySettings.from_keys(**KEYS, shard=0, num_shards=2), shared).run(SUBJECT, IMAGES)
    assert merge_main([str(shared)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error: ")
    assert "shards 1 (6 images) of 2" in error
    assert error.count("\n") == 1
    assert merge_main([str(tmp_path)]) == 2  # no sharded certification there
    assert "holds no sharded certification" in capsys.readouterr().err

    Certification(CertifySettings.from_keys(**KEYS, shard=1, num_shards=2), shared).run(SUBJECT, IMAGES)
    merged = (shared / "certify.tsv").read_text()
    assert not list(shared.glob("certify.shard*"))  # folded into certify.tsv
    assert merge_main([str(shared)]) == 0  # by hand, again: the same rows
    assert (shared / "certify.tsv").read_text() == merged
    assert "merged 12 images" in capsys.readouterr().out


def test_shards_of_another_count_or_protocol_are_not_mixed(tmp_path: Path) -> None:
    Certification(CertifySettings.from_keys(**KEYS, shard=0, num_shards=2), tmp_path).run(SUBJECT, IMAGES)
    with pytest.raises(ProtocolMismatchError, match="num_shards: stored 2, requested 3"):
        Certification(CertifySettings.from_keys(**KEYS, shard=1, num_shards=3), tmp_path).run(SUBJECT, IMAGES)
    with pytest.raises(ProtocolMismatchError, match="n: stored 200, requested 300"):
        Certification(CertifySettings.from_keys(**{**KEYS, "n": 300}, shard=1, num_shards=2), tmp_path).run(
            SUBJECT, IMAGES
        )


def test_a_shard_started_twice_is_refused(tmp_path: Path) -> None:
    record = tmp_path / "certify.shard0-of-2.tsv"
    with RecordWriter(record, exclusive=True), pytest.raises(RunDirectoryBusyError, match="another process"):
        RecordWriter(record, exclusive=True).__enter__()
    with RecordWriter(record, exclusive=True):  # released when the first writer closed
        pass


def test_memory_mode_is_not_sharded() -> None:
    with pytest.raises(ValueError, match="sigma_mode=memory replays every certificate"):
        CertifySettings.from_keys(sigma_mode="memory", num_shards=2)
