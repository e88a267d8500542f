"""Certification: Cohen et al.'s PREDICT/CERTIFY, their bounds, per-image records and summaries.

``Smooth`` and ``Certificate`` (and with them torch) are loaded on first use, so that ``python -m rsbench.certify
--help``, which imports this package first, answers at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rsbench.certify.smooth import Certificate, Smooth

__all__ = ["Certificate", "Smooth"]


def __getattr__(name: str) -> Any:
    """Load ``Smooth`` and ``Certificate`` only when they are asked for."""
    if name in __all__:
        from rsbench.certify import smooth

        return getattr(smooth, name)
    raise AttributeError(f"module 'rsbench.certify' has no attribute {name!r}")
