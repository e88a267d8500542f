"""Writing a file whole or not at all, naming files in records so that the records can move, and per-image tables.

Atomic writes: every record, state file and cache rsbench rewrites in place (``metrics.json``, ``status.json``,
``certify_protocol.json``, a teacher's soft labels, ...) is written to a temporary file beside it and renamed over it
in one step (:func:`atomic_path`, :func:`write_text_atomically`), so a reader, a crash or a second process never sees
half a file. The temporary file's name holds the process id: the jobs of a sharded certification share a folder.

Paths in records (:func:`record_path`): a record names a file

1. relative to the record's own folder (the run folder) when the file lies under it (``checkpoints/best.ckpt``);
2. else relative to the working directory when the file lies under it: the repository, for the commands the README
   gives (``outputs/mnist/gaussian/sigma_0.25/<time>/checkpoints/best.ckpt``, ``experiments/<study>/models/x.ckpt``);
3. else absolute (a model kept outside the tree, such as ``/data/models/x.ckpt``): only then.

So a run folder moved or copied (into ``experiments/<study>/runs/``, onto another machine) still names its own files,
and a clone of the repository names the repository's files. These paths say what was used; no check reads them back
to find a file (a resume takes the run's overrides from ``.hydra/``, and the protocol check compares the weights'
fingerprint), so older records that hold absolute paths read as before.

Per-image tables (:class:`ImageTable`): three stages compute one row per image before they can go on, each for
minutes to hours: CAT-RS's teacher votes (:mod:`rsbench.methods.teacher`), sun2025's p_A counts
(:mod:`rsbench.methods.sun2025`) and the dual router's labels (:mod:`rsbench.dual.stages`). Each keeps its rows in
an :class:`ImageTable`:

* the table is a tensor with one row per image; a row not computed yet holds the missing value (NaN for floats, -1
  for integers), and :meth:`ImageTable.missing` names the rows still to compute;
* every :data:`SAVE_EVERY_SECONDS`, and at once when a stop is requested (:mod:`rsbench.stop`), the rows so far are
  written atomically to the partial file (:meth:`ImageTable.checkpoint`), so a stop or a crash loses at most a
  minute of work and never leaves half a file;
* the file stores the settings the rows depend on (its key: seed, epoch, N, noise stream, the images, the models'
  fingerprints, ...). A table is continued only when its stored key equals the one asked for; a table made under
  other settings is refused by :class:`~rsbench.errors.ProtocolMismatchError`, naming each setting that differs,
  rather than mixed with new rows or silently overwritten;
* :meth:`ImageTable.finish` writes the final file atomically (with the entries its users keep beside the table) and
  removes the partial file.

Files written before a table stored its key (sun2025's ``{positions, counts}``, CAT-RS's partial
``{soft_labels}``) are read through the user's ``legacy_key``: the key such a file implies (its name holds the rest).
torch is imported only when a table is made or a tensor saved, so the command-line checks stay light.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rsbench.errors import DamagedFileError, ProtocolMismatchError
from rsbench.stop import StopRequested, stop_requested

if TYPE_CHECKING:
    import torch
    from torch import Tensor

PathLike = str | os.PathLike[str]


@contextlib.contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; on a normal exit it replaces ``path`` in one rename.

    The folder is created when missing. When the block raises, the temporary file is removed and ``path`` is left as
    it was. Use for writers that need a path (a CSV writer, a copy)::

        with atomic_path(target) as temporary:
            shutil.copyfile(source, temporary)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f"{target.name}.tmp{os.getpid()}")
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def write_text_atomically(path: PathLike, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (see :func:`atomic_path`)."""
    with atomic_path(path) as temporary:
        temporary.write_text(text)


def save_atomically(payload: Any, path: PathLike) -> None:
    """``torch.save(payload, path)`` whole or not at all (see :func:`atomic_path`); torch is imported only here."""
    import torch

    with atomic_path(path) as temporary:
        torch.save(payload, temporary)


