"""``tools/experiments_index.py``: experiments/README.md is made from the studies' cards, and the layout is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import tool_script

pytestmark = pytest.mark.study

CARD = """title: A study
question: Does it hold?
commands:
  - |-
    bash experiments/{name}/run.sh  # a comment the index keeps (a literal block: in a plain scalar it is YAML's)
machine: a CPU
cells:
{cells}
"""


def study(root: Path, name: str, cells: str, files: tuple[str, ...] = ()) -> None:
    """A study folder with its card and the files named (each holding its own name)."""
    (root / name).mkdir(parents=True)
    (root / name / "card.yaml").write_text(CARD.format(name=name, cells=cells))
    for file in files:
        (root / name / file).parent.mkdir(parents=True, exist_ok=True)
        (root / name / file).write_text(file)


def test_the_committed_index_is_the_one_the_cards_make_and_every_study_keeps_the_layout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Fails when a card changed without `python tools/experiments_index.py` (or `make index`), or when a study holds
    a file the layout forbids; the lines printed say which."""
    status = tool_script("experiments_index").main(["--check"])
    assert status == 0, capsys.readouterr().err


def test_the_index_lists_each_study_with_its_cells_by_state_and_its_commands(tmp_path: Path) -> None:
    study(
        tmp_path,
        "alpha",
        "  - {name: a, state: done}\n  - {name: b, state: partial}\n  - {name: c, state: todo}",
        ("run.sh", "runs/a/metrics.json", "runs/a/.hydra/config.yaml"),
    )
    study(tmp_path, "beta", "  - {name: x, state: todo, note: not run}")
    study(tmp_path, "gamma", "  - {name: table, state: done, note: a benchmark}", ("report/table.txt",))
    card = (tmp_path / "gamma" / "card.yaml").read_text()
    (tmp_path / "gamma" / "card.yaml").write_text(card.replace("cells:", "models: none kept\ncells:"))
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path)]) == 0
    index = (tmp_path / "README.md").read_text()
    assert "| [alpha](#alpha) | Does it hold? | 1 / 0 / 1 / 1 |" in index
    assert "| [beta](#beta) | Does it hold? | 0 / 0 / 0 / 1 |" in index
    assert "**A study.** Machine: a CPU" in index
    assert "Models: none kept" in index
    assert "bash experiments/alpha/run.sh  # a comment the index keeps" in index
    assert index.index("## alpha") < index.index("## beta") < index.index("## gamma")
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path), "--check"]) == 0
    (tmp_path / "beta" / "card.yaml").write_text(CARD.format(name="beta", cells="  - {name: x, state: done}"))
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path), "--check"]) == 1  # no records


def test_every_break_of_the_layout_is_named_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "no_card").mkdir()
    (tmp_path / "no_card" / "run.sh").write_text("")
    study(tmp_path, "bad_state", "  - {name: a, state: finished}")
    study(tmp_path, "twice", "  - {name: a, state: todo}\n  - {name: a, state: todo}")
    study(tmp_path, "no_records", "  - {name: a, state: done}", ("runs/b/metrics.json",))
    study(
        tmp_path,
        "not_records",
        "  - {name: a, state: done}",
        ("runs/a/certify.tsv", "runs/a/status.json", "runs/a/checkpoints/last.ckpt", "runs/a/certified_accuracy.png"),
    )
    study(tmp_path, "logs", "  - {name: a, state: todo}", ("partial.out", "models/a.ckpt"))
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "card.yaml").write_text("title: x\ncommands: [a]\nmachine: m\ncells: []\n")
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path)]) == 1
    problems = capsys.readouterr().err.splitlines()
    assert not (tmp_path / "README.md").exists()  # nothing written while the layout is broken
    expected = [
        "experiments_index: bad_state/card.yaml: cell 1 (a): state 'finished', not one of done, in_progress, partial, "
        "todo",
        "experiments_index: keys/card.yaml: no 'question'",
        "experiments_index: keys/card.yaml: 'cells' must be a non-empty list",
        "experiments_index: logs/partial.out: not committed in a study (checkpoint, log, lock or status file)",
        "experiments_index: no_card: no card.yaml",
        "experiments_index: no_records: cell 'a' is done but runs/a/ holds no records (nor is there a report/a.* "
        "output)",
        "experiments_index: not_records/runs/a/certified_accuracy.png: not a record (runs/ holds only certify.tsv, "
        "attack.tsv, metrics.json, certify_protocol.json, attack_protocol.json, certify_segments.json, "
        ".hydra/config.yaml, .hydra/hydra.yaml, .hydra/overrides.yaml, logs/training_metrics.csv)",
        "experiments_index: not_records/runs/a/checkpoints/last.ckpt: not committed in a study (checkpoint, log, lock "
        "or status file)",
        "experiments_index: not_records/runs/a/status.json: not committed in a study (checkpoint, log, lock or status "
        "file)",
        "experiments_index: twice/card.yaml: cell 2: 'a' twice",
    ]
    for line in expected:
        assert line in problems, (line, problems)
    assert not any("models/a.ckpt" in line for line in problems)  # a shared model's weights-only file is allowed
    assert len(problems) == len(expected)


