"""A run folder's records checked against its summary: ``metrics.json`` against the rows of its ``certify*.tsv``.

:mod:`rsbench.certify.pipeline.validate` checks one record file (each row, and the rows together); this module reads a
run folder's records (through :func:`rsbench.certify.pipeline.records.read_records`, which uses that checking reader)
and compares the summary with them. ``rsbench.report`` and ``rsbench.leaderboard`` call :func:`check_inputs` before
anything heavy is imported (torch-free, like the modules it uses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rsbench.certify.pipeline.records import read_records
from rsbench.certify.pipeline.validate import (
    FIXED_STEM,
    Facts,
    check_summary,
    read_json_object,
    read_table,
    sigma_from_path,
)


def check_run(run: Path, metrics: Mapping[str, Any], protocol: Mapping[str, Any] | None) -> dict[str, dict[int, Any]]:
    """The checked rows of a run folder's records, by stem, each record's summary checked against them.

    ``certify`` and, when ``metrics.json`` has a ``fixed_sigma`` part, ``certify_fixed_sigma``; each record is read
    with the protocol its summary states (:func:`read_table`) and compared with it (:func:`check_summary`); a dual
    run's record is read the same way (its rows carry the router's and the expert's columns). A record that lacks
    images of the subset is returned as it is, for the caller to say what is missing.

    Raises:
        DamagedFileError: a record or the summary is damaged or impossible.
    """
    stems = [("certify", metrics)]
    if isinstance(metrics.get("fixed_sigma"), Mapping):
        stems.insert(0, (FIXED_STEM, {**metrics, **metrics["fixed_sigma"]}))
    found: dict[str, dict[int, Any]] = {}
    for stem, summary in stems:
        rows = read_records(run, stem, _facts(summary))
        indices = (metrics.get("subset") or {}).get("indices") or sorted(rows)
        if rows and all(i in rows for i in indices):
            chosen = [rows[i] for i in indices]
            check_summary(
                Path(run) / "metrics.json",
                summary,
                protocol,
                [row.radius for row in chosen],
                [row.correct for row in chosen],
                [row.predict for row in chosen],
            )
        found[stem] = rows
    return found


def _facts(summary: Mapping[str, Any]) -> Facts:
    def number(key: str) -> Any:
        value = summary.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    n = number("n")
    return Facts(sigma=number("sigma"), n=int(n) if n is not None else None, alpha=number("alpha"))


def check_inputs(
    paths: Sequence[Path], *, sigma: float | None = None, n: int | None = None, alpha: float | None = None
) -> None:
    """Check every record the report or the leaderboard is given, before anything heavy is imported.

    A file (not ``metrics.json``) is a certify TSV in Cohen et al.'s format (``sigma``, ``n``, ``alpha``: what the
    command line says of it; sigma also from the path); a folder is searched for run folders (``metrics.json``),
    whose records and summaries are checked (:func:`check_run`). Paths that hold no result are left to the loader.

    Raises:
        DamagedFileError: the first damaged or impossible record or summary (one line naming it).
    """
    for path in map(Path, paths):
        if path.is_file() and path.name != "metrics.json":
            facts = Facts(sigma if sigma is not None else sigma_from_path(path), n, alpha)
            read_table(path, facts=facts, need_rows=True)
            continue
        runs = [path.parent] if path.is_file() else sorted(p.parent for p in path.rglob("metrics.json"))
        for run in runs:
            protocol_path = run / "certify_protocol.json"
            protocol = read_json_object(protocol_path) if protocol_path.is_file() else None
            check_run(run, read_json_object(run / "metrics.json"), protocol)