def record_path(path: PathLike, folder: PathLike | None = None) -> str:
    """How a record names the file ``path``: relative to ``folder``, else to the working directory, else absolute.

    Args:
        path: the file as given (relative to the working directory, absolute, or with ``~``).
        folder: the folder the record lies in (a run folder); ``None`` for a command to be pasted from the working
            directory (a resume hint, a model card's ``rsbench.certify`` line).

    Returns:
        A POSIX path string (see the module doc for the rule). Paths are made absolute without resolving symbolic
        links, so a file reached through a link in the tree keeps its name in the tree.

    >>> record_path("/repo/outputs/run/checkpoints/best.ckpt", "/repo/outputs/run")
    'checkpoints/best.ckpt'
    >>> record_path("/elsewhere/model.ckpt", "/repo/outputs/run")
    '/elsewhere/model.ckpt'
    """
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    bases = [Path(os.path.abspath(Path(folder).expanduser()))] if folder is not None else []
    for base in [*bases, Path(os.path.abspath(Path.cwd()))]:
        if absolute.is_relative_to(base):
            return absolute.relative_to(base).as_posix()
    return absolute.as_posix()


SAVE_EVERY_SECONDS = 60.0
"""How often the rows computed so far are saved to the partial file (and at once on a stop request)."""

LegacyKey = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]
"""The key a file without one implies (from its other entries), or ``None`` when it implies none."""


