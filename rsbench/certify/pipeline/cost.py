"""What a run cost, recorded in ``metrics.json["cost"]`` so that a table row can say it.

The object's schema is fixed for every reader (``rsbench.report``, the leaderboard)::

    {"device": "cpu" | "cuda", "device_name": str, "torch": str, "precision": str, "threads": int,
     "train_seconds": float | null, "certify_seconds": float, "samples": int, "images": int}

``certify_seconds`` is the sum of ``certify.tsv``'s ``time`` column over every record of the run (the seconds the
certifying processes spent on the images, whichever process, resume or shard computed each row), so it is also what
a reader derives for records written before the object existed. ``samples`` counts the noise samples drawn for the
certificates: n0 selection and the estimation samples each row drew (its ``n`` column), and for per-input-sigma rows
the sigma search's draws too; for a dual row (:mod:`rsbench.certify.pipeline.dual_run`) also the router's selection and
estimation samples, and the routed expert's only where the router chose one. ``train_seconds`` is the training time
of the run (the seconds of the epochs it trained, summed over resumes:
:class:`rsbench.runs.training_clock.TrainingClock`), ``null`` for a run that trained nothing. A sharded
certification adds ``shards``: the same figures per shard, with each shard's device, since the shards of a SLURM
array may run on different GPUs. An unsharded certification resumed on other machines adds ``segments``: per
certifying machine, in order, its device, device name, torch and threads with the figures of the rows it certified
(from ``certify_segments.json``, which records where each one started); ``device_name`` then names them all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rsbench.certify.pipeline.records import CertificationRow
from rsbench.certify.pipeline.sharding import owner

SEGMENT_KEYS = ("device", "device_name", "torch", "threads")
"""What tells one certifying machine from another, in ``shards`` and ``segments``."""


def certification_cost(
    records: Mapping[str, Sequence[CertificationRow]],
    *,
    n0: int,
    environment: Mapping[str, Any],
    precision: str,
    train_seconds: float | None = None,
    extra_samples: Mapping[str, int] | None = None,
    shards: Mapping[int, Mapping[str, Any]] | None = None,
    segments: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``cost`` object of a run (see the module docstring).

    Args:
        records: each record's rows (``certify`` and, for per-input sigma modes, the sound fixed-sigma one), every
            list in the subset's order.
        n0: selection samples per certificate.
        environment: the certifying process's :func:`rsbench.certify.pipeline.environment.environment`.
        precision: the network's precision as evaluated (``fp32``, ``bf16``, ``fp16``).
        train_seconds: the run's training time, ``None`` when it trained nothing.
        extra_samples: samples per row drawn besides CERTIFY's, by record (the per-input sigma search).
        shards: for a sharded certification, each shard's environment by shard number.
        segments: for an unsharded one, its machines in order (``certify_segments.json``: each one's environment and
            the rows each record held when it started); reported when there are two or more.
    """
    extra = dict(extra_samples or {})
    main = next(iter(records.values()), [])
    cost: dict[str, Any] = {
        "device": environment.get("device"),
        "device_name": environment.get("device_name"),
        "torch": environment.get("torch"),
        "precision": precision,
        "threads": environment.get("threads"),
        "train_seconds": None if train_seconds is None else round(float(train_seconds), 3),
        **_figures(records, n0, extra, range(len(main))),
    }
    if shards:
        count = len(shards)
        cost["device_name"] = " + ".join(sorted({str(s.get("device_name")) for s in shards.values()}))
        cost["shards"] = [
            {
                "shard": shard,
                **{key: shards[shard].get(key) for key in ("device", "device_name", "torch", "threads")},
                **_figures(records, n0, extra, [p for p in range(len(main)) if owner(p, count) == shard]),
            }
            for shard in sorted(shards)
        ]
    if segments and len(segments) > 1:
        cost["device_name"] = " + ".join(dict.fromkeys(str(s.get("device_name")) for s in segments))
        cost["segments"] = [
            {key: segment.get(key) for key in SEGMENT_KEYS} | _segment_figures(records, n0, extra, segments, k)
            for k, segment in enumerate(segments)
        ]
    return cost


def _segment_figures(
    records: Mapping[str, Sequence[CertificationRow]],
    n0: int,
    extra: Mapping[str, int],
    segments: Sequence[Mapping[str, Any]],
    k: int,
) -> dict[str, Any]:
    """Seconds, samples and images of the rows segment ``k`` certified: from its first rows to the next one's."""
    seconds, samples = 0.0, 0
    for stem, rows in records.items():
        start = int(segments[k]["rows"].get(stem, 0))
        end = int(segments[k + 1]["rows"].get(stem, len(rows))) if k + 1 < len(segments) else len(rows)
        seconds += sum(row.time for row in rows[start:end])
        samples += sum(_samples(row, n0) + extra.get(stem, 0) for row in rows[start:end])
    main = next(iter(records))
    first = int(segments[k]["rows"].get(main, 0))
    last = int(segments[k + 1]["rows"].get(main, 0)) if k + 1 < len(segments) else len(records[main])
    return {"certify_seconds": round(float(seconds), 3), "samples": int(samples), "images": max(last - first, 0)}


def _figures(
    records: Mapping[str, Sequence[CertificationRow]], n0: int, extra: Mapping[str, int], positions: Sequence[int]
) -> dict[str, Any]:
    """Seconds, samples and images of the rows at ``positions`` (in the subset's order) of every record."""
    seconds = sum(rows[p].time for rows in records.values() for p in positions if p < len(rows))
    samples = sum(
        _samples(rows[p], n0) + extra.get(stem, 0) for stem, rows in records.items() for p in positions if p < len(rows)
    )
    return {"certify_seconds": round(float(seconds), 3), "samples": int(samples), "images": len(positions)}


def _samples(row: CertificationRow, n0: int) -> int:
    """The noise samples of a row's certificate: n0 selection and its ``n``; a dual row's router estimation too.

    A dual row whose router abstained (``expert`` -1) ran no expert, so it drew no expert selection samples.
    """
    selection = 0 if row.expert == -1 else n0
    return selection + row.n + (row.router_n or 0)
