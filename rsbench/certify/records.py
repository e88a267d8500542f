"""``certify.tsv``: the per-image certification record, appended and flushed row by row, resumable after a crash.

The first six columns are Cohen et al.'s ``idx label predict radius correct time``; rsbench adds ``count``
(votes for the selected class among the n estimation samples), ``pA_lower``, ``sigma`` and ``sound`` (whether the
row is a sound certificate: false only for data-dependent-sigma certificates). Radii are written at full float
precision, so grid thresholds never round a 0.4996 up to 0.5.

Next to it, ``certify_protocol.json`` records what the rows depend on (n0, n, alpha, sigma, seed, the subset, the
model's weights fingerprint). Rerunning into the same directory continues after the last complete row; a protocol
that differs is refused instead of mixing two experiments in one file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from rsbench.errors import ProtocolMismatchError

COLUMNS: tuple[str, ...] = (
    "idx",
    "label",
    "predict",
    "radius",
    "correct",
    "time",
    "count",
    "pA_lower",
    "sigma",
    "sound",
)


@dataclass(frozen=True)
class CertificationRow:
    """One line of ``certify.tsv``."""

    idx: int
    label: int
    predict: int
    radius: float
    correct: bool
    time: float
    count: int
    pA_lower: float
    sigma: float
    sound: bool = True

    def to_line(self) -> str:
        """The row as a tab-separated line (full float precision, ``correct`` as 0/1, ``sound`` as true/false)."""
        values = []
        for value in astuple(self):
            if isinstance(value, bool):
                values.append("true" if value else "false")
            elif isinstance(value, float):
                values.append(repr(value))
            else:
                values.append(str(value))
        values[COLUMNS.index("correct")] = "1" if self.correct else "0"
        return "\t".join(values) + "\n"

    @classmethod
    def from_line(cls, line: str) -> CertificationRow:
        """Parse a line written by :meth:`to_line`."""
        parts = line.rstrip("\n").split("\t")
        if len(parts) != len(COLUMNS):
            raise ValueError(f"expected {len(COLUMNS)} tab-separated columns, got {len(parts)}: {line!r}")
        kwargs: dict[str, Any] = {}
        for field, text in zip(fields(cls), parts, strict=True):
            if field.name == "correct":
                kwargs[field.name] = text == "1"
            elif field.name == "sound":
                kwargs[field.name] = text == "true"
            elif field.type in ("int", int):
                kwargs[field.name] = int(text)
            else:
                kwargs[field.name] = float(text)
        return cls(**kwargs)


def read_rows(path: Path) -> list[CertificationRow]:
    """All complete rows of a ``certify.tsv`` (a trailing line without newline, from a crash, is ignored)."""
    text = Path(path).read_text()
    lines = text.split("\n")
    header, body = lines[0], lines[1:-1]  # the last element is "" or an incomplete line
    if tuple(header.split("\t")) != COLUMNS:
        raise ValueError(f"{path} does not start with the certify.tsv header {COLUMNS}: {header!r}")
    return [CertificationRow.from_line(line) for line in body if line]


class CertificationLog:
    """Append-only ``certify.tsv`` plus its protocol, resuming after the last complete row.

    Args:
        path: the ``certify.tsv`` to write (its protocol goes to ``certify_protocol.json`` beside it).
        protocol: what every row depends on; must equal the stored protocol when resuming (keys in ``extendable``
            may differ).
        extendable: protocol keys allowed to change between runs (e.g. ``max_images``, to certify more images later).
    """

    def __init__(self, path: Path, protocol: Mapping[str, Any], extendable: Iterable[str] = ()) -> None:
        self.path = Path(path)
        self.protocol_path = self.path.with_name(self.path.stem + "_protocol.json")
        self.protocol = dict(protocol)
        self.extendable = set(extendable)
        self._file: TextIO | None = None

    def open(self) -> list[CertificationRow]:
        """Open for appending and return the rows already certified (empty for a new record).

        Raises:
            ProtocolMismatchError: the existing record was made under a different protocol.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows: list[CertificationRow] = []
        if self.path.exists() and self.path.stat().st_size > 0:
            self._check_protocol()
            self._drop_incomplete_tail()
            rows = read_rows(self.path)
            seen: set[int] = set()
            for row in rows:
                if row.idx in seen:
                    raise ValueError(f"{self.path} has two rows for image {row.idx}; it was not written by rsbench")
                seen.add(row.idx)
            self._file = self.path.open("a")
        else:
            self._file = self.path.open("w")
            self._file.write("\t".join(COLUMNS) + "\n")
            self._file.flush()
        self.protocol_path.write_text(json.dumps(self.protocol, indent=2, sort_keys=True) + "\n")
        return rows

    def append(self, row: CertificationRow) -> None:
        """Write one row and flush it to the OS, so a killed process loses at most the row being computed."""
        if self._file is None:
            raise RuntimeError("CertificationLog.open() must be called before append()")
        self._file.write(row.to_line())
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file (rows are already on disk)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> CertificationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_protocol(self) -> None:
        if not self.protocol_path.exists():
            raise ProtocolMismatchError(
                f"{self.path} exists without {self.protocol_path.name}, so it cannot be resumed safely; "
                "move it away or choose another output directory"
            )
        stored = json.loads(self.protocol_path.read_text())
        differences = [
            f"  {key}: stored {stored.get(key, '<missing>')!r}, requested {value!r}"
            for key, value in self.protocol.items()
            if key not in self.extendable and stored.get(key) != _jsonable(value)
        ]
        if differences:
            raise ProtocolMismatchError(
                f"{self.path} was certified under another protocol, so its rows cannot be continued:\n"
                + "\n".join(differences)
                + "\nRerun with the stored settings, or write to a new output directory (hydra.run.dir=...)."
            )

    def _drop_incomplete_tail(self) -> None:
        """Cut a last line that has no newline (the process died while writing it)."""
        with self.path.open("rb+") as file:
            data = file.read()
            if data.endswith(b"\n"):
                return
            file.truncate(data.rfind(b"\n") + 1)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))
