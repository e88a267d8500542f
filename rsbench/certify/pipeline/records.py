"""``certify.tsv``: the per-image certification record, appended and flushed row by row, resumable after a crash.

The first six columns are Cohen et al.'s ``idx label predict radius correct time``; rsbench adds ``count``
(votes for the selected class among the estimation samples), ``n`` (estimation samples drawn: the protocol's n, or
fewer when sequential certification stopped early), ``pA_lower``, ``sigma`` and ``sound`` (whether the row is a
sound certificate: false only for data-dependent-sigma certificates). Radii are written at full float
precision, so grid thresholds never round a 0.4996 up to 0.5. A record of another threat model than Gaussian noise
and the l2 norm ends with two more columns, ``norm`` and ``noise`` (:mod:`rsbench.certify.algorithm.threat`); a record
without them is Gaussian and l2. A dual randomized-smoothing record (:mod:`rsbench.certify.pipeline.dual_records`) ends
with the router's and the routed expert's columns instead (:data:`DUAL_COLUMNS`): its ``count``, ``n``, ``pA_lower`` and
``sigma`` are the routed expert's, ``radius`` is min(router_radius, expert_radius), and each row holds at ``alpha +
beta``. Every record is one row type, :class:`CertificationRow`, read by :func:`read_rows` and appended by
:class:`RecordWriter`; dual records written before that (:data:`LEGACY_DUAL_COLUMNS`, without ``count``) still read,
their ``count`` None.

Next to it, ``certify_protocol.json`` records what the rows depend on (n0, n, alpha, sigma, seed, the subset, the
model's weights fingerprint). Rerunning into the same directory continues after the last complete row; a protocol
that differs is refused instead of mixing two experiments in one file. When several ranks certify shares of the
images, each appends to its own ``certify.rank<r>-of-<w>.tsv`` and the shards are merged into ``certify.tsv``; the
jobs of a sharded certification (:mod:`rsbench.certify.pipeline.sharding`) append to ``certify.shard<k>-of-<K>.tsv`` in
one folder, each file locked by the process that writes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from rsbench.certify.pipeline.validate import UNKNOWN, Facts, read_table
from rsbench.errors import DamagedFileError, ProtocolMismatchError, RunDirectoryBusyError, damaged_record
from rsbench.files import write_text_atomically

if TYPE_CHECKING:
    from rsbench.certify.algorithm.smooth import Certificate

COLUMNS: tuple[str, ...] = (
    "idx",
    "label",
    "predict",
    "radius",
    "correct",
    "time",
    "count",
    "n",
    "pA_lower",
    "sigma",
    "sound",
)
THREAT_COLUMNS: tuple[str, ...] = ("norm", "noise")
"""Appended to :data:`COLUMNS` in records of a threat model other than Gaussian noise and the l2 norm."""
DEFAULT_THREAT = ("l2", "gaussian")
DUAL_COLUMNS: tuple[str, ...] = (
    "expert",
    "router_radius",
    "router_pA_lower",
    "router_n",
    "expert_predict",
    "expert_radius",
    "alpha",
    "beta",
)
"""Appended to :data:`COLUMNS` in a dual randomized-smoothing record: the routed expert's index (-1: the router
abstained), the router's certificate, the expert's prediction and radius (-1 and 0 when it abstained or was not run),
and the two failure probabilities."""
LEGACY_DUAL_COLUMNS: tuple[str, ...] = (
    *("idx", "label", "predict", "radius", "correct", "time", "sigma", "expert", "router_radius", "router_pA_lower"),
    *("router_n", "expert_predict", "expert_radius", "expert_pA_lower", "expert_n", "alpha", "beta", "sound"),
)
"""The header of the dual records written before the one row type (no ``count``; the expert's n and pA_lower named
``expert_n`` and ``expert_pA_lower``): read, never written."""
_LEGACY_NAMES = {"expert_n": "n", "expert_pA_lower": "pA_lower"}


def tsv_line(values: Iterable[Any], correct_at: int) -> str:
    """A record's values as one tab-separated line.

    Floats at full precision (``repr``), booleans ``true``/``false``, except the value at ``correct_at`` (Cohen's
    ``correct`` column), written ``1``/``0``.
    """
    values = list(values)
    cells = [
        ("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)
        for v in values
    ]
    cells[correct_at] = "1" if values[correct_at] else "0"
    return "\t".join(cells) + "\n"


@dataclass(frozen=True)
class CertificationRow:
    """One line of a per-image record: ``certify.tsv`` of one model, or of a dual certification.

    The dual fields (``expert`` ... ``beta``) are ``None`` in a record of one model; in a dual record ``count``,
    ``n``, ``pA_lower`` and ``sigma`` are the routed expert's (``count`` None in records written before this row
    type, which did not keep it).
    """

    idx: int
    label: int
    predict: int
    radius: float
    correct: bool
    time: float
    count: int | None
    n: int
    pA_lower: float
    sigma: float
    sound: bool = True
    norm: str = DEFAULT_THREAT[0]
    noise: str = DEFAULT_THREAT[1]
    expert: int | None = None
    router_radius: float | None = None
    router_pA_lower: float | None = None
    router_n: int | None = None
    expert_predict: int | None = None
    expert_radius: float | None = None
    alpha: float | None = None
    beta: float | None = None

    @property
    def names_threat(self) -> bool:
        """Whether the line carries ``norm`` and ``noise`` (any threat model but Gaussian noise and l2)."""
        return (self.norm, self.noise) != DEFAULT_THREAT

    @property
    def is_dual(self) -> bool:
        """Whether the row is a dual randomized-smoothing certificate (router and routed expert)."""
        return self.expert is not None

    @property
    def failure_probability(self) -> float | None:
        """alpha + beta for a dual row (the probability its certificate is wrong, at most); ``None`` otherwise."""
        return self.alpha + self.beta if self.alpha is not None and self.beta is not None else None

    @property
    def columns(self) -> tuple[str, ...]:
        """The header of a record of rows like this one (:func:`record_columns`)."""
        return record_columns(self.names_threat, dual=self.is_dual)

    def to_line(self) -> str:
        """The row as a tab-separated line (full float precision, ``correct`` as 0/1, ``sound`` as true/false)."""
        if self.count is None:
            raise ValueError(f"image {self.idx}: a row read from a record without count cannot be written again")
        return tsv_line((getattr(self, name) for name in self.columns), correct_at=COLUMNS.index("correct"))

    @classmethod
    def of(cls, idx: int, label: int, cert: Certificate, *, sound: bool = True) -> CertificationRow:
        """The row of test image ``idx`` (true class ``label``) certified as ``cert`` (its time to 0.1 ms)."""
        return cls(
            idx=idx,
            label=label,
            predict=cert.prediction,
            radius=cert.radius,
            correct=cert.prediction == label,
            time=round(cert.seconds, 4),
            count=cert.count,
            n=cert.n,
            pA_lower=cert.p_a_lower,
            sigma=cert.sigma,
            sound=sound,
            norm=cert.norm,
            noise=cert.noise,
        )

    @classmethod
    def from_line(cls, line: str, columns: tuple[str, ...] | None = None) -> CertificationRow:
        """Parse a line written by :meth:`to_line` (``columns``: its record's header; by default told by its length)."""
        parts = line.rstrip("\n").split("\t")
        if columns is None:
            known = {len(c): c for c in (COLUMNS, COLUMNS + THREAT_COLUMNS, COLUMNS + DUAL_COLUMNS)}
            if len(parts) not in known:
                raise ValueError(f"expected {len(COLUMNS)} tab-separated columns, got {len(parts)}: {line!r}")
            columns = known[len(parts)]
        types = {field.name: field.type for field in fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, text in zip(columns, parts, strict=True):
            if name in THREAT_COLUMNS:
                kwargs[name] = text
            elif name in ("correct", "sound"):
                kwargs[name] = text == ("1" if name == "correct" else "true")
            else:
                kwargs[name] = int(text) if str(types[name]).startswith("int") else float(text)
        return cls(**kwargs)


def read_rows(path: Path, facts: Facts = UNKNOWN) -> list[CertificationRow]:
    """All complete rows of a ``certify.tsv``, checked (:func:`rsbench.certify.pipeline.validate.read_table`).

    A trailing line without newline (a crash while appending) is ignored; an empty file, or a header alone, has no
    rows yet.

    Args:
        path: the record (``certify.tsv`` or a shard).
        facts: the protocol the rows were certified under, where known (for the check against the radius cap).

    Raises:
        DamagedFileError: a line is damaged or impossible (the message names it and what to do).
    """
    headers = (COLUMNS, COLUMNS + THREAT_COLUMNS, COLUMNS + DUAL_COLUMNS, LEGACY_DUAL_COLUMNS)
    table = read_table(path, headers=headers, facts=facts, crash_tail=True, refuse=damaged_record)
    if table.header != LEGACY_DUAL_COLUMNS:
        return [CertificationRow(**record) for record in table.records()]
    return [
        CertificationRow(count=None, **{_LEGACY_NAMES.get(k, k): v for k, v in record.items()})
        for record in table.records()
    ]


STEM = "certify"
RECORD = f"{STEM}.tsv"
PROTOCOL = "certify_protocol.json"


SHARD_KINDS = ("rank", "shard")  # DDP processes of one job; jobs of a sharded certification


def shard_record(rank: int, world_size: int, stem: str = STEM, kind: str = "rank") -> str:
    """The file a process appends its rows to: ``certify.tsv`` alone, ``certify.<kind><r>-of-<w>.tsv`` when shared.

    ``stem`` names other records of the same run (``certify_fixed_sigma``: the sound certificates reported beside
    data-dependent ones); ``kind`` is ``rank`` for the processes of one DDP job, ``shard`` for the jobs of a sharded
    certification (:mod:`rsbench.certify.pipeline.sharding`), whose files are never folded into ``certify.tsv`` alone.
    """
    if kind not in SHARD_KINDS:
        raise ValueError(f"kind must be one of {SHARD_KINDS}, got {kind!r}")
    return f"{stem}.tsv" if world_size == 1 and kind == "rank" else f"{stem}.{kind}{rank}-of-{world_size}.tsv"


def record_files(directory: Path, stem: str | None = STEM) -> list[Path]:
    """The record ``<stem>.tsv`` and its shard files in ``directory`` that exist (every stem's when ``None``)."""
    directory = Path(directory)
    if stem is None:
        return sorted(p for p in directory.glob("certify*.tsv"))
    files = sorted(p for kind in SHARD_KINDS for p in directory.glob(f"{stem}.{kind}*-of-*.tsv"))
    main = directory / f"{stem}.tsv"
    return ([main] if main.exists() else []) + files


def read_records(directory: Path, stem: str = STEM, facts: Facts = UNKNOWN) -> dict[int, CertificationRow]:
    """Every row of record ``stem`` in ``directory`` (main file and shards), keyed by image index.

    ``facts``: the protocol the rows were certified under, where known (:func:`read_rows`).

    Raises:
        DamagedFileError: a file is damaged, or two files disagree about an image (not written by one run).
    """
    rows: dict[int, CertificationRow] = {}
    for path in record_files(directory, stem):
        for row in read_rows(path, facts):
            if row.idx in rows and rows[row.idx] != row:
                raise damaged_record(path, None, f"it and another record disagree about image {row.idx}")
            rows[row.idx] = row
    return rows


def check_protocol(
    directory: Path, protocol: Mapping[str, Any], extendable: Iterable[str] = (), *, binding: bool = False
) -> None:
    """Refuse to continue rows in ``directory`` that were certified under another protocol.

    A directory without certification rows accepts any protocol, unless ``binding``: then a stored protocol binds
    even before any row is written (the shards of one certification, once one has registered). Keys in
    ``extendable`` (``max_images``: certify more images later) may differ.

    Raises:
        ProtocolMismatchError: the stored protocol differs, or rows exist without a stored protocol.
        DamagedFileError: the stored protocol is not valid JSON (the message says what to do).
    """
    directory = Path(directory)
    rows = bool(record_files(directory, None))
    stored_path = directory / PROTOCOL
    if not rows and not (binding and stored_path.exists()):
        return
    if not stored_path.exists():
        raise ProtocolMismatchError(
            f"{directory / RECORD} exists without {PROTOCOL}, so it cannot be resumed safely; "
            "move it away or choose another output directory"
        )
    stored = _stored_protocol(stored_path)
    skip = set(extendable)
    differences = [
        f"  {key}: stored {stored.get(key, '<missing>')!r}, requested {value!r}"
        for key, value in protocol.items()
        if key not in skip and stored.get(key) != _jsonable(value)
    ]
    if differences:
        raise ProtocolMismatchError(
            f"{directory / RECORD} was certified under another protocol, so its rows cannot be continued:\n"
            + "\n".join(differences)
            + "\nRerun with the stored settings, or write to a new output directory (hydra.run.dir=...)."
            + ("" if rows else f" No row is written yet: deleting {PROTOCOL} and certify_shards.json starts over.")
        )


def _stored_protocol(path: Path) -> dict[str, Any]:
    """``certify_protocol.json``; a damaged one is refused in one line saying what to do."""
    try:
        stored = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        stored = error
    if not isinstance(stored, dict):
        raise DamagedFileError(
            f"{path} is damaged ({stored}), so the rows beside it cannot be resumed: nothing says what they were "
            f"certified under. Move {path.parent}'s certify*.tsv and {PROTOCOL} away (or write to a new output "
            "directory) and rerun, which certifies them again"
        )
    return stored


def write_protocol(directory: Path, protocol: Mapping[str, Any]) -> None:
    """Store the protocol the rows of ``directory`` are certified under."""
    Path(directory).mkdir(parents=True, exist_ok=True)
    write_text_atomically(Path(directory) / PROTOCOL, json.dumps(dict(protocol), indent=2, sort_keys=True) + "\n")


def merge_records(directory: Path, stem: str = STEM) -> list[CertificationRow]:
    """Fold every shard of record ``stem`` into ``<stem>.tsv`` (rows sorted by image index); return all rows.

    The merged file is written atomically before the shards are removed, so a crash never loses a row.
    """
    directory = Path(directory)
    rows = sorted(read_records(directory, stem).values(), key=lambda row: row.idx)
    shards = [path for path in record_files(directory, stem) if path.name != f"{stem}.tsv"]
    if shards:
        write_record(directory / f"{stem}.tsv", rows)
        for path in shards:
            path.unlink()
    return rows


def write_record(path: Path, rows: Iterable[RecordRow], columns: tuple[str, ...] = COLUMNS) -> None:
    """Write a whole record at once, atomically (used for merged and post-processed records).

    ``columns``: the header when there is no row (another record's, such as ``attack.tsv``'s).

    Raises:
        ValueError: the rows are of different kinds (one model's and dual, or of different threat models).
    """
    rows = list(rows)
    headers = {row.columns for row in rows} or {columns}
    if len(headers) > 1:
        raise ValueError(f"{path}: rows of different records ({sorted(map(list, headers))}) cannot share one file")
    header = headers.pop()
    write_text_atomically(Path(path), "\t".join(header) + "\n" + "".join(row.to_line() for row in rows))


def record_columns(names_threat: bool, *, dual: bool = False) -> tuple[str, ...]:
    """The header of a record: :data:`COLUMNS`, then its threat model's or a dual certification's columns.

    :data:`THREAT_COLUMNS` when its rows name a threat model, :data:`DUAL_COLUMNS` for a dual certification
    (Gaussian and l2 only).
    """
    if dual and names_threat:
        raise ValueError("a dual randomized-smoothing record certifies Gaussian noise and the l2 norm only")
    return COLUMNS + DUAL_COLUMNS if dual else COLUMNS + THREAT_COLUMNS if names_threat else COLUMNS


class RecordRow(Protocol):
    """A row a :class:`RecordWriter` appends: :class:`CertificationRow`, or another record's row of its own columns.

    ``attack.tsv``'s :class:`rsbench.attack.records.AttackRow` is one.
    """

    @property
    def columns(self) -> tuple[str, ...]: ...  # noqa: D102

    def to_line(self) -> str: ...  # noqa: D102


class RecordWriter:
    """Appends rows to one record file, flushing each, after cutting a line a crash left half-written.

    Args:
        path: ``certify.tsv`` or a shard file; created with its header when new.
        columns: the header (:func:`record_columns`); an existing file with another header (rows of another threat
            model) is refused rather than continued.
        exclusive: hold an advisory ``flock`` on the file while writing, and refuse it when another process holds
            one (two jobs given the same shard of a shared folder); the run directory's lock covers the others.
    """

    def __init__(self, path: Path, columns: tuple[str, ...] = COLUMNS, *, exclusive: bool = False) -> None:
        self.path = Path(path)
        self.columns = columns
        self.exclusive = exclusive
        self._file: TextIO | None = None

    def __enter__(self) -> RecordWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.exclusive:
            self._file = self.path.open("a")
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._file.close()
                self._file = None
                raise RunDirectoryBusyError(
                    f"{self.path} is being written by another process (the same shard started twice?); wait for it "
                    "to finish, or stop it and resume this shard"
                ) from None
        if self.path.exists() and self.path.stat().st_size > 0:
            _drop_incomplete_tail(self.path)
            _check_header(self.path, self.columns)
        if self._file is None:
            self._file = self.path.open("a")
        if self.path.stat().st_size == 0:
            self._file.write("\t".join(self.columns) + "\n")
            self._file.flush()
        return self

    def append(self, row: RecordRow) -> None:
        """Write one row and flush it to the OS, so a killed process loses at most the row being computed."""
        if self._file is None:
            raise RuntimeError("RecordWriter must be entered (with RecordWriter(path) as writer) before append()")
        self._file.write(row.to_line())
        self._file.flush()
        os.fsync(self._file.fileno())

    def extend(self, rows: Iterable[RecordRow]) -> None:
        """Write several rows (one image's attack rows) and flush them to disk together, after the last."""
        if self._file is None:
            raise RuntimeError("RecordWriter must be entered (with RecordWriter(path) as writer) before extend()")
        self._file.write("".join(row.to_line() for row in rows))
        self._file.flush()
        os.fsync(self._file.fileno())

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _check_header(path: Path, columns: tuple[str, ...]) -> None:
    """Refuse to append rows under ``columns`` to a record whose (complete) header differs."""
    with path.open() as file:
        first = file.readline()
    if first.endswith("\n") and tuple(first.rstrip("\n").split("\t")) != columns:
        raise ProtocolMismatchError(
            f"{path} holds rows with the columns {first.split()}, not {list(columns)} (rows of another threat model: "
            "norm and noise), so its rows cannot be continued; write to a new output directory"
        )


def _drop_incomplete_tail(path: Path) -> None:
    """Cut a last line that has no newline (the process died while writing it)."""
    with path.open("rb+") as file:
        data = file.read()
        if not data.endswith(b"\n"):
            file.truncate(data.rfind(b"\n") + 1)


@contextlib.contextmanager
def directory_lock(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` itself while the block runs (waiting for another holder).

    The jobs of a sharded certification share one folder: each registers itself and, when its share is done, checks
    whether every row is there and merges, one job at a time. The lock is released when the process dies.
    """
    Path(directory).mkdir(parents=True, exist_ok=True)
    handle = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # (releases the lock)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))
