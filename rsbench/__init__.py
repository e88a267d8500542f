"""rsbench: train and certify randomized-smoothing classifiers with every well-known l2 method.

``from rsbench import Smooth`` gives Cohen et al.'s PREDICT and CERTIFY; ``python -m rsbench`` trains and certifies.
Importing the package is cheap (no torch): ``Smooth`` and ``Certificate`` are loaded on first use, so that
``python -m rsbench --help`` and ``--cfg job`` answer at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rsbench.runs.resolvers import register_resolvers

if TYPE_CHECKING:
    from rsbench.certify import Certificate, Smooth

register_resolvers()

__version__ = "0.1.0"
__all__ = ["Certificate", "Smooth", "__version__"]


def __getattr__(name: str) -> Any:
    """Load ``Smooth`` and ``Certificate`` (and with them torch) only when they are asked for."""
    if name in ("Certificate", "Smooth"):
        from rsbench import certify

        return getattr(certify, name)
    raise AttributeError(f"module 'rsbench' has no attribute {name!r}")
