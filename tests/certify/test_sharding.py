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
from rsbench.certify.pipeline.certification import Certification, merge_shards
from rsbench.certify.pipeline.records import RecordWriter
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.sharding import Sharding, check_shard
from rsbench.errors import DamagedFileError, ProtocolMismatchError, RunDirectoryBusyError
from tests.classifiers import IMAGES, SUBJECT
from tests.helpers import untimed

KEYS = {"n0": 20, "n": 200, "alpha": 0.01, "batch_size": 100}
SUMMARY_KEYS = ("acr", "certified_accuracy", "abstain_rate", "num_images", "radius_cap", "subset", "mean_samples")


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

    assert untimed(shared / "certify.tsv") == untimed(tmp_path / "whole" / "certify.tsv")
    if mode == "data_dependent":
        assert untimed(shared / "certify_fixed_sigma.tsv") == untimed(tmp_path / "whole" / "certify_fixed_sigma.tsv")
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


def test_two_shards_started_at_once_with_different_protocols_are_never_both_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving forced: shard 0 (alpha 0.01) pauses right after its protocol check, before it writes, while
    shard 1 (alpha 0.3) starts. The check and the write are one step under the folder's lock, and a registered shard's
    protocol binds before any row exists, so shard 1 is refused instead of half the rows landing at alpha 0.3 under a
    protocol file saying 0.01."""
    import threading

    from rsbench.certify.pipeline import certification as pipeline

    checked, proceed = threading.Event(), threading.Event()
    real = pipeline.check_protocol

    def paused(directory: Path, protocol: dict, *args: object, **kwargs: object) -> None:
        real(directory, protocol, *args, **kwargs)
        if protocol["alpha"] == 0.01:
            checked.set()
            proceed.wait(timeout=30)

    monkeypatch.setattr(pipeline, "check_protocol", paused)
    errors: dict[int, BaseException] = {}

    def start(shard: int, alpha: float) -> threading.Thread:
        settings = CertifySettings.from_keys(**{**KEYS, "alpha": alpha}, shard=shard, num_shards=2)

        def certify() -> None:
            try:
                Certification(settings, tmp_path).run(SUBJECT, IMAGES)
            except BaseException as error:  # (the outcome of the thread, asserted below)
                errors[shard] = error

        thread = threading.Thread(target=certify)
        thread.start()
        return thread

    first = start(0, 0.01)
    assert checked.wait(timeout=60)
    second = start(1, 0.3)  # checks while shard 0 has checked but not yet written
    second.join(timeout=1)  # (it waits for the folder's lock)
    proceed.set()
    first.join(timeout=120)
    second.join(timeout=120)
    assert 0 not in errors
    assert isinstance(errors.get(1), ProtocolMismatchError), errors
    assert "alpha: stored 0.01, requested 0.3" in str(errors[1])
    assert json.loads((tmp_path / "certify_protocol.json").read_text())["alpha"] == 0.01
    assert not (tmp_path / "certify.shard1-of-2.tsv").exists()  # no row at alpha 0.3
    assert not (tmp_path / "metrics.json").exists()


def test_a_damaged_shard_register_is_refused_with_advice_that_works(tmp_path: Path, capsys) -> None:
    """Rerunning a shard used to meet the same damaged file; the advice now is to delete it and rerun every shard."""
    shards = [Certification(CertifySettings.from_keys(**KEYS, shard=k, num_shards=2), tmp_path) for k in range(2)]
    shards[0].run(SUBJECT, IMAGES)
    (tmp_path / "certify_shards.json").write_text('{"settings": {"n0"')  # cut short
    with pytest.raises(DamagedFileError, match="delete it and rerun every shard") as refused:
        shards[1].run(SUBJECT, IMAGES)
    assert "\n" not in str(refused.value)
    assert merge_main([str(tmp_path)]) == 2
    assert "delete it and rerun every shard" in capsys.readouterr().err
    (tmp_path / "certify_shards.json").unlink()  # as the message says
    assert shards[0].run(SUBJECT, IMAGES).waiting == (1,)  # its rows kept: it only registers again
    merged = shards[1].run(SUBJECT, IMAGES)
    assert merged.summary is not None
    assert merged.summary["num_images"] == 12


def test_a_damaged_protocol_on_resume_is_one_line_whose_advice_works(tmp_path: Path) -> None:
    """A damaged certify_protocol.json on resume was a raw JSONDecodeError traceback."""
    settings = CertifySettings.from_keys(**KEYS)
    calls: list[int] = []
    assert (
        Certification(settings, tmp_path)
        .run(SUBJECT, IMAGES, should_stop=lambda: len(calls.append(1) or calls) == 3)
        .stopped
    )
    (tmp_path / "certify_protocol.json").write_text('{"alpha": 0.0')
    with pytest.raises(
        DamagedFileError, match=r"certify_protocol.json is damaged \(.*\), so the rows beside it"
    ) as refused:
        Certification(settings, tmp_path).run(SUBJECT, IMAGES)
    assert "\n" not in str(refused.value)
    assert "certify*.tsv and certify_protocol.json away" in str(refused.value)
    moved = tmp_path / "moved"
    moved.mkdir()
    for path in [*tmp_path.glob("certify*.tsv"), tmp_path / "certify_protocol.json"]:
        path.rename(moved / path.name)
    outcome = Certification(settings, tmp_path).run(SUBJECT, IMAGES)
    assert outcome.summary is not None
    assert outcome.summary["num_images"] == 12
