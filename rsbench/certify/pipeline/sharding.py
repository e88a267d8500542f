"""Certification split over independent jobs: ``certify.shard=k certify.num_shards=K``.

Certification is embarrassingly parallel per image: image i's noise streams derive from (certify.seed, i) alone
(:mod:`rsbench.certify.algorithm.seeding`), so any process can certify any image and get the row one process would have
written. Shard k of K certifies the k-th interleaved slice of the selected images (positions k, k + K, k + 2K, ...
of the subset), the same static slicing the DDP processes of one job use (process r of w takes positions r, r + w,
...); a shard run under DDP combines both: position k + K r of every (K w)-th.

Every shard of one certification writes into one folder (``certify.merge_dir``; by default the folder that holds
the shards' run folders, which in a multirun is the sweep folder): its own record ``certify.shard<k>-of-<K>.tsv``,
appended row by row and resumed on its own, beside ``certify_protocol.json`` (which refuses rows of another
protocol, model or number of shards). When the last shard finishes, it merges the records into ``certify.tsv`` and
writes ``metrics.json``, exactly as an unsharded run would (``python -m rsbench.certify.merge <folder>`` does the
same by hand). Nothing here imports torch: the command line is checked with it before a run starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


def check_shard(shard: Any, num_shards: Any) -> None:
    """Refuse a shard that does not exist, in one line naming the values and what is allowed.

    Raises:
        ValueError: ``num_shards`` is not an integer >= 1, or ``shard`` is not an integer in [0, num_shards).
    """
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
        raise ValueError(f"certify.num_shards must be an integer >= 1 (1: no sharding), got {num_shards!r}")
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < num_shards:
        allowed = "0" if num_shards == 1 else f"0 to {num_shards - 1}"
        raise ValueError(
            f"certify.shard={shard!r} does not exist with certify.num_shards={num_shards}: shards are numbered "
            f"{allowed}"
        )


@dataclass(frozen=True)
class Sharding:
    """Which slice of the selected images this job certifies.

    Attributes:
        shard: this job's shard, 0 to num_shards - 1.
        num_shards: how many jobs share the certification (1: this job certifies every image).
    """

    shard: int = 0
    num_shards: int = 1

    def __post_init__(self) -> None:
        check_shard(self.shard, self.num_shards)

    @property
    def sharded(self) -> bool:
        """Whether the certification is split over several jobs."""
        return self.num_shards > 1

    def slice(self, rank: int = 0, world_size: int = 1) -> tuple[int, int]:
        """``(first position, stride)`` of the share of process ``rank`` of ``world_size`` in this shard.

        >>> Sharding(1, 3).slice(rank=1, world_size=2)
        (4, 6)
        """
        return self.shard + self.num_shards * rank, self.num_shards * world_size

    def share(self, items: list[T], rank: int = 0, world_size: int = 1) -> list[T]:
        """The items (the subset's indices) certified by process ``rank`` of ``world_size`` in this shard.

        >>> Sharding(1, 3).share(list(range(10)))
        [1, 4, 7]
        """
        first, stride = self.slice(rank, world_size)
        return items[first::stride]

    def describe(self) -> str:
        """``shard 1 of 3`` (shards counted from 0, as on the command line)."""
        return f"shard {self.shard} of {self.num_shards} (certify.shard={self.shard})"


def owner(position: int, num_shards: int) -> int:
    """The shard that certifies the image at ``position`` in the subset (shards interleave).

    >>> [owner(p, 3) for p in range(5)]
    [0, 1, 2, 0, 1]
    """
    return position % num_shards
