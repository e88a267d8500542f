"""One validating reader for every per-image certification record, and the check of a run's summary against it.

Every record rsbench reads goes through :func:`read_table`: a run's ``certify.tsv`` and its shards
(:func:`rsbench.certify.pipeline.records.read_rows`), dual randomized-smoothing records among them, Cohen et
al.'s TSVs and the released logs (:func:`rsbench.report.load.read_cohen_tsv`), and the attack record ``attack.tsv``
(:func:`rsbench.attack.records.read_attack_rows`, with its own row checks). A record is refused, in one line that
names the file, the line and the problem, when

- a line has another number of fields than the header (a line cut short), or a field is not what its column holds
  (``idx``, ``label``, ``predict``, ``count``, ``n``: integers; ``radius``, ``pA_lower``, ``sigma``: numbers;
  ``correct``: 0 or 1; ``sound``: true or false; ``time``: seconds or ``H:MM:SS.ffffff``), or the file holds a header
  and no row where rows are required;
- an image index appears twice;
- a radius is NaN, infinite or negative, or an abstention (``predict`` -1) has a radius above 0;
- ``correct`` is not ``predict == label`` (Cohen et al.'s definition: an abstention is never correct);
- ``count`` is not in [0, n], ``pA_lower`` is not in [0, 1], or ``pA_lower`` is above ``count / n`` (no lower
  confidence bound is above the observed frequency);
- a sound row of Gaussian noise and the l2 norm claims more than its own bound certifies: a radius above
  ``sigma * Phi^-1(pA_lower)``, or above the protocol's cap ``sigma * Phi^-1(alpha^(1/n))`` (n of n votes; the row's
  own ``n`` where it has one) when alpha is known. Rows that are not sound certificates (data-dependent sigma in
  memory mode rewrites radii) and other threat models are spared these two checks;
- a dual row (``router_radius`` and ``expert_radius`` columns) claims a radius above the smaller of its router's
  and its expert's.

Tolerances: radii and bounds rsbench writes are full-precision floats, and Phi^-1 recomputed here (the standard
library's, no SciPy) agrees with SciPy's to about 1e-12 even at the cap (n = 10^6); a radius may exceed a bound by
1e-9 (absolute plus relative). A radius written with fewer digits (Cohen et al.'s 3 significant digits) may exceed
it by half a unit of its last written digit, the most rounding can add.

:func:`check_summary` compares a run's ``metrics.json`` with its ``certify_protocol.json`` (n0, n, alpha, sigma) and
with the rows it summarises (image count, ACR, abstention rate, certified accuracy at each grid radius, within
1e-9: they are computed from the same full-precision rows, so only the order of summation can differ).

Nothing here imports torch, SciPy or pandas: the command-line tools check their inputs with it before they load them.
"""

from __future__ import annotations

import gzip
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from itertools import repeat
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from rsbench.errors import DamagedFileError

TOLERANCE = 1e-9
"""How far a full-precision radius may exceed the bound it is checked against (absolute plus relative)."""
SUMMARY_TOLERANCE = 1e-9
"""How far metrics.json's ACR and fractions may be from the same numbers recomputed from the rows."""

COHEN_REQUIRED = ("idx", "label", "predict", "radius", "correct")
INTEGERS = frozenset(
    {"idx", "label", "predict", "count", "n", "expert", "router_n", "expert_predict", "expert_n", "certified_predict"}
)
NUMBERS = frozenset(
    {"radius", "pA_lower", "sigma", "router_radius", "router_pA_lower", "expert_radius", "expert_pA_lower"}
    | {"alpha", "beta", "distance", "certified_radius"}
)
FLAGS = frozenset({"correct", "contradiction"})
"""Columns written 0 or 1 (Cohen et al.'s ``correct``; the attack record's ``contradiction``)."""
_CLOCK = re.compile(r"(?:(\d+) days?, )?(\d+):(\d\d):(\d\d(?:\.\d+)?)")  # str(datetime.timedelta)


