"""Import the checkpoints the field released (Cohen, SmoothAdv, MACER, Consistency, SmoothMix, CAT-RS, DDRS).

``python -m rsbench.importer origin=cohen path=checkpoint.pth.tar dataset=cifar10 sigma=0.25`` writes an rsbench
checkpoint (see :mod:`rsbench.importer.convert`; each codebase's layout is in :mod:`rsbench.importer.layouts`).
The package is not named ``import`` because that is a Python keyword. Its names (and with them torch) are loaded on
first use, so that ``python -m rsbench.importer --help`` answers at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rsbench.importer.convert import DatasetFacts, import_checkpoint, save_imported

__all__ = ["DatasetFacts", "import_checkpoint", "save_imported"]


def __getattr__(name: str) -> Any:
    """Load the importer's functions only when they are asked for."""
    if name in __all__:
        from rsbench.importer import convert

        return getattr(convert, name)
    raise AttributeError(f"module 'rsbench.importer' has no attribute {name!r}")
