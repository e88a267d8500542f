"""``attack.tsv``: one row per attacked (image, radius), written image by image, resumable after a crash.

Columns: ``idx label radius predict correct distance certified_predict certified_radius contradiction time`` --
the attack radius (in the certified norm), PREDICT's answer at the adversarial image (-1: abstained), whether it is
the label, the norm of the perturbation actually found, the image's certificate from ``certify.tsv``, whether the
answer contradicts it (another class, not an abstention, at a radius below the certified one), and the seconds the
attack and PREDICT took. All rows of an image are appended and flushed together, so an interrupted attack loses at
most the image in flight; ``attack_protocol.json`` beside them refuses to continue rows made with other settings.

The record is another file with another meaning than ``certify.tsv`` (several rows per image, one per attack
radius), on the same machinery: one validating reader
(:func:`rsbench.certify.pipeline.validate.read_table`, here with :func:`check_attack_rows`), one appending writer
(:class:`rsbench.certify.pipeline.records.RecordWriter`: the header checked, a line cut by a crash dropped) and one
atomic rewrite (:func:`rsbench.certify.pipeline.records.write_record`).

**What is refused.** A row with a missing column or a field of the wrong type (named with its line), and an
impossible row: a negative index or label, a negative or non-finite radius, distance or time, a perturbation
larger than its radius (beyond float32 rounding, see :data:`DISTANCE_TOLERANCE`), ``correct`` other than
``predict == label``, an abstained certificate with a radius, and a ``contradiction`` flag other than what the row's
own columns say (:func:`rsbench.attack.evaluate.contradicts`: a row that hides a contradiction would hide a
soundness alarm). Per image: its rows together, at increasing radii, with one label and one certificate, and none
after the first radius where PREDICT did not return the label (the attack stops there). With the run's
certificates given, each row's certificate must be the image's row of ``certify.tsv``. A contradiction itself is
not refused: a sound certificate is wrong with probability alpha, so one contradiction is possible; too many for
alpha is the run's alarm (:func:`rsbench.attack.evaluate.check_certificates`, which fails the run).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from rsbench.certify.pipeline.records import CertificationRow, RecordWriter, write_record
from rsbench.certify.pipeline.validate import UNKNOWN, Facts, Refuse, Table, read_table
from rsbench.errors import DamagedFileError, ProtocolMismatchError
from rsbench.files import write_text_atomically

RECORD = "attack.tsv"
PROTOCOL = "attack_protocol.json"
DISTANCE_TOLERANCE = 1e-5
"""How far (relative, plus as much absolute) a perturbation's norm may exceed its radius: the search runs in
float32, whose rounding of a norm is about 1e-7 relative (the committed records exceed by at most 9e-8)."""


def damaged_attack(path: object, line: int | None, reason: str) -> DamagedFileError:
    """The error for an ``attack.tsv`` that cannot be trusted, saying what to do about it."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return DamagedFileError(
        f"{where} is damaged: {reason}. Move {RECORD} away (or delete its bad lines) and rerun the attack, which "
        "attacks again only the images it lacks"
    )


@dataclass(frozen=True)
class AttackRow:
    """One line of ``attack.tsv``."""

    idx: int
    label: int
    radius: float
    predict: int
    correct: bool
    distance: float
    certified_predict: int
    certified_radius: float
    contradiction: bool
    time: float

    @property
    def columns(self) -> tuple[str, ...]:
        """The header of ``attack.tsv`` (:data:`COLUMNS`)."""
        return COLUMNS

    def to_line(self) -> str:
        """Tab-separated, floats at full precision, booleans as 0/1."""
        values = [getattr(self, name) for name in COLUMNS]
        cells = [str(int(v)) if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v) for v in values]
        return "\t".join(cells) + "\n"


def contradicts(predict: int, radius: float, certified_predict: int, certified_radius: float) -> bool:
    """Whether PREDICT's answer at an adversarial image within ``radius`` contradicts the image's certificate.

    It does when the image was certified (not abstained, -1) at a radius above ``radius`` and PREDICT named another
    class than the certified one (an abstention contradicts nothing).
    """
    return certified_predict != -1 and radius < certified_radius and predict not in (-1, certified_predict)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(AttackRow))


def read_attack_rows(directory: Path, certificates: Mapping[int, CertificationRow] | None = None) -> list[AttackRow]:
    """Every complete row of ``directory/attack.tsv``, checked (none when it does not exist).

    Args:
        directory: the run directory.
        certificates: the run's certificates by image index (``certify.tsv``'s rows), where known: each row's
            ``label``, ``certified_predict`` and ``certified_radius`` must be its image's.

    Raises:
        DamagedFileError: a line is damaged or impossible (the module doc); the message names the file, the line
            and the problem.
    """
    path = Path(directory) / RECORD
    if not path.exists():
        return []
    table = read_table(path, headers=(COLUMNS,), crash_tail=True, refuse=damaged_attack, check=check_attack_rows)
    rows = [AttackRow(**record) for record in table.records()]
    if certificates is not None:
        _check_against(path, table.lines, rows, certificates)
    return rows