@dataclass(frozen=True)
class Facts:
    """What the protocol says about the rows, where known (None: unknown, and the checks that need it are skipped).

    Attributes:
        sigma: the certification noise level (rows with a ``sigma`` column use their own).
        n: estimation samples per image (rows with an ``n`` column use their own).
        alpha: the failure probability.
    """

    sigma: float | None = None
    n: int | None = None
    alpha: float | None = None


UNKNOWN = Facts()
"""Nothing known about the protocol."""


@dataclass(frozen=True)
class Table:
    """A record's rows, checked: typed columns in file order, and the line each row is on.

    Attributes:
        path: the file.
        header: the column names.
        columns: per column, its values (ints, floats, bools or text).
        lines: the line number of each row (the header is line 1).
    """

    path: Path
    header: tuple[str, ...]
    columns: Mapping[str, list[Any]]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.lines)

    def records(self) -> list[dict[str, Any]]:
        """One ``{column: value}`` per row, with Python values (``int``, ``float``, ``bool``, ``str``)."""
        values = [c.tolist() if isinstance(c, np.ndarray) else c for c in self.columns.values()]
        return [dict(zip(self.header, row, strict=True)) for row in zip(*values, strict=True)]


def refusal(path: Path, line: int | None, problem: str) -> DamagedFileError:
    """The one-line error for a record that cannot be trusted: ``<file>, line <k>: <problem>``."""
    where = f"{path}, line {line}" if line is not None else str(path)
    return DamagedFileError(f"{where}: {problem}")


Refuse = Callable[[Path, "int | None", str], Exception]
"""Makes the error for (file, line or None, problem): :func:`refusal`, or a caller's own (with its advice)."""
RowCheck = Callable[[Table, Facts, Refuse, Sequence[str]], None]
"""Refuses a table's impossible rows: (table, facts, refuse, the radii as written); :func:`check_rows`'s shape."""


def read_table(
    path: Path,
    *,
    headers: Sequence[tuple[str, ...]] | None = None,
    facts: Facts = UNKNOWN,
    crash_tail: bool = False,
    need_rows: bool = False,
    text: str | None = None,
    refuse: Refuse = refusal,
    check: RowCheck | None = None,
) -> Table:
    """Read and check a per-image record (see the module docstring for what is refused).

    Args:
        path: the file (gzipped when its content says so); named in every message.
        headers: the headers allowed (rsbench's own records); ``None``: any header holding Cohen et al.'s columns.
        facts: the protocol, where known, for the checks against the cap.
        crash_tail: a last line without newline was cut short by a crash while appending (rsbench's records, which
            resume after it): ignore it. Otherwise it is a row like any other (a file may end without newline).
        need_rows: refuse a file without rows (an empty file or a header alone); otherwise such a file has no rows.
        text: the file's content, when already read.
        refuse: makes the error (:func:`refusal`; rsbench's records add what to do about it).
        check: what makes a row impossible (``None``: a certificate's, :func:`check_rows`; the attack record's is
            :func:`rsbench.attack.records.check_attack_rows`), called after the fields are typed.

    Raises:
        DamagedFileError: the record is damaged or impossible; the message names the file, the line and the problem.
    """
    path = Path(path)
    content = _text(path, refuse) if text is None else text
    lines = content.replace("\r\n", "\n").split("\n")
    if lines[-1] == "" or crash_tail:
        lines.pop()  # the empty string after the last newline, or a line a crash cut short
    if not lines:
        if need_rows:
            raise refuse(path, None, "is empty; a certification record is a header and one row per certified image")
        return Table(path, (), {}, [])
    header = tuple(lines[0].split("\t"))
    _check_header(path, header, headers, refuse)
    body, numbers = _rows(lines)
    if need_rows and not body:
        raise refuse(path, None, "holds a header but no rows; a certification record has one row per certified image")
    _check_fields(path, header, body, numbers, refuse)
    flat = "\t".join(body).split("\t") if body else []
    texts = [flat[j :: len(header)] for j in range(len(header))]
    columns = {name: _convert(path, name, column, numbers, refuse) for name, column in zip(header, texts, strict=True)}
    table = Table(path, header, columns, numbers)
    radius_text = texts[header.index("radius")] if "radius" in header else []
    (check or check_rows)(table, facts, refuse, radius_text)
    return table


