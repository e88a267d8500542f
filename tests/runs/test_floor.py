"""The command floor: every ``python -m rsbench.*`` refuses a bad key, option or value in one line, before torch loads.

Each entry point runs as ``python -m`` does (``runpy``, in a child process, :func:`tests.test_refusals.run_module`),
which then lists the heavy modules it had loaded. The floor's parser and stop handling are tested in this process.
"""

from __future__ import annotations

import ast
import signal
from pathlib import Path

import pytest

from rsbench.errors import ConfigError
from rsbench.runs.floor import CommandParser, allowed, run_guarded
from rsbench.stop import StopRequested
from tests.helpers import ROOT
from tests.runs.test_refusals import run_module

REFUSALS = {
    # module: (a bad command line, what its one error line says)
    "rsbench": (("sigmaa=0.5", "logger=none"), "there is no key sigmaa in the config; did you mean sigma?"),
    "rsbench.certify": (("certfy.n=10",), "there is no key certfy.n"),
    "rsbench.dual": (("stage=labels", "certify.noise=laplac"), "certify.noise"),
    "rsbench.importer": (("origin=cohen", "pathh=x"), "there is no key pathh in the config; did you mean path?"),
    "rsbench.leaderboard": (("datset=cifar10",), "unknown key 'datset' (allowed: dataset"),
    "rsbench.report": (("runs", "--radiis", "0"), "unknown option --radiis (allowed: --help, --radii"),
    "rsbench.table": (("runs", "--ci-method", "wilsn"), "'wilsn' is not a choice (allowed: beta, wilson"),
    "rsbench.certify.merge": (("--folder", "x"), "unknown option --folder (allowed: --help)"),
    "rsbench.published.importer": (("clone", "--taget", "x"), "unknown option --taget (allowed: --help, --target;"),
    "rsbench.importer.plain": (("a.pt", "b.pt", "--force"), "unknown option --force"),
    "rsbench.bench.replay": (("--cap", "two"), "'two' is not a choice (allowed: posterior, one)"),
    "rsbench.bench.precision_agreement": (("a", "b", "--stepp", "1"), "unknown option --stepp"),
    "rsbench.bench.sequential_check": (("a", "b", "--sed", "1"), "did you mean --seed?"),
    "rsbench.bench.cli_startup": (("--repeat", "x"), "argument --repeats: invalid int value: 'x'"),
    "rsbench.bench.attack_cost": (("--imagess", "2"), "unknown option --imagess (allowed: --help, --ckpt"),
    "rsbench.bench.certify_throughput": (("--variants", "bf17"), "'bf17' is not a choice (allowed: bf16,"),
    "rsbench.bench.compare_versions": ((), "the following arguments are required: --other"),
    "rsbench.bench.denoised_throughput": (("--arch", "lenett"), "is not a choice (allowed: cifar_resnet110, cifar_"),
    "rsbench.bench.table_cost": (("--arch", "resnet50"), "'resnet50' is not a choice (allowed: cifar_resnet110,"),
    "rsbench.bench.training_cost": (("--methods", "gausian"), "'gausian' is not a choice (allowed: "),
    "rsbench.bench.training_throughput": (("--layouts", "bf32"), "'bf32' is not a choice (allowed: contiguous,"),
}
TORCH_FIRST: set[str] = set()
"""Entry points whose module imports torch at the top, so that a refusal comes after torch loads: none now (a
benchmark imports torch and Lightning inside the functions that use them, after its command line is checked)."""
HEAVY_FOR_A_REFUSAL = ("torch", "pytorch_lightning", "lightning", "lightning_fabric")


def entry_points() -> dict[str, Path]:
    """Every module ``python -m`` runs, with its file: a ``__main__.py`` (named by its package) or a main block."""
    found = {}
    for path in (ROOT / "rsbench").rglob("*.py"):
        tree = ast.parse(path.read_text())
        main_block = any(
            isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test)
            for node in tree.body
        )
        if path.name == "__main__.py" or main_block:
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__main__" else parts)] = path
    return found


