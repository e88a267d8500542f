"""Writing a file whole or not at all, and naming files in records so that the records can move.

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
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


__all__ = ["atomic_path", "record_path", "save_atomically", "write_text_atomically"]
