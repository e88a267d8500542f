"""Training methods: one LightningModule subclass per method, each overriding its loss (``training_loss``).

Each method has a card beside it (``<name>_card.py``, :mod:`rsbench.methods.card`) with the facts about its authors'
artifacts that the importer, the report and the run layer read. Importing this package is cheap (no torch), so the
run layer can read the cards at startup: the classes are loaded on first use, ``rsbench.methods.<Class>`` for the
class (or factory) each card names as its ``target`` and the base classes of :mod:`rsbench.methods.base`.
"""

from __future__ import annotations

import importlib
from typing import Any

BASE_NAMES = ("Batch", "SmoothingModule", "StepOutput")
"""What :mod:`rsbench.methods.base` exports through this package."""


def exported() -> dict[str, str]:
    """Every name this package loads on first use, with the module that defines it.

    The base classes and, for each card whose ``target`` lies in this package, its class (or factory).
    """
    from rsbench.methods.card import cards

    names = dict.fromkeys(BASE_NAMES, f"{__name__}.base")
    top, _, here = __name__.partition(".")  # "rsbench" (or a renamed copy of it: rsbench.bench.compare_versions)
    for card in cards():
        module, _, name = card.target.rpartition(".")
        inside = module.partition(".")[2]  # a card names its class from the top of the package
        if module.split(".")[0] == "rsbench" and inside.startswith(f"{here}."):
            names.setdefault(name, f"{top}.{inside}")
    return names


def __getattr__(name: str) -> Any:
    """Load a method's class (and with it torch and Lightning) only when it is asked for."""
    if name == "__all__":
        return sorted(exported())
    module = exported().get(name) if not name.startswith("__") else None
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *exported()})