def test_every_entry_point_is_on_the_floor() -> None:
    """A new ``python -m`` command must be added here: refused before torch, or listed as a benchmark that is not."""
    assert set(entry_points()) == set(REFUSALS) | TORCH_FIRST
    imports_torch = {
        module
        for module, path in entry_points().items()
        if any(
            line.startswith(("import torch", "from torch", "import pytorch_lightning"))
            for line in path.read_text().splitlines()
        )
    }
    assert imports_torch == TORCH_FIRST  # no more, no fewer


@pytest.mark.parametrize("module", sorted(REFUSALS))
def test_a_bad_key_or_option_is_one_line_before_torch(module: str, tmp_path: Path) -> None:
    args, message = REFUSALS[module]
    seen = run_module(module, *args, cwd=tmp_path)
    errors = seen["errors"]
    assert isinstance(errors, list)
    assert len(errors) == 1, seen
    assert message in errors[0], errors[0]
    assert seen["code"] == 2
    assert not seen["traceback"]
    heavy = seen["heavy"]
    assert isinstance(heavy, list)
    assert not set(heavy) & set(HEAVY_FOR_A_REFUSAL), f"imported {heavy} before refusing"
    assert list(tmp_path.iterdir()) == []  # nothing written


def parser() -> CommandParser:
    p = CommandParser("python -m rsbench.example")
    p.add_argument("paths", nargs="+")
    p.add_argument("--radii", nargs="+", type=float, default=[0.0])
    p.add_argument("--ci-method", choices=["beta", "wilson"], default="beta")
    return p


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["x", "--radiis", "0"], "rsbench: error: unknown option --radiis (allowed: --help, --radii, --ci-method; "),
        (["x", "--ci-method", "wilsn"], "'wilsn' is not a choice (allowed: beta, wilson; did you mean wilson?)"),
        (["x", "--radii", "abc"], "invalid float value: 'abc' (python -m rsbench.example --help lists the arguments)"),
        ([], "the following arguments are required: paths"),
    ],
)
def test_the_parser_refuses_in_one_line_with_the_close_names(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(argv)
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("rsbench: error: ")
    assert error.count("\n") == 1
    assert message in error


def test_the_parser_accepts_what_argparse_accepts() -> None:
    args = parser().parse_args(["a", "b", "--radi", "0", "0.5", "--ci-method", "wilson"])  # a prefix is the option
    assert (args.paths, args.radii, args.ci_method) == (["a", "b"], [0.0, 0.5], "wilson")


def test_allowed_names_the_close_ones_only_when_there_are_some() -> None:
    assert allowed("zzz", ["beta", "wilson"]) == "(allowed: beta, wilson)"
    assert allowed("wilsom", ["beta", "wilson"]) == "(allowed: beta, wilson; did you mean wilson?)"


def test_a_stop_ends_the_work_with_the_signals_status_and_how_to_do_it_again(caplog: pytest.LogCaptureFixture) -> None:
    def work() -> int:
        raise StopRequested(signal.SIGTERM)

    assert run_guarded(work, "merging shards", "python -m rsbench.certify.merge x") == 128 + signal.SIGTERM
    assert "stopped by SIGTERM while merging shards; to do it again: python -m rsbench.certify.merge x" in caplog.text
    assert run_guarded(lambda: 0, "merging shards", "again") == 0


def test_a_request_error_met_while_working_is_one_line_and_a_bug_keeps_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refused() -> int:
        raise ConfigError("certify.n must be an integer >= 1, got 0")

    assert run_guarded(refused, "writing the report", "again") == 2
    assert capsys.readouterr().err == "rsbench: error: certify.n must be an integer >= 1, got 0\n"

    def bug() -> int:
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_guarded(bug, "writing the report", "again")
