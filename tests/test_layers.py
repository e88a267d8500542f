"""The architecture holds: rsbench's packages are layers, each imports only from the layers below it, no cycles.

Read from the source (every ``import`` statement, inside functions too), so a lazy import cannot hide an upward
dependency or a cycle. The layers are the README's architecture section.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "rsbench"
LAYERS: dict[str, float] = {
    # 1: what every layer uses
    "rsbench.errors": 1,
    "rsbench.noise": 1,
    "rsbench.noise_distributions": 1,
    "rsbench.stop": 1,
    "rsbench.loading": 1,
    "rsbench.files": 1,
    # 2: data, networks, and the checkpoint format (its reader builds the network a signature names)
    "rsbench.data": 2,
    "rsbench.archs": 2,
    "rsbench.checkpoint": 2,
    # 3: certification, Lightning-free, knowing no method: the algorithm, and above it the run pipeline (3.5)
    "rsbench.certify": 3,
    "rsbench.certify.algorithm": 3,
    "rsbench.certify.pipeline": 3.5,
    "rsbench.certify.merge": 3.5,  # the command that merges the pipeline's shards
    # 4: the training methods (LightningModules), built on the algorithm (CAT-RS's teacher votes, DS^2's search)
    "rsbench.methods": 4,
    # 5: what can be certified and how it is read
    "rsbench.models": 5,
    "rsbench.attack": 5,  # attacks the smoothed classifier with the methods' PGD (rsbench.methods.attacks)
    # 6: the run lifecycle
    "rsbench.runs": 6,
    # 7: tools on top
    "rsbench.report": 7,
    "rsbench.published": 7,  # published results: the released logs' catalogue, reader, paths, pairing, importer
    "rsbench.leaderboard": 7,  # the published logs and every run, paired (reads rsbench.report, rsbench.published)
    "rsbench.importer": 7,
    "rsbench.bench": 7,
    "rsbench.dual": 7,  # dual randomized smoothing's stages: runs expert and router training and certification
}
TOP = 8  # entry points: the package's lazy `from rsbench import Smooth` and each `python -m ...` (__main__, table)
ENTRY_POINTS = ("rsbench", "rsbench.table", "rsbench.certify.merge")  # (and every __main__)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> float:
    """The layer of a module: its entry in :data:`LAYERS` (the longest prefix), or :data:`TOP` for entry points."""
    if module in ENTRY_POINTS or module.endswith(".__main__"):
        return TOP
    owners = [prefix for prefix in LAYERS if module == prefix or module.startswith(prefix + ".")]
    if not owners:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (and to the README's architecture section)")
    return LAYERS[max(owners, key=len)]


def imports(module: str) -> Iterator[tuple[str, int]]:
    """Every rsbench module ``module`` imports (at module level or in a function), with the line."""
    tree = ast.parse(MODULES[module].read_text())
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], base]).strip(".")
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # `import a.b.c` of a function or class: its module
                name = name.rpartition(".")[0]
            if name.startswith("rsbench"):
                yield name, node.lineno


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_nothing_imports_upward(module: str) -> None:
    upward = [
        f"{module}:{line} imports {target} (layer {layer(target)} > {layer(module)})"
        for target, line in imports(module)
        if layer(target) > layer(module)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    graph = {module: {target for target, _ in imports(module) if target != module} for module in MODULES}
    for module in graph:  # a package and its own modules may import each other (Python binds submodules first)
        graph[module] = {t for t in graph[module] if not (t.startswith(module + ".") or module.startswith(t + "."))}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_top_level_shows_the_layers() -> None:
    """``ls rsbench``: the layers' packages and the few foundation modules, nothing else."""
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    packages = {
        "data",
        "archs",
        "certify",
        "methods",
        "models",
        "attack",
        "runs",
        "report",
        "published",
        "leaderboard",
        "importer",
        "bench",
        "dual",
    }
    modules = {
        "__init__.py",
        "__main__.py",
        "errors.py",
        "noise.py",
        "noise_distributions.py",
        "stop.py",
        "loading.py",
        "files.py",
        "checkpoint.py",
    }
    assert entries == packages | modules | {"table.py"}  # table.py: the old name of `python -m rsbench.report`