def _rows(lines: list[str]) -> tuple[list[str], list[int]]:
    """The lines after the header that hold a row (blank ones skipped), and their line numbers."""
    body = lines[1:]
    if all(body) and not any(map(str.isspace, body)):
        return body, list(range(2, len(body) + 2))
    kept = [(line, number) for number, line in enumerate(body, start=2) if line.strip()]
    return [line for line, _ in kept], [number for _, number in kept]


def _check_fields(path: Path, header: tuple[str, ...], body: list[str], numbers: list[int], refuse: Refuse) -> None:
    """Refuse a line with another number of fields than the header (cut short, or run into the next)."""
    tabs = len(header) - 1
    if list(map(str.count, body, repeat("\t", len(body)))).count(tabs) == len(body):
        return
    for line, number in zip(body, numbers, strict=True):
        fields_ = line.count("\t") + 1
        if fields_ != len(header):
            problem = f"has {fields_} tab-separated fields where the header has {len(header)}"
            raise refuse(path, number, problem + (" (cut short?)" if fields_ < len(header) else ""))


def _text(path: Path, refuse: Refuse) -> str:
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return data.decode()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise refuse(path, None, f"cannot be read as a tab-separated text file ({error})") from None


def _check_header(
    path: Path, header: tuple[str, ...], allowed: Sequence[tuple[str, ...]] | None, refuse: Refuse
) -> None:
    if allowed is not None:
        if header not in allowed:
            expected = " or ".join(str(list(columns)) for columns in allowed)
            closest = max(allowed, key=lambda columns: len(set(columns) & set(header)))
            missing = [name for name in closest if name not in header]
            lacks = f" (it lacks {missing})" if missing else ""
            raise refuse(
                path, 1, f"it does not start with a certification record's header {expected}: {list(header)}{lacks}"
            )
        return
    missing = [name for name in COHEN_REQUIRED if name not in header]
    if missing:
        raise refuse(
            path,
            1,
            f"the header lacks the columns {missing}: a certify TSV starts with the header "
            "'idx label predict radius correct time' (Cohen et al.'s certify.py)",
        )
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise refuse(path, 1, f"the header names the columns {repeated} more than once")


def _convert(path: Path, name: str, texts: list[str], lines: list[int], refuse: Refuse) -> Any:
    """The column ``name`` as an array (a list of text for text columns); the first bad field names its line."""
    convert: Callable[[str], Any]
    dtype: type[np.generic]
    if name in INTEGERS:
        convert, kind, dtype = int, "an integer", np.int64
    elif name in NUMBERS:
        convert, kind, dtype = float, "a number", np.float64
    elif name == "time":
        convert, kind, dtype = _seconds, "seconds or H:MM:SS", np.float64
    elif name in FLAGS:
        convert, kind, dtype = {"0": False, "1": True}.__getitem__, "0 or 1", np.bool_
    elif name == "sound":
        convert, kind, dtype = {"false": False, "true": True}.__getitem__, "true or false", np.bool_
    else:
        return texts
    try:
        return np.fromiter(map(convert, texts), dtype=dtype, count=len(texts))
    except (ValueError, KeyError, OverflowError):
        for text, line in zip(texts, lines, strict=True):
            try:
                np.asarray(convert(text), dtype=dtype)
            except (ValueError, KeyError, OverflowError):
                raise refuse(path, line, f"{name} {text!r} is not {kind}") from None
        raise  # (unreachable: the failing field was found above)


def _seconds(text: str) -> float:
    """``1.5`` or ``0:00:01.500000`` (``str(timedelta)``, Cohen et al.'s certify.py) as seconds."""
    try:
        return float(text)
    except ValueError:
        match = _CLOCK.fullmatch(text.strip())
        if match is None:
            raise
        days, hours, minutes, seconds = match.groups()
        return ((int(days or 0) * 24 + int(hours)) * 60 + int(minutes)) * 60 + float(seconds)


