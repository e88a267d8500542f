"""The repository's scripts (``experiments/``, ``tools/``) as modules, so that tests call their functions and ``main``
in process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
TOOLS = ROOT / "tools"


def load_script(path: Path) -> ModuleType:
    """The Python file at ``path`` loaded as a fresh module (no interpreter start-up, no ``sys.modules`` entry)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def experiment_script(name: str) -> ModuleType:
    """``experiments/<name>.py``; ``name`` may name a study's script, e.g. ``fashion_mnist_table/subset_bias``."""
    return load_script(EXPERIMENTS / f"{name}.py")


def tool_script(name: str) -> ModuleType:
    """``tools/<name>.py``."""
    return load_script(TOOLS / f"{name}.py")