class ImageTable:
    """One row per image, kept in ``path``'s partial file while computed, resumed from it, finished atomically.

    Args:
        path: the final file (a ``torch.save`` file); ``None``: kept in memory only (nothing saved or resumed).
        key: the settings the rows depend on (a JSON mapping); stored in the file under ``key_name``.
        shape: the table's shape, ``(rows, *row_shape)``.
        dtype: a floating dtype (missing rows hold NaN) or an integer one (missing rows hold -1).
        what: how messages name the table (``"CAT-RS teacher votes"``).
        values_name: the table's entry in the file.
        key_name: the key's entry in the file.
        partial: where rows in progress are saved (default: ``path`` itself, which is then complete only when
            :meth:`missing` is empty).
        fixed: entries stored with the table in the partial and the final file (sun2025's ``positions``).
        legacy_key: the key of a file written without one (see the module doc); ``None``: such a file is refused.

    Raises:
        ProtocolMismatchError: the final or partial file holds a table made under another key (each differing
            setting named).
        DamagedFileError: a file that cannot be read, or holds a table of another shape or type.
    """

    def __init__(
        self,
        path: Path | None,
        key: Mapping[str, Any],
        shape: Sequence[int],
        dtype: torch.dtype,
        what: str,
        *,
        values_name: str = "table",
        key_name: str = "key",
        partial: Path | None = None,
        fixed: Mapping[str, Any] | None = None,
        legacy_key: LegacyKey | None = None,
    ) -> None:
        self.path = None if path is None else Path(path)
        self.partial = self.path if partial is None else Path(partial)
        self.key = _plain_json(key)
        self.what, self.values_name, self.key_name = what, values_name, key_name
        self.fixed = dict(fixed or {})
        self._legacy_key = legacy_key
        import torch

        self.missing_value = math.nan if dtype.is_floating_point else -1
        self.values = torch.full(tuple(shape), self.missing_value, dtype=dtype)
        self.finished = False
        self.resumed = False
        self._last_save = time.monotonic()
        self._load()

    # ------------------------------------------------------------------------------------------- reading

    def _load(self) -> None:
        """Read the final file when it exists (``finished``), else the partial file (``resumed``)."""
        if self.path is None:
            return
        if self.path.is_file() and self.path != self.partial:
            self.values = self._read(self.path)
            self.finished = True
        elif self.partial is not None and self.partial.is_file():
            self.values = self._read(self.partial)
            self.resumed = True
            self.finished = not self.missing()

    def _read(self, path: Path) -> Tensor:
        """The table stored in ``path``, after checking its key, shape and type."""
        from torch import Tensor

        from rsbench.loading import read_plain

        stored = read_plain(path, self.what, named=f"{self.what} {path}", advice="move it away to compute it again")
        if not isinstance(stored, Mapping) or self.values_name not in stored:
            raise DamagedFileError(f"{path} does not hold {self.what} (no {self.values_name!r} entry); move it away")
        key = stored.get(self.key_name)
        if key is None and self._legacy_key is not None:
            key = self._legacy_key(stored)
        differences = _differences(_plain_json(key) if isinstance(key, Mapping) else {}, self.key)
        if differences:
            raise ProtocolMismatchError(
                f"{path} holds {self.what} made under other settings, so its rows cannot be used:\n"
                + "\n".join(differences)
                + f"\nUse the stored settings, or move {path.name} away to compute the table again."
            )
        values = stored[self.values_name]
        if not isinstance(values, Tensor) or values.shape != self.values.shape or values.dtype != self.values.dtype:
            found = f"{tuple(values.shape)} {values.dtype}" if isinstance(values, Tensor) else type(values).__name__
            raise DamagedFileError(
                f"{path} holds {self.what} of shape and type {found}, not {tuple(self.values.shape)} "
                f"{self.values.dtype}; move it away to compute the table again"
            )
        return values

    # ------------------------------------------------------------------------------------------- filling

    def done(self) -> Tensor:
        """A boolean ``[rows]``: whether each row is computed (no entry holds the missing value)."""
        flat = self.values.reshape(len(self.values), -1)
        absent = flat.isnan() if self.values.dtype.is_floating_point else flat == self.missing_value
        return ~absent.any(dim=1)

    def missing(self, among: Iterable[int] | None = None) -> list[int]:
        """The rows still to compute, in order (among ``among`` only, when given)."""
        done = self.done()
        rows = range(len(done)) if among is None else among
        return [int(row) for row in rows if not bool(done[int(row)])]

    def put(self, rows: Sequence[int] | Tensor, values: Tensor) -> None:
        """Store the computed ``values`` of ``rows`` (in memory; :meth:`checkpoint` saves them)."""
        import torch

        self.values[torch.as_tensor(rows, dtype=torch.long)] = values.to(self.values.dtype)

    def checkpoint(self) -> None:
        """Save the rows so far when a save is due or a stop was requested, then stop if one was.

        Call it after each group of rows, where the work can stop without loss.

        Raises:
            StopRequested: a stop was requested (after the rows are saved).
        """
        signum = stop_requested()
        if signum is not None or time.monotonic() - self._last_save > SAVE_EVERY_SECONDS:
            self.save()
        if signum is not None:
            raise StopRequested(signum)

    def save(self) -> None:
        """Write the rows so far to the partial file, atomically (nothing without a path)."""
        if self.partial is not None:
            save_atomically(self._payload(), self.partial)
        self._last_save = time.monotonic()

    def finish(self, extra: Mapping[str, Any] | None = None) -> Tensor:
        """Write the final file atomically (key, table, fixed entries and ``extra``), remove the partial one.

        Returns:
            The table.
        """
        if self.path is not None:
            save_atomically({**self._payload(), **(extra or {})}, self.path)
            if self.partial != self.path and self.partial is not None:
                self.partial.unlink(missing_ok=True)
        self.finished = True
        return self.values

    def _payload(self) -> dict[str, Any]:
        return {**self.fixed, self.key_name: self.key, self.values_name: self.values}


def _plain_json(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples as lists), so stored and requested keys compare equal."""
    return json.loads(json.dumps(value))


def _differences(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    """One line per setting that differs between a stored key and the one asked for."""
    return [
        f"  {name}: stored {stored.get(name, '<missing>')!r}, requested {wanted.get(name, '<missing>')!r}"
        for name in sorted(set(stored) | set(wanted))
        if stored.get(name) != wanted.get(name)
    ]


__all__ = ["SAVE_EVERY_SECONDS", "ImageTable", "atomic_path", "record_path", "save_atomically", "write_text_atomically"]