def check_rows(table: Table, facts: Facts = UNKNOWN, refuse: Refuse = refusal, radius_text: Sequence[str] = ()) -> None:
    """Refuse impossible rows (module docstring): the first one found names its line.

    Args:
        table: the rows (typed columns).
        facts: the protocol, where known.
        refuse: makes the error.
        radius_text: the radii as written, for the rounding they allow against a cap (full precision when absent).
    """
    if not len(table):
        return
    columns, lines = table.columns, table.lines

    def at(position: int, problem: str) -> Exception:
        return refuse(table.path, lines[position], problem)

    idx = np.asarray(columns["idx"], dtype=np.int64)
    label = np.asarray(columns["label"], dtype=np.int64)
    predict = np.asarray(columns["predict"], dtype=np.int64)
    radius = np.asarray(columns["radius"], dtype=np.float64)
    correct = np.asarray(columns["correct"], dtype=bool)
    _first(at, idx < 0, lambda i: f"idx {int(idx[i])} is negative")
    _check_unique(at, idx, lines)
    _first(at, label < 0, lambda i: f"label {int(label[i])} is negative")
    _first(at, predict < -1, lambda i: f"predict {int(predict[i])} is neither a class nor -1 (an abstention)")
    _first(at, ~np.isfinite(radius), lambda i: f"radius {float(radius[i])} is not a finite number")
    _first(at, radius < 0, lambda i: f"radius {float(radius[i])} is negative")
    _first(
        at, (predict == -1) & (radius > 0), lambda i: f"an abstention (predict -1) has radius {float(radius[i])} > 0"
    )
    _first(at, correct & (predict == -1), lambda i: "correct is 1 at an abstention (predict -1), never correct")
    _first(
        at,
        correct != (predict == label),
        lambda i: (
            f"correct is {int(correct[i])} but predict {int(predict[i])} {'!=' if correct[i] else '='} label "
            f"{int(label[i])}: correct must be predict == label"
        ),
    )
    if "time" in columns:
        time = np.asarray(columns["time"], dtype=np.float64)
        _first(
            at, ~(np.isfinite(time) & (time >= 0)), lambda i: f"time {float(time[i])} is not a number of seconds >= 0"
        )
    _check_bound(at, columns, radius, predict)
    _check_cap(at, columns, radius, predict, facts, radius_text)
    _check_dual(at, columns, radius, predict)


def _check_dual(refuse: At, columns: Mapping[str, list[Any]], radius: np.ndarray, predict: Any) -> None:
    """A dual row's radius <= min(router_radius, expert_radius) (the dual certificate is the smaller of the two)."""
    if "router_radius" not in columns or "expert_radius" not in columns:
        return
    both = np.minimum(np.asarray(columns["router_radius"], float), np.asarray(columns["expert_radius"], float))
    over = (np.asarray(predict) >= 0) & (radius > both + TOLERANCE * (1 + radius))
    _first(
        refuse,
        over,
        lambda i: f"radius {float(radius[i])!r} is above min(router_radius, expert_radius) {float(both[i])!r}",
    )


At = Callable[[int, str], Exception]
"""Makes the error for (row position, problem)."""


def _first(refuse: At, bad: np.ndarray, problem: Callable[[int], str]) -> None:
    """Raise for the first row where ``bad`` holds."""
    where = np.flatnonzero(bad)
    if len(where):
        raise refuse(int(where[0]), problem(int(where[0])))


def _check_unique(refuse: At, idx: np.ndarray, lines: list[int]) -> None:
    seen: dict[int, int] = {}
    ordered = np.sort(idx)
    if not (ordered[1:] == ordered[:-1]).any():
        return
    for position, value in enumerate(idx.tolist()):
        if value in seen:
            raise refuse(position, f"image {value} appears twice (first on line {lines[seen[value]]})")
        seen[value] = position


