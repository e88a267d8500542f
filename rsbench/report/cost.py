"""What a run cost, as a figure a table row can show: GPU-hours on a GPU, core-hours on a CPU.

Runs record ``metrics.json["cost"]`` (:mod:`rsbench.certify.pipeline.cost` fixes its schema): device, threads, seconds
of training and of certification. :func:`run_cost` turns that object, or an older ``metrics.json`` without it, into a
:class:`Cost`: on a GPU, hours = seconds / 3600 (GPU-hours, one GPU per process); on a CPU, hours = seconds x
threads / 3600 (core-hours, the threads the process computed with). An older record gives its certification seconds
as the sum of ``certify.tsv``'s ``time`` column (``time_sum``) and its device from ``metrics.json["environment"]``
(a CPU of unknown threads counts one core per thread it recorded, else one); its training time is unknown. A sharded
certification adds each shard's figures on its own device.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GPU_UNIT = "GPU-h"
CPU_UNIT = "core-h"


@dataclass(frozen=True)
class Cost:
    """Hours spent on a run, by kind of device.

    Attributes:
        gpu_hours: GPU-hours (seconds on a GPU / 3600).
        core_hours: CPU core-hours (seconds x threads / 3600).
        train_known: whether the training time is included (``False``: unknown, e.g. an older record or a
            certification of a given checkpoint, which trained nothing).
        recorded: whether it comes from ``metrics.json["cost"]`` (``False``: derived from an older record).
    """

    gpu_hours: float = 0.0
    core_hours: float = 0.0
    train_known: bool = True
    recorded: bool = True

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.gpu_hours + other.gpu_hours,
            self.core_hours + other.core_hours,
            self.train_known and other.train_known,
            self.recorded and other.recorded,
        )

    def text(self) -> str:
        """``3.2 GPU-h``, ``41 core-h``, ``0.2 GPU-h + 12 core-h``; ``*`` marks a figure without training time.

        >>> Cost(core_hours=0.0123).text(), Cost(gpu_hours=2.5, core_hours=30, train_known=False).text()
        ('0.012 core-h', '2.5 GPU-h + 30 core-h*')
        """
        parts = [f"{_hours(h)} {unit}" for h, unit in ((self.gpu_hours, GPU_UNIT), (self.core_hours, CPU_UNIT)) if h]
        return (" + ".join(parts) or "0 core-h") + ("" if self.train_known else "*")


def run_cost(metrics: Mapping[str, Any], time_sum: float | None = None) -> Cost | None:
    """The cost of one run from its ``metrics.json`` (new or old); ``None`` when nothing says it.

    Args:
        metrics: the run's ``metrics.json``.
        time_sum: the sum of its ``certify.tsv``'s ``time`` column, used when ``metrics`` has no ``cost`` object.
    """
    cost = metrics.get("cost")
    if isinstance(cost, Mapping):
        parts = cost.get("shards") or [cost]  # a sharded run: each shard on its own device
        total = sum((_device_hours(part, part.get("certify_seconds")) for part in parts), Cost())
        train = cost.get("train_seconds")
        if train is not None:
            total = total + _device_hours(cost, train)
        return Cost(total.gpu_hours, total.core_hours, train is not None, recorded=True)
    if time_sum is None or not math.isfinite(time_sum):
        return None
    derived = _device_hours(metrics.get("environment") or {}, time_sum)
    return Cost(derived.gpu_hours, derived.core_hours, train_known=False, recorded=False)


def total_cost(costs: Iterable[Cost | None]) -> Cost | None:
    """The cost of several runs (a table row's seeds); ``None`` when any of them is unknown."""
    total = Cost()
    for cost in costs:
        if cost is None:
            return None
        total = total + cost
    return total


def _device_hours(device: Mapping[str, Any], seconds: Any) -> Cost:
    """``seconds`` on ``device`` (its ``device`` and ``threads``) as GPU- or core-hours."""
    seconds = float(seconds or 0.0)
    if device.get("device") == "cuda":
        return Cost(gpu_hours=seconds / 3600)
    threads = device.get("threads")
    return Cost(core_hours=seconds * (int(threads) if threads else 1) / 3600)


def _hours(hours: float) -> str:
    """Two significant digits, whole hours above 100 (``0.012``, ``3.2``, ``41``, ``1,250``)."""
    if hours >= 100:
        return f"{hours:,.0f}"
    return f"{float(f'{hours:.2g}'):g}"
