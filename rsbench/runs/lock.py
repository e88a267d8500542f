"""One writer per run directory: an advisory ``flock`` on ``<run dir>/.rsbench/lock``.

The lock file holds the pid, host, start time and command of the process that holds it, so a second process can say
who is in the way. The operating system releases a ``flock`` when its process dies (even by ``kill -9``), so a crash
never leaves a directory locked; the file itself stays and is simply locked again by the next run. On NFS, Linux
maps ``flock`` to an NFS lock, which holds across machines.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from rsbench.errors import RunDirectoryBusyError

log = logging.getLogger(__name__)

LOCK_FILE = Path(".rsbench") / "lock"
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID")
"""The rank variables of torchrun, Lightning and SLURM: only the first process of a distributed run holds the lock."""


def is_global_zero() -> bool:
    """Whether this is the first (or only) process of the run, by :data:`RANK_VARIABLES` (the one that locks)."""
    return all(os.environ.get(name, "0") in ("", "0") for name in RANK_VARIABLES)


class RunLock:
    """Hold the lock of ``directory`` while the ``with`` block runs.

    Args:
        directory: the run directory (created if missing).
        wait: block until the holder finishes instead of failing (used for shared caches such as teachers).
        command: the command line to record as the holder's (default: ``rsbench`` and this process's arguments).
    """

    def __init__(self, directory: Path, wait: bool = False, command: str | None = None) -> None:
        self.path = Path(directory) / LOCK_FILE
        self.wait = wait
        self.command = command
        self._file: TextIO | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("a+")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held by another process (EWOULDBLOCK)
            if not self.wait:
                file.close()
                raise busy_error(self.path.parent.parent) from None
            log.info("waiting for %s to finish with %s", _describe(_read_holder(self.path)), self.path.parent.parent)
            fcntl.flock(file, fcntl.LOCK_EX)
        except OSError as error:  # a file system without locks (Lustre mounted with noflock, some FUSE mounts)
            log.warning("cannot lock %s (%s): nothing stops a second process from writing into it", self.path, error)
        file.seek(0)
        file.truncate()
        json.dump(_this_process(self.command), file)
        file.flush()
        self._file = file
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._file is not None:
            self._file.close()  # closing the only descriptor of the file releases its flock
            self._file = None


def is_held(directory: Path) -> bool:
    """Whether a live process holds the lock of run ``directory`` now (False when it has no lock file).

    Probes with a shared non-blocking ``flock``, released at once: it never waits and never keeps the lock.
    """
    try:
        file = (Path(directory) / LOCK_FILE).open("r")
    except OSError:
        return False
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # an exclusive holder: the run's process is alive
            return True
        except OSError:  # a file system without locks: nothing can be known
            return False
        fcntl.flock(file, fcntl.LOCK_UN)
    return False


def busy_error(directory: Path) -> RunDirectoryBusyError:
    """The error for run ``directory`` held by another process: who holds it, and what to do."""
    holder = _read_holder(Path(directory) / LOCK_FILE)
    stop = f"kill -TERM {holder['pid']}" if "pid" in holder else "kill -TERM <its pid>"
    return RunDirectoryBusyError(
        f"{directory} is in use by {_describe(holder)}; wait for it to finish, or stop it ({stop}) and resume it, "
        "or choose another hydra.run.dir"
    )


def _this_process(command: str | None) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": command or " ".join(["rsbench", *sys.argv[1:]]),
    }


def _read_holder(path: Path) -> dict[str, Any]:
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    if "pid" not in holder:
        return "another process"
    since, command = holder.get("since", "?"), holder.get("command", "?")
    return f"pid {holder['pid']} on {holder.get('host', '?')} (since {since}: {command})"