def check_attack_rows(
    table: Table, facts: Facts = UNKNOWN, refuse: Refuse = damaged_attack, radius_text: Sequence[str] = ()
) -> None:
    """Refuse an impossible ``attack.tsv`` row (the module doc): the first one found names its line.

    ``facts`` and ``radius_text`` are unused (the shape of :data:`rsbench.certify.pipeline.validate.RowCheck`).
    """
    if not len(table):
        return
    c = {name: np.asarray(values) for name, values in table.columns.items()}

    def first(bad: np.ndarray, problem: str) -> None:
        where = np.flatnonzero(bad)
        if len(where):
            i = int(where[0])
            raise refuse(table.path, table.lines[i], problem.format(**{name: c[name][i].item() for name in c}))

    for name in ("idx", "label"):
        first(c[name] < 0, name + " {" + name + "} is negative")
    for name in ("predict", "certified_predict"):
        first(c[name] < -1, name + " {" + name + "} is neither a class nor -1 (an abstention)")
    for name in ("radius", "distance", "certified_radius", "time"):
        first(~(np.isfinite(c[name]) & (c[name] >= 0)), name + " {" + name + "} is not a finite number >= 0")
    first(
        c["distance"] > c["radius"] + DISTANCE_TOLERANCE * (1 + c["radius"]),
        "distance {distance!r} is above the attack radius {radius!r}: the perturbation left its ball",
    )
    first(c["correct"] != (c["predict"] == c["label"]), "correct is {correct} but predict {predict}, label {label}")
    first(
        (c["certified_predict"] == -1) & (c["certified_radius"] > 0),
        "an abstained certificate (certified_predict -1) has certified_radius {certified_radius} > 0",
    )
    _check_images(table, [AttackRow(**record) for record in table.records()], refuse)


def _check_images(table: Table, rows: list[AttackRow], refuse: Refuse) -> None:
    """Refuse the first row whose contradiction flag or place among its image's rows is impossible."""
    seen: set[int] = set()
    for position, row in enumerate(rows):
        problem = _row_problem(row, rows[position - 1] if position else None, seen)
        if problem is not None:
            raise refuse(table.path, table.lines[position], problem)
        seen.add(row.idx)


def _row_problem(row: AttackRow, before: AttackRow | None, seen: set[int]) -> str | None:
    """What makes ``row`` impossible after the row ``before`` it (images in ``seen`` came earlier), or ``None``.

    Its contradiction flag must be what its columns say; an image's rows come together, at increasing radii, with
    one label and certificate, and none after the first radius where PREDICT did not return the label.
    """
    if row.contradiction != contradicts(row.predict, row.radius, row.certified_predict, row.certified_radius):
        return (
            f"contradiction is {int(row.contradiction)} but predict {row.predict} at radius {row.radius} against "
            f"the certificate (class {row.certified_predict}, radius {row.certified_radius}) says "
            f"{int(not row.contradiction)}"
        )
    if before is None or before.idx != row.idx:
        return f"image {row.idx}'s rows are not together" if row.idx in seen else None
    if row.radius <= before.radius:
        return f"image {row.idx}'s radius {row.radius} does not follow its radius {before.radius}"
    if not before.correct:
        return f"image {row.idx} has a row after the radius {before.radius} where PREDICT failed"
    certificate = (row.label, row.certified_predict, row.certified_radius)
    if certificate != (before.label, before.certified_predict, before.certified_radius):
        return f"image {row.idx}'s label or certificate changes between its rows"
    return None


def _check_against(
    path: Path, lines: list[int], rows: list[AttackRow], certificates: Mapping[int, CertificationRow]
) -> None:
    """Each row's certificate is its image's row of ``certify.tsv``."""
    for line, row in zip(lines, rows, strict=True):
        cert = certificates.get(row.idx)
        if cert is None:
            raise damaged_attack(path, line, f"image {row.idx} was attacked but has no certificate in certify.tsv")
        if (row.label, row.certified_predict, row.certified_radius) != (cert.label, cert.predict, cert.radius):
            raise damaged_attack(
                path,
                line,
                f"image {row.idx}'s certificate (label {row.label}, class {row.certified_predict}, radius "
                f"{row.certified_radius!r}) is not certify.tsv's (label {cert.label}, class {cert.predict}, radius "
                f"{cert.radius!r})",
            )


def check_attack_protocol(directory: Path, protocol: Mapping[str, Any]) -> None:
    """Store ``protocol`` beside the rows, or refuse rows that were made under another one.

    Raises:
        ProtocolMismatchError: ``attack.tsv`` holds rows and its stored protocol differs (naming every key).
    """
    directory = Path(directory)
    stored_path = directory / PROTOCOL
    wanted = json.loads(json.dumps(dict(protocol)))
    if read_attack_rows(directory) and stored_path.exists():
        stored = json.loads(stored_path.read_text())
        differences = [
            f"  {key}: stored {stored.get(key, '<missing>')!r}, requested {value!r}"
            for key, value in wanted.items()
            if stored.get(key) != value
        ]
        if differences:
            raise ProtocolMismatchError(
                f"{directory / RECORD} was attacked with other settings, so its rows cannot be continued:\n"
                + "\n".join(differences)
                + "\nRerun with the stored settings, or move attack.tsv away to attack again."
            )
    write_text_atomically(stored_path, json.dumps(wanted, indent=2, sort_keys=True) + "\n")


def append_image(directory: Path, rows: Iterable[AttackRow]) -> None:
    """Append one image's rows (with the header first when the file is new), flushed to disk together."""
    with RecordWriter(Path(directory) / RECORD, COLUMNS) as writer:
        writer.extend(rows)


def write_rows(directory: Path, rows: Iterable[AttackRow]) -> None:
    """Rewrite ``attack.tsv`` with ``rows`` only, atomically (drops the rows of an image cut short by a crash)."""
    write_record(Path(directory) / RECORD, rows, COLUMNS)
