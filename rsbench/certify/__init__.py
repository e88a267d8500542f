"""Certification: Cohen et al.'s PREDICT/CERTIFY, their bounds, per-image records and summaries.

Two folders: :mod:`rsbench.certify.algorithm`, the certification algorithm (select / estimate / bound, the
sequential designs, the caps, "certify a group of images"; it knows no file), and :mod:`rsbench.certify.pipeline`,
the run around it (settings, records, resume, shards, summary, plot, progress, cost). ``python -m rsbench.certify``
and ``python -m rsbench.certify.merge`` are the commands.

``Smooth`` and ``Certificate`` (and with them torch) are loaded on first use, so that ``python -m rsbench.certify
--help``, which imports this package first, answers at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rsbench.certify.algorithm.smooth import Certificate, Smooth

__all__ = ["Certificate", "Smooth"]


def __getattr__(name: str) -> Any:
    """Load ``Smooth`` and ``Certificate`` only when they are asked for."""
    if name in __all__:
        from rsbench.certify.algorithm import smooth

        return getattr(smooth, name)
    raise AttributeError(f"module 'rsbench.certify' has no attribute {name!r}")
