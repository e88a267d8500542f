"""Write the report's tables as Markdown (pandas + tabulate), LaTeX with booktabs rules (pandas Styler) and CSV."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Section:
    """One table of the report: a title, the formatted table, its caption, and the numbers behind it (for CSV)."""

    name: str  # file stem of its CSV: results, paired, published, envelope
    title: str
    table: pd.DataFrame
    caption: str
    numbers: pd.DataFrame


def with_numbers(name: str, title: str, shown: pd.DataFrame, caption: str, numbers: pd.DataFrame) -> Section:
    """A section whose numbers keep their hidden columns (``_name``, left out of ``shown``) under their plain names."""
    return Section(name, title, shown, caption, numbers.rename(columns=lambda c: c.lstrip("_")))


def markdown(sections: Sequence[Section], notes: Sequence[str] = ()) -> str:
    """The whole report as Markdown: each section's title, table and caption, then the notes."""
    parts = []
    for section in sections:
        parts += [
            f"## {section.title}",
            "",
            section.table.to_markdown(index=False, disable_numparse=True),
            "",
            section.caption,
            "",
        ]
    if notes:
        parts += ["## Notes", "", *(f"- {note}" for note in notes), ""]
    return "\n".join(parts)


def latex(sections: Sequence[Section]) -> str:
    """Each table as a LaTeX ``table`` environment with booktabs rules (needs ``usepackage{booktabs}``)."""
    parts = []
    for section in sections:
        styler = section.table.style.hide(axis="index").format(escape="latex")
        styler = styler.format_index(escape="latex", axis="columns")
        body = styler.to_latex(
            hrules=True,
            caption=_latex_escape(f"{section.title}. {section.caption}"),
            label=f"tab:rsbench-{section.name}",
            position="t",
            position_float="centering",
            environment="table",
        )
        parts.append(_unicode_to_latex(body))
    return "\n".join(parts)


def write_report(out: Path, sections: Sequence[Section], notes: Sequence[str]) -> list[Path]:
    """Write ``report.md``, ``report.tex`` and one ``<section>.csv`` of numbers per section into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.md", out / "report.tex"]
    written[0].write_text(markdown(sections, notes))
    written[1].write_text(latex(sections))
    for section in sections:
        path = out / f"{section.name}.csv"
        section.numbers.to_csv(path, index=False)
        written.append(path)
    return written


def _latex_escape(text: str) -> str:
    for char, escaped in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#")):
        text = text.replace(char, escaped)
    return text


def _unicode_to_latex(text: str) -> str:
    for char, command in (("±", r"$\pm$"), ("σ", r"$\sigma$"), ("Δ", r"$\Delta$")):
        text = text.replace(char, command)
    return text
