"""Training methods: one LightningModule subclass per method, each overriding its loss (``training_loss``).

Each method has a card beside it (``<name>_card.py``, :mod:`rsbench.methods.card`) with the facts about its authors'
artifacts that the importer, the report and the run layer read. Importing this package is cheap (no torch), so the
run layer can read the cards at startup: the classes below are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rsbench.methods.base import Batch, SmoothingModule, StepOutput
    from rsbench.methods.catrs import CATRS
    from rsbench.methods.consistency import ConsistencyRegularization
    from rsbench.methods.denoiser import DenoiserTraining
    from rsbench.methods.gaussian import GaussianAugmentation
    from rsbench.methods.macer import MACER
    from rsbench.methods.smoothadv import SmoothAdv
    from rsbench.methods.smoothmix import SmoothMix
    from rsbench.methods.stability import StabilityTraining
    from rsbench.methods.standard import StandardTraining
    from rsbench.methods.sun2025 import Sun2025

_MODULES = {
    "Batch": "base",
    "SmoothingModule": "base",
    "StepOutput": "base",
    "CATRS": "catrs",
    "ConsistencyRegularization": "consistency",
    "DenoiserTraining": "denoiser",
    "GaussianAugmentation": "gaussian",
    "MACER": "macer",
    "SmoothAdv": "smoothadv",
    "SmoothMix": "smoothmix",
    "StabilityTraining": "stability",
    "StandardTraining": "standard",
    "Sun2025": "sun2025",
}

__all__ = [
    "CATRS",
    "MACER",
    "Batch",
    "ConsistencyRegularization",
    "DenoiserTraining",
    "GaussianAugmentation",
    "SmoothAdv",
    "SmoothMix",
    "SmoothingModule",
    "StabilityTraining",
    "StandardTraining",
    "StepOutput",
    "Sun2025",
]


def __getattr__(name: str) -> Any:
    """Load a method's class (and with it torch and Lightning) only when it is asked for."""
    if name in _MODULES:
        return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
