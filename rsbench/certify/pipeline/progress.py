"""Progress that reaches a log file: a bar in a terminal, lines at an interval everywhere else.

Under a pipe, ``nohup`` or SLURM a progress bar is one ever-growing line (or nothing for minutes); there
:func:`progress` logs ``<what>: <done> of <total> <unit> (<rate> <unit>/s, about <time> left)`` every
:data:`LOG_EVERY_SECONDS` (``RSBENCH_PROGRESS_SECONDS`` sets it) instead, and once at the end.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from tqdm.auto import tqdm

log = logging.getLogger("rsbench")

LOG_EVERY_SECONDS = 30.0


def interactive() -> bool:
    """Whether progress goes to a terminal (stderr is a tty), where a bar redraws in place."""
    return sys.stderr.isatty()


def log_interval() -> float:
    """Seconds between two progress lines in a non-interactive run (``RSBENCH_PROGRESS_SECONDS``, default 30)."""
    try:
        return float(os.environ.get("RSBENCH_PROGRESS_SECONDS", LOG_EVERY_SECONDS))
    except ValueError:
        return LOG_EVERY_SECONDS


def duration(seconds: float) -> str:
    """``seconds`` as ``42 s``, ``7 min`` or ``2.5 h``.

    >>> duration(42.3), duration(420), duration(9000)
    ('42 s', '7 min', '2.5 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class ProgressLines:
    """A tqdm-like counter that logs progress lines: at the start, at the first count, each ``interval``, at the end.

    The first count's line gives the pace and the time left within seconds of the start, not after ``interval``.
    """

    def __init__(self, total: int, initial: int, desc: str, unit: str, interval: float) -> None:
        self.total, self.n, self.desc, self.unit, self.interval = total, initial, desc, unit, interval
        self._start_n = initial
        self._started = self._last = time.monotonic()
        if initial < total:
            log.info("%s", self.line(self._started))

    def update(self, count: int = 1) -> None:
        """Count ``count`` more; log a line at the first count and when the interval has passed."""
        first = self.n == self._start_n
        self.n += count
        now = time.monotonic()
        if (first or now - self._last >= self.interval) and self.n < self.total:
            self._last = now
            log.info("%s", self.line(now))

    def line(self, now: float | None = None) -> str:
        """``<desc>: <n> of <total> <unit> (<rate> <unit>/s, about <time> left)``."""
        elapsed = (now if now is not None else time.monotonic()) - self._started
        rate = (self.n - self._start_n) / elapsed if elapsed > 0 else 0.0
        text = f"{self.desc}: {self.n} of {self.total} {self.unit}"
        if rate > 0:
            left = f", about {duration((self.total - self.n) / rate)} left" if self.n < self.total else ""
            text += f" ({rate:.3g} {self.unit}/s{left})"
        return text

    def close(self) -> None:
        """Log the final line (when anything was counted)."""
        if self.n > self._start_n:
            log.info("%s in %s", self.line(), duration(time.monotonic() - self._started))


def progress(total: int, desc: str, unit: str = "img", initial: int = 0) -> Any:
    """A progress counter (``update(k)``, ``close()``): a tqdm bar in a terminal, :class:`ProgressLines` elsewhere."""
    if interactive():
        return tqdm(total=total, initial=initial, desc=desc, unit=unit, mininterval=1.0)
    return ProgressLines(total, initial, desc, unit, log_interval())
