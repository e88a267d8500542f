"""The certification algorithm stands apart from the run-level pipeline, and the radius cap has one owner (issue 41).

Read from the source, as ``test_layers.py`` reads the packages, and from the folders themselves: the algorithm's
modules (``rsbench/certify/algorithm/``: select / estimate / bound, the designs and their confidence sequences, the
cap, "certify a group of images") import no module of the pipeline (``rsbench/certify/pipeline/``: settings,
records, summary, plot, progress, cost, shards) and nothing above the foundation layers, so the benchmark can time
the algorithm's composition without a run around it, and the pipeline is the only place that knows about files.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.helpers import ROOT

CERTIFY = ROOT / "rsbench" / "certify"
ALGORITHM = sorted(p.stem for p in (CERTIFY / "algorithm").glob("*.py") if p.stem != "__init__")
PIPELINE = sorted(p.stem for p in (CERTIFY / "pipeline").glob("*.py") if p.stem != "__init__")
ENTRY_POINTS = {"__init__.py", "__main__.py", "merge.py"}  # the package's lazy Smooth, and its two commands
FOUNDATION = ("rsbench.errors", "rsbench.noise", "rsbench.noise_distributions", "rsbench.files")
"""What the algorithm may import from outside itself (layer 1 of ``test_layers.py``, less the stop requests)."""


def imports(path: str) -> set[str]:
    """Every rsbench module the file ``rsbench/certify/<path>.py`` imports (inside functions too)."""
    tree = ast.parse((CERTIFY / f"{path}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rsbench"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("rsbench")}
    return found


def test_certify_holds_the_two_folders_and_its_entry_points_only() -> None:
    entries = {p.name for p in CERTIFY.iterdir() if p.name != "__pycache__"}
    assert entries == {"algorithm", "pipeline"} | ENTRY_POINTS
    assert ALGORITHM
    assert PIPELINE
    assert not set(ALGORITHM) & set(PIPELINE)


@pytest.mark.parametrize("module", ALGORITHM)
def test_the_algorithm_imports_no_part_of_the_pipeline(module: str) -> None:
    outside = {
        name
        for name in imports(f"algorithm/{module}")
        if not name.startswith("rsbench.certify.algorithm") and name not in FOUNDATION
    }
    assert not outside, f"rsbench/certify/algorithm/{module}.py imports {sorted(outside)}"


def test_the_radius_cap_is_computed_in_one_place() -> None:
    """The closed form (bounds.radius_cap) is called from certify/algorithm/caps.py only; everyone else asks caps."""
    callers = []
    for path in sorted((ROOT / "rsbench").rglob("*.py")):
        if path.name == "caps.py" or (path.parent.name, path.name) == ("algorithm", "bounds.py"):
            continue
        if re.search(r"\bradius_cap\(", path.read_text()) and "import radius_cap" in path.read_text():
            callers.append(str(path.relative_to(ROOT)))
    assert callers == []


def test_certifying_a_group_is_composed_in_one_place() -> None:
    """CERTIFY's estimation step is called by Smooth's own composition only, sequential CERTIFY's by groups.py only.

    Everyone else (the pipeline, dual smoothing, the benchmarks) certifies a group through
    :func:`rsbench.certify.algorithm.groups.certify_images` or ``Smooth.certify_batch``.
    """
    smooth, groups = CERTIFY / "algorithm" / "smooth.py", CERTIFY / "algorithm" / "groups.py"
    estimating, sequential = [], []
    for path in sorted((ROOT / "rsbench").rglob("*.py")):
        text = path.read_text()
        if path != smooth and re.search(r"\.estimate\(", text):
            estimating.append(str(path.relative_to(ROOT)))
        if path != groups and re.search(r"sequential import .*\bcertify_group\b", text):
            sequential.append(str(path.relative_to(ROOT)))
    assert estimating == []
    assert sequential == []
