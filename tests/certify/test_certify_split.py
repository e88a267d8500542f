"""The certification algorithm stands apart from the run-level pipeline, and the radius cap has one owner (issue 41).

Read from the source, as ``test_layers.py`` reads the packages: the algorithm's modules (select / estimate / bound,
the designs and their confidence sequences, the cap, "certify a group of images") import no module of the pipeline
(settings, records, summary, plot, progress, cost, shards), so the benchmark can time the algorithm's composition
without a run around it, and the pipeline is the only place that knows about files.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.helpers import ROOT

CERTIFY = ROOT / "rsbench" / "certify"
ALGORITHM = (
    "bounds",
    "confidence",
    "seeding",
    "certificates",
    "threat",
    "caps",
    "smooth",
    "grid_noise",
    "designs",
    "sequential",
    "groups",
    "sigma_search",
)
PIPELINE = (
    "pipeline",
    "settings",
    "records",
    "summary",
    "plot",
    "progress",
    "environment",
    "subset",
    "cost",
    "merge",
    "sharding",
    "metrics",
    "dual",
    "validate",
    "checked_runs",
    "strategy",
    "dual_run",
    "dual_checks",
)


def imports(module: str) -> set[str]:
    """Every ``rsbench.certify.<x>`` module the file imports (inside functions too)."""
    tree = ast.parse((CERTIFY / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rsbench.certify."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("rsbench.certify.")}
    return found


def test_every_certify_module_is_on_one_side() -> None:
    modules = {p.stem for p in CERTIFY.glob("*.py")} - {"__init__", "__main__", "data_dependent"}
    assert modules == set(ALGORITHM) | set(PIPELINE)  # data_dependent: its sigma search and its memory replay of rows


@pytest.mark.parametrize("module", ALGORITHM)
def test_the_algorithm_imports_no_part_of_the_pipeline(module: str) -> None:
    assert not imports(module) & set(PIPELINE), f"rsbench/certify/{module}.py imports {imports(module) & set(PIPELINE)}"


def test_the_radius_cap_is_computed_in_one_place() -> None:
    """The closed form (bounds.radius_cap) is called from rsbench/certify/caps.py only; everyone else asks caps."""
    callers = []
    for path in sorted((ROOT / "rsbench").rglob("*.py")):
        if path.name == "caps.py" or (path.parent.name, path.name) == ("certify", "bounds.py"):
            continue
        if re.search(r"\bradius_cap\(", path.read_text()) and "import radius_cap" in path.read_text():
            callers.append(str(path.relative_to(ROOT)))
    assert callers == []