def test_a_card_says_which_pages_it_feeds_in_known_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``docs`` names pages (README.md or docs/<page>.md, optionally #section) that exist; no other key is taken."""
    study(tmp_path / "experiments", "fine", "  - {name: a, state: todo}")
    card = tmp_path / "experiments" / "fine" / "card.yaml"
    card.write_text(card.read_text() + "docs: [README.md#methods]\nmethods_table: [toy]\n")
    (tmp_path / "README.md").write_text("# R\n\n## Methods\n")
    cards = {
        "bad_docs": "docs: [notes/x.md]\n",
        "no_page": "docs: ['docs/none.md#a']\n",
        "bad_methods": "methods_table: toy\n",
        "extra": "feeds: [README.md]\n",
    }
    for name, extra in cards.items():
        study(tmp_path / "experiments", name, "  - {name: a, state: todo}")
        card = tmp_path / "experiments" / name / "card.yaml"
        card.write_text(card.read_text() + extra)
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path / "experiments")]) == 1
    problems = capsys.readouterr().err.splitlines()
    pages = "pages (README.md or docs/<page>.md, optionally #<section>)"
    assert sorted(problems) == [
        "experiments_index: bad_docs/card.yaml: 'docs' must be a non-empty list of " + pages + ", got ['notes/x.md']",
        "experiments_index: bad_methods/card.yaml: 'methods_table' must be a non-empty list of method names, got 'toy'",
        "experiments_index: extra/card.yaml: unknown keys ['feeds'] (title, question, commands, machine, cells, "
        "models, docs, methods_table)",
        "experiments_index: no_page/card.yaml: docs names docs/none.md, which is not a page",
    ]


def test_only_an_in_progress_cell_keeps_its_resumable_checkpoints_and_its_note_says_how_far(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 50: a paper-scale cell outlives its machine in git, as its last.ckpt (and best.ckpt), and nothing else."""
    state = ("runs/a/certify.tsv", "runs/a/checkpoints/last.ckpt", "runs/a/checkpoints/best.ckpt")
    study(tmp_path, "carried", "  - {name: a, state: in_progress, note: epoch 12 of 90}", state)
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path)]) == 0
    assert "| [carried](#carried) | Does it hold? | 0 / 1 / 0 / 0 |" in (tmp_path / "README.md").read_text()

    study(tmp_path, "done_with_state", "  - {name: a, state: done}", state)  # finished: checkpoints go
    study(tmp_path, "other_file", "  - {name: a, state: in_progress, note: x}", (*state, "runs/a/checkpoints/e3.ckpt"))
    study(
        tmp_path,
        "other_cell",
        "  - {name: a, state: in_progress, note: x}\n  - {name: b, state: partial}",
        (*state, "runs/b/checkpoints/last.ckpt"),
    )
    study(tmp_path, "no_state", "  - {name: a, state: in_progress, note: x}", ("runs/a/certify.tsv",))
    study(tmp_path, "no_note", "  - {name: a, state: in_progress}", state)
    assert tool_script("experiments_index").main(["--experiments", str(tmp_path)]) == 1
    problems = capsys.readouterr().err.splitlines()
    refused = "not committed in a study (checkpoint, log, lock or status file)"
    expected = [
        f"experiments_index: done_with_state/runs/a/checkpoints/last.ckpt: {refused}",
        f"experiments_index: done_with_state/runs/a/checkpoints/best.ckpt: {refused}",
        f"experiments_index: other_file/runs/a/checkpoints/e3.ckpt: {refused}",
        f"experiments_index: other_cell/runs/b/checkpoints/last.ckpt: {refused}",
        "experiments_index: no_state: cell 'a' is in_progress but runs/a/ holds no resumable state "
        "(checkpoints/last.ckpt or checkpoints/best.ckpt: python tools/cell_state.py save <run folder> "
        "experiments/no_state/runs/a)",
        "experiments_index: no_note: cell 'a' is in_progress: its note must say how far it is",
    ]
    assert sorted(problems) == sorted(expected)
