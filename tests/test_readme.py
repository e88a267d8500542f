"""Every command the README and the docs/ pages show is a valid request, and the README stays a user guide.

Each ``python -m rsbench ...`` (also ``.certify`` and ``.importer``) in backticks or a code block, and each bare list
of overrides in a recipes table (``| What | Command |``), goes through the check every run makes before torch is
imported (:func:`rsbench.runs.request.check_request`) and, when it is a single run, through Hydra's composition (what
``--cfg job`` prints). ``python -m rsbench.report ...`` commands go through the report's own argument parser.
Commands with placeholders (``<run dir>``, ``...``) are read as far as they are written. What only running can show
(an empty subset, an unreachable radius cap) is refused by the run itself and has tests of its own
(tests/runs/test_cli.py).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from rsbench.report.__main__ import parser as report_parser
from rsbench.runs.cli import config_dir
from rsbench.runs.request import check_request
from tests.helpers import ROOT, slug

CONFIGS = {"rsbench": "config", "rsbench.certify": "certify_model", "rsbench.importer": "importer"}
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|/abs/path|mypkg")
OVERRIDE = re.compile(r"^[+~]?[A-Za-z_][\w./@-]*=\S+$")
COMMAND = re.compile(r"python -m (rsbench(?:\.certify|\.importer|\.report)?)(?![.\w])([^`;&|#]*)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_LINES = 400


def arguments_of(text: str) -> tuple[str, ...] | None:
    """The arguments as a shell splits them, without those holding a placeholder; ``None`` when a placeholder is
    where the configs come from (``hydra.searchpath=[file:///abs/path/...]``: the command cannot be checked here)."""
    words = shlex.split(PLACEHOLDER.sub("PLACEHOLDER", text.replace("\\\n", " ")))
    if any(w.startswith("hydra.searchpath") and "PLACEHOLDER" in w for w in words):
        return None
    return tuple(w for w in words if "PLACEHOLDER" not in w)


def page_commands(path: Path) -> set[tuple[str, tuple[str, ...]]]:
    """``(module, arguments)`` of every command on one page."""
    text = path.read_text()
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    spans = [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
    spans += [line for block in blocks for line in re.sub(r"\\\n\s*", " ", block).splitlines()]
    commands: set[tuple[str, tuple[str, ...]]] = set()
    for span in spans:
        if (match := COMMAND.match(span.strip())) and (arguments := arguments_of(match.group(2))) is not None:
            commands.add((match.group(1), arguments))
    for table in text.split("| What | Command |")[1:]:  # the recipes tables: overrides given bare
        for row in re.findall(r"^\| [^|]+ \| (.+) \|$", table.split("\n\n", 1)[0], re.M):
            # a row's command, and its group choices for the group's keys, apply to the spans after them
            module, choices = "rsbench", list[str]()
            for span in re.findall(r"`([^`]+)`", row):
                if command := COMMAND.search(span):
                    module, choices = command.group(1), list[str]()
                    continue
                words = span.split()
                if not words or not all(OVERRIDE.match(w) for w in words) or PLACEHOLDER.search(span):
                    continue
                keys = [w.split("=")[0] for w in words]
                groups = [c for c in choices if any(k.startswith(c.split("=")[0] + ".") for k in keys)]
                commands.add((module, (*groups, *words)))  # logger.wandb.offline=false after logger=wandb
                choices += [w for w, k in zip(words, keys, strict=True) if "." not in k]
    return commands


COMMANDS = sorted({command for page in PAGES for command in page_commands(page)})


def test_the_pages_show_commands() -> None:
    assert len(COMMANDS) > 60
    assert len(page_commands(ROOT / "README.md")) > 25


@pytest.mark.parametrize(("module", "arguments"), COMMANDS, ids=[" ".join((m, *a)) for m, a in COMMANDS])
def test_each_command_is_a_valid_request(module: str, arguments: tuple[str, ...]) -> None:
    if module == "rsbench.report":
        report_parser().parse_args(["runs", *arguments])  # an unknown flag exits with status 2 (paths: any)
        return
    overrides = [
        a for i, a in enumerate(arguments) if not a.startswith("-") and arguments[i - 1] not in ("--cfg", "-c")
    ]
    check_request(list(arguments), CONFIGS[module])
    sweep = "-m" in arguments or any("," in a.split("=", 1)[-1] and "[" not in a for a in overrides)
    plugin = any(a.startswith(("hydra/", "hparams_search", "hydra.searchpath", "resume=")) for a in overrides)
    if sweep or plugin or module == "rsbench.importer":
        return  # a sweep composes per job; plugins and resume= need the command's own start-up
    GlobalHydra.instance().clear()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        compose(CONFIGS[module], overrides=overrides)
    GlobalHydra.instance().clear()


def test_a_report_command_with_an_unknown_flag_is_refused() -> None:
    """The report check above can fail: argparse refuses a flag the report does not have."""
    with pytest.raises(SystemExit):
        report_parser().parse_args(["runs", "--no-such-flag"])


def test_the_readme_is_a_short_guide_with_a_contents_list() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_LINES
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    anchors = re.findall(r"\]\(#([\w-]+)\)", contents)
    headings = {slug(h) for h in re.findall(r"^## (.+)$", text, re.M)}
    assert len(anchors) >= 14
    assert set(anchors) <= headings, f"contents entries without a section: {set(anchors) - headings}"
    assert headings - {"contents"} <= set(anchors), f"sections missing from the contents: {headings - set(anchors)}"
