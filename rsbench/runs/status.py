"""``status.json``: how a run stands (running, completed, failed, interrupted), with its overrides and outcome.

Written by the job into its run directory when its checks have passed and again when it ends; a sweep's summary is
built from its jobs' status files, so it also covers jobs that ran in other processes (SLURM, local_jobs).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rsbench.files import write_text_atomically
from rsbench.runs.quoting import resume_command

STATUS = "status.json"
State = Literal["running", "completed", "failed", "interrupted"]


def write_status(
    directory: Path,
    state: State,
    overrides: Sequence[str],
    *,
    objective: float | None = None,
    error: str | None = None,
    module: str = "rsbench",
) -> None:
    """Record ``state`` in ``<directory>/status.json`` (atomically: a reader never sees half a file).

    Its ``resume`` entry is the command that continues the run (``python -m <module> resume=<directory>``), quoted
    so that it pastes back into a shell (the directory relative to the working directory when it lies under it).
    """
    status: dict[str, Any] = {
        "status": state,
        "overrides": list(overrides),
        "objective": objective,
        "error": error,
        "resume": resume_command(module, directory),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    write_text_atomically(Path(directory) / STATUS, json.dumps(status, indent=2) + "\n")


def read_status(directory: Path) -> dict[str, Any] | None:
    """The status of the run in ``directory``, or ``None`` when it has none (or an unreadable one)."""
    try:
        status = json.loads((Path(directory) / STATUS).read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None