def _check_bound(refuse: At, columns: Mapping[str, list[Any]], radius: np.ndarray, predict: Any) -> None:
    """count in [0, n], pA_lower in [0, 1] and <= count / n, and a sound l2 radius <= sigma Phi^-1(pA_lower)."""
    if "count" in columns and "n" in columns:
        count, n = np.asarray(columns["count"], dtype=np.int64), np.asarray(columns["n"], dtype=np.int64)
        _first(
            refuse, (count < 0) | (count > n), lambda i: f"count {int(count[i])} is not between 0 and n = {int(n[i])}"
        )
    if "pA_lower" not in columns:
        return
    lower = np.asarray(columns["pA_lower"], dtype=np.float64)
    _first(refuse, ~((lower >= 0) & (lower <= 1)), lambda i: f"pA_lower {float(lower[i])} is not a probability")
    if "count" in columns and "n" in columns:
        above = (n > 0) & (lower > count / np.maximum(n, 1) + TOLERANCE)
        _first(
            refuse, above, lambda i: f"pA_lower {float(lower[i])!r} is above count / n = {int(count[i])} / {int(n[i])}"
        )
    sigma = np.asarray(columns["sigma"], dtype=np.float64) if "sigma" in columns else None
    if sigma is None:
        return
    for i in np.flatnonzero(_checked_l2(columns, predict)).tolist():
        bound = sigma[i] * _phi_inverse(lower[i])
        if radius[i] > bound + TOLERANCE * (1 + abs(bound)):
            raise refuse(
                i,
                f"radius {float(radius[i])!r} is above what its pA_lower certifies: sigma * Phi^-1(pA_lower) = "
                f"{float(bound)!r}",
            )


def _check_cap(
    refuse: At,
    columns: Mapping[str, list[Any]],
    radius: np.ndarray,
    predict: Any,
    facts: Facts,
    radius_text: Sequence[str],
) -> None:
    """A sound l2 radius <= sigma Phi^-1(alpha^(1/n)), the most n of n votes certify (when alpha is known)."""
    if facts.alpha is None:
        return
    rows = len(radius)
    if ("sigma" not in columns and facts.sigma is None) or ("n" not in columns and facts.n is None):
        return
    sigma = np.asarray(columns["sigma"] if "sigma" in columns else [facts.sigma] * rows, dtype=np.float64)
    n = np.asarray(columns["n"] if "n" in columns else [facts.n] * rows, dtype=np.float64)
    checked = _checked_l2(columns, predict) & (n >= 1) & (sigma > 0)
    if not checked.any():
        return
    tops, where = np.unique(np.power(facts.alpha, 1 / n[checked]), return_inverse=True)
    caps = np.full(rows, np.inf)
    caps[checked] = sigma[checked] * np.array([_phi_inverse(top) for top in tops.tolist()])[where]
    over = np.flatnonzero(radius > caps + TOLERANCE * (1 + caps))
    if not len(over):
        return
    beyond = over[radius[over] > caps[over] + _half_units(radius_text, over)]
    if len(beyond):
        i = int(beyond[0])
        raise refuse(
            i,
            f"radius {float(radius[i])!r} is above the cap {caps[i]:.6g} that n = {int(n[i])} estimation samples at "
            f"alpha = {facts.alpha:g} allow (sigma * Phi^-1(alpha^(1/n)), sigma = {sigma[i]:g})",
        )


def _checked_l2(columns: Mapping[str, list[Any]], predict: Any) -> np.ndarray:
    """The rows whose radius is a sound Gaussian-l2 certificate to check against its bound."""
    rows = len(predict)
    sound = np.asarray(columns["sound"], dtype=bool) if "sound" in columns else np.ones(rows, dtype=bool)
    gaussian = np.ones(rows, dtype=bool)
    for name, default in (("norm", "l2"), ("noise", "gaussian")):
        if name in columns:
            gaussian &= np.asarray(columns[name]) == default
    return (np.asarray(predict) >= 0) & sound & gaussian


def _phi_inverse(p: float) -> float:
    """Phi^-1(p), -inf at 0 and inf at 1."""
    if p <= 0:
        return -math.inf
    if p >= 1:
        return math.inf
    return NormalDist().inv_cdf(p)


