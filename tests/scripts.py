"""The scripts under ``experiments/`` as modules, so that tests call their functions and ``main`` in process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def experiment_script(name: str) -> ModuleType:
    """``experiments/<name>.py`` loaded as a fresh module (no interpreter start-up, no ``sys.modules`` entry)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
