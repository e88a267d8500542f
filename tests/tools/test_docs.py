"""The README and docs/ agree with the committed records, link to what exists, and hold no lab notebook.

Every generated region (``<!-- generated: NAME -->`` ... ``<!-- /generated -->``) is made again from the records by
``tools/make_docs.py`` and compared with the page: a figure typed by hand, or records changed without
``python tools/make_docs.py``, fails here.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import ROOT, slug


def load_make_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_docs", ROOT / "tools" / "make_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_docs"] = module
    spec.loader.exec_module(module)
    return module


make_docs = load_make_docs()
PAGES = make_docs.pages()
USED = sorted(
    {(page.relative_to(ROOT).as_posix(), name) for page in PAGES for name, _, _ in make_docs.regions(page.read_text())}
)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def region_bodies(page: Path, name: str) -> list[str]:
    text = page.read_text()
    return [text[start:end] for found, start, end in make_docs.regions(text) if found == name]


@pytest.mark.parametrize(("page", "name"), USED, ids=[f"{p}:{n}" for p, n in USED])
def test_each_generated_region_is_what_its_records_give(page: str, name: str) -> None:
    expected = make_docs.FRAGMENTS[name]().rstrip("\n") + "\n"
    for body in region_bodies(ROOT / page, name):
        assert body == expected, f"{page}: region {name} differs from its records; run python tools/make_docs.py"


def test_every_fragment_is_used_and_every_region_has_one() -> None:
    used = {name for _, name in USED}
    assert used == set(make_docs.FRAGMENTS), (
        f"unused: {set(make_docs.FRAGMENTS) - used}; unknown: {used - set(make_docs.FRAGMENTS)}"
    )


def test_the_study_cards_say_which_studies_a_page_lists_in_the_order_of_its_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cards = {"late": "[docs/p.md#second]", "early": "[docs/p.md#first]", "whole": "[docs/p.md]", "other": "[README.md]"}
    for name, docs in cards.items():
        (tmp_path / "experiments" / name).mkdir(parents=True)
        (tmp_path / "experiments" / name / "card.yaml").write_text(f"docs: {docs}\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "p.md").write_text("# P\n\n```\n# Second\n```\n\n## First\n\n## Second\n")
    monkeypatch.setattr(make_docs, "EXPERIMENTS", tmp_path / "experiments")
    monkeypatch.setattr(make_docs, "ROOT", tmp_path)
    make_docs.fed_by.cache_clear()
    try:
        assert make_docs.fed_by("docs/p.md") == ("whole", "early", "late")  # a heading in a code block is no section
        (tmp_path / "experiments" / "late" / "card.yaml").write_text("docs: [docs/p.md#third]\n")
        make_docs.fed_by.cache_clear()
        with pytest.raises(ValueError, match=r"late/card.yaml: docs entry docs/p.md#third: docs/p.md has no such"):
            make_docs.fed_by("docs/p.md")
    finally:
        make_docs.fed_by.cache_clear()


def test_fill_replaces_a_stale_region_and_keeps_the_rest() -> None:
    """The check above can fail: a hand-typed figure inside a region is replaced by the records' figure."""
    typed = "before\n<!-- generated: default-run-output -->\nACR 0.9999\n<!-- /generated -->\nafter\n"
    filled = make_docs.fill(typed)
    assert "ACR 0.9999" not in filled
    assert filled.startswith("before\n<!-- generated: default-run-output -->\n```\nACR ")
    assert filled.endswith("<!-- /generated -->\nafter\n")


def test_an_unclosed_or_unknown_region_is_an_error() -> None:
    with pytest.raises(ValueError, match="never closed"):
        make_docs.fill("<!-- generated: default-run-output -->\ntext\n")
    with pytest.raises(ValueError, match="no fragment named"):
        make_docs.fill("<!-- generated: no-such-thing -->\n<!-- /generated -->\n")


def test_the_quick_start_quotes_the_committed_default_run() -> None:
    """The README's quoted output is the committed record's: the ACR in metrics.json, to four decimals."""
    import json

    first = make_docs.default_rows()[0]  # the training seed from each record's .hydra/config.yaml
    assert first.seed == 0
    metrics = json.loads((Path(first.source) / "metrics.json").read_text())
    readme = (ROOT / "README.md").read_text()
    assert f"ACR {metrics['acr']:.4f} over {metrics['num_images']} images" in readme


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_link_points_at_a_file_and_heading_that_exist(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_anchor = bool(anchor) and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links to nothing: {broken}"


NOTEBOOK = {
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    "an issue number": re.compile(r"(?i)\bissues? #?\d+|(?<![\w&])#\d+\b"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    "a lent machine": re.compile(r"(?i)\blent\b|\blease\b"),
    "the shared folder": re.compile(r"\.\./shared|/work/"),
    "progress": re.compile(r"(?i)\bso far\b|\bnot (?:run|measured) yet\b"),
}


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_how_to_text_holds_no_lab_notebook(page: Path) -> None:
    """Outside generated regions (whose figures state their records' provenance): no dates, issue numbers, commit
    hashes, lent machines, paths no user has, or progress notes."""
    text = page.read_text()
    for _, start, end in reversed(make_docs.regions(text)):
        text = text[:start] + text[end:]
    found = {what: pattern.findall(text) for what, pattern in NOTEBOOK.items()}
    assert not {what: hits for what, hits in found.items() if hits}


def test_the_makefile_states_no_measured_timings() -> None:
    text = (ROOT / "Makefile").read_text()
    assert not re.findall(r"(?<![\w%-])\d+(?:\.\d+)? ?(?:min|minutes|s|seconds)\b", text)
    assert not NOTEBOOK["a date"].findall(text)