def _half_units(radius_text: Sequence[str], rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: half a unit of the last digit its radius was written with (0 when not known).

    >>> _half_units(["0.953", "2", "1.25e-05"], np.arange(3)).tolist()
    [0.0005, 0.5, 5e-08]
    """
    if len(radius_text) == 0:
        return np.zeros(len(rows))
    texts = np.strings.lower(np.strings.strip(np.asarray(radius_text, dtype=str)[rows]))
    dot = np.strings.find(texts, ".")
    decimals = np.where(dot >= 0, np.strings.str_len(texts) - dot - 1, 0)
    half = 0.5 * 10.0 ** -decimals.astype(np.float64)
    for k in np.flatnonzero(np.strings.find(texts, "e") >= 0).tolist():
        try:
            exponent = Decimal(str(texts[k])).as_tuple().exponent
        except InvalidOperation:
            exponent = "n"
        half[k] = 0.5 * 10.0 ** int(exponent) if isinstance(exponent, int) else 0.0
    return half


# ------------------------------------------------------------------------------------------- metrics.json


def check_summary(
    metrics_path: Path,
    summary: Mapping[str, Any],
    protocol: Mapping[str, Any] | None,
    radius: Sequence[float],
    correct: Sequence[bool],
    predict: Sequence[int],
) -> None:
    """Refuse a ``metrics.json`` (summary) that disagrees with ``certify_protocol.json`` or with its rows.

    Args:
        metrics_path: the file, named in the message.
        summary: its content for one record (``metrics.json``, or its ``fixed_sigma`` part for the sound record).
        protocol: ``certify_protocol.json``, None when absent.
        radius: the summarised rows' radii, in the subset's order.
        correct: their ``correct`` column.
        predict: their predictions (-1: abstained).

    Raises:
        DamagedFileError: a protocol key, the image count, ACR, the abstention rate or a certified accuracy differs.
    """
    from rsbench.certify.pipeline.metrics import average_certified_radius, certified_accuracy

    advice = "; was it edited, or copied from another run? Certify again into a new folder to get a consistent one"
    for key in ("n0", "n", "alpha", "sigma"):
        stated, stored = summary.get(key), (protocol or {}).get(key)
        if isinstance(stated, int | float) and isinstance(stored, int | float) and not math.isclose(stated, stored):
            raise refusal(metrics_path, None, f"{key} is {stated}, certify_protocol.json says {stored}" + advice)
    if "num_images" in summary and summary["num_images"] != len(radius):
        stated = summary["num_images"]
        raise refusal(metrics_path, None, f"num_images is {stated}, but it summarises {len(radius)} rows" + advice)
    recomputed: dict[str, float] = {"acr": average_certified_radius(radius, correct)}
    if len(predict):
        recomputed["abstain_rate"] = float(np.mean(np.asarray(predict) == -1))
    for key in summary.get("certified_accuracy") or {}:
        recomputed[f"certified_accuracy[{key}]"] = certified_accuracy(radius, correct, float(key))
    for key, value in recomputed.items():
        stated = _stated(summary, key)
        if isinstance(stated, int | float) and abs(float(stated) - value) > SUMMARY_TOLERANCE:
            raise refusal(metrics_path, None, f"{key} is {stated}, its rows give {value:.6g}" + advice)


def _stated(summary: Mapping[str, Any], key: str) -> Any:
    if key.startswith("certified_accuracy["):
        return (summary.get("certified_accuracy") or {}).get(key[len("certified_accuracy[") : -1])
    return summary.get(key)


def sigma_from_path(path: Path) -> float | None:
    """The sigma named nearest the file: ``sigma_0.50`` (Cohen's logs), ``noise_0.25.tsv``, ``sigma=1.0/``.

    >>> sigma_from_path(Path("cifar10/resnet110/noise_0.25/test/sigma_0.50"))
    0.5
    """
    for part in reversed(Path(path).parts):
        match = re.search(r"(?:noise|sigma)[_=]?(\d+(?:\.\d+)?)", part)
        if match:
            return float(match.group(1).rstrip("."))
    return None


# ------------------------------------------------------------------------------------------- runs and inputs

FIXED_STEM = "certify_fixed_sigma"  # the sound certificates beside data-dependent ones (rsbench.report.load)


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object (``metrics.json``, ``certify_protocol.json``).

    Raises:
        DamagedFileError: it is not valid JSON, or not an object (one line, naming the file).
    """
    import json

    try:
        content = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise refusal(path, None, f"is not valid JSON ({error}); was it copied whole?") from None
    if not isinstance(content, dict):
        raise refusal(path, None, "does not hold a JSON object")
    return content
