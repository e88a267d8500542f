"""``attack.tsv``: one row per attacked (image, radius), written image by image, resumable after a crash.

Columns: ``idx label radius predict correct distance certified_predict certified_radius contradiction time`` --
the attack radius (in the certified norm), PREDICT's answer at the adversarial image (-1: abstained), whether it is
the label, the norm of the perturbation actually found, the image's certificate from ``certify.tsv``, whether the
answer contradicts it (another class, not an abstention, at a radius below the certified one), and the seconds the
attack and PREDICT took. All rows of an image are appended and flushed together, so an interrupted attack loses at
most the image in flight; ``attack_protocol.json`` beside them refuses to continue rows made with other settings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from rsbench.errors import ProtocolMismatchError, damaged_record
from rsbench.files import write_text_atomically

RECORD = "attack.tsv"
PROTOCOL = "attack_protocol.json"


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

    def to_line(self) -> str:
        """Tab-separated, floats at full precision, booleans as 0/1."""
        values = [
            str(int(v)) if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v) for v in astuple(self)
        ]
        return "\t".join(values) + "\n"

    @classmethod
    def from_line(cls, line: str) -> AttackRow:
        """Parse a line written by :meth:`to_line`."""
        parts = line.rstrip("\n").split("\t")
        names = [f.name for f in fields(cls)]
        if len(parts) != len(names):
            raise ValueError(f"expected {len(names)} tab-separated columns, got {len(parts)}: {line!r}")
        kinds = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, text in zip(names, parts, strict=True):
            kind = kinds[name]
            values[name] = text == "1" if kind in ("bool", bool) else int(text) if kind in ("int", int) else float(text)
        return cls(**values)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(AttackRow))


def read_attack_rows(directory: Path) -> list[AttackRow]:
    """Every complete row of ``directory/attack.tsv`` (none when it does not exist)."""
    path = Path(directory) / RECORD
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    if len(lines) == 1:
        return []
    if tuple(lines[0].split("\t")) != COLUMNS:
        raise damaged_record(path, 1, f"it does not start with the attack.tsv header {COLUMNS}")
    try:
        return [AttackRow.from_line(line) for line in lines[1:-1] if line]
    except ValueError as error:
        raise damaged_record(path, None, str(error)) from None


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
    path = Path(directory) / RECORD
    new = not path.exists() or path.stat().st_size == 0
    if not new:
        _drop_incomplete_tail(path)
    with path.open("a") as file:
        if new:
            file.write("\t".join(COLUMNS) + "\n")
        file.write("".join(row.to_line() for row in rows))
        file.flush()
        os.fsync(file.fileno())


def write_rows(directory: Path, rows: Iterable[AttackRow]) -> None:
    """Rewrite ``attack.tsv`` with ``rows`` only, atomically (drops the rows of an image cut short by a crash)."""
    path = Path(directory) / RECORD
    write_text_atomically(path, "\t".join(COLUMNS) + "\n" + "".join(row.to_line() for row in rows))


def _drop_incomplete_tail(path: Path) -> None:
    """Cut a last line without newline (the process died while writing it)."""
    with path.open("rb+") as file:
        data = file.read()
        if not data.endswith(b"\n"):
            file.truncate(data.rfind(b"\n") + 1)
