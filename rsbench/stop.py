"""Stopping a run on request (SIGTERM, SIGINT, SLURM's SIGUSR1/SIGUSR2) without losing or corrupting anything.

While a :class:`StopGuard` is active (the run layer holds one for every job), the first such signal only records the
request, and the work stops at its next safe point. Inside Lightning's ``fit`` and ``test`` that is Lightning's own
SIGTERM handling: it ends training after the batch in flight (the partial epoch is dropped, ``last.ckpt`` keeps the
last complete one) and evaluation between batches; the guard passes SIGINT, SIGUSR1 and SIGUSR2 on to it as well,
since Lightning listens to SIGTERM only. Where Lightning has no say, the work loops call
:func:`raise_if_stop_requested` (or check :func:`stop_requested`) themselves: certification after the image in
flight (its row is written whole or not at all), CAT-RS teacher labelling after the image in flight (the rows so far
are saved). A second signal stops at once, dropping whatever was in flight; files stay consistent because rows are
appended line by line and checkpoints are replaced atomically.

Layer 1 of rsbench: any layer may ask whether a stop was requested; only the run layer installs the guard.

:class:`StopRequested` derives from ``BaseException`` so that no ``except Exception`` on the way swallows it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

log = logging.getLogger(__name__)

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
Handler = Callable[[int, FrameType | None], Any] | int | None


class StopRequested(BaseException):
    """A stop signal arrived; raised at the next safe point (or at once on a second signal).

    Attributes:
        signum: the signal that asked for the stop.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number (SIGTERM: 143, SIGINT: 130)."""
        return 128 + self.signum


class StopGuard:
    """Install graceful handlers for :data:`STOP_SIGNALS` while the ``with`` block runs, then restore the old ones.

    A signal that already has a handler of its own is left to it: under submitit (``hydra/launcher=slurm``), SIGTERM
    is ignored and SIGUSR2 checkpoints, requeues and exits the job, which drops the work in flight as a crash would
    (rows and checkpoints stay whole) and the requeued job continues from its files. Only the main thread can
    install handlers; elsewhere the guard does nothing. Handlers installed later by other code (Lightning composes
    its SIGTERM handler with the current one) still call this one, and this one passes every other stop signal on to
    such a SIGTERM handler (:meth:`_pass_on`).
    """

    _active: StopGuard | None = None

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Handler] = {}
        self._passing_on = False

    def __enter__(self) -> StopGuard:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
                self._previous[signum] = signal.signal(signum, self._handle)
        StopGuard._active = self
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.restore()

    def restore(self) -> None:
        """Put back the handlers that were installed before the guard (idempotent)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}
        if StopGuard._active is self:
            StopGuard._active = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._passing_on:
            return  # the SIGTERM handler this guard passed a request to calls the guard back: nothing new
        if self.signum is not None:
            raise StopRequested(signum)  # the second request: stop now
        self.signum = signum
        log.warning(
            "%s received: stopping at the next safe point (send it again to stop at once)", signal.Signals(signum).name
        )
        self._pass_on(signum, frame)

    def _pass_on(self, signum: int, frame: FrameType | None) -> None:
        """Hand a stop request other than SIGTERM to the SIGTERM handler installed over the guard, if any.

        While Lightning fits or tests, its handler (composed with this one) makes it stop between steps; it only
        listens to SIGTERM, so a SIGINT, SIGUSR1 or SIGUSR2 is handed over as one. A SIGTERM reached the guard
        through that handler already, and without one (outside ``fit``/``test``) there is no one to tell.
        """
        handler = signal.getsignal(signal.SIGTERM)
        if signum == signal.SIGTERM or not callable(handler) or handler == self._handle:
            return
        self._passing_on = True
        try:
            handler(signal.SIGTERM, frame)
        finally:
            self._passing_on = False


def stop_requested() -> int | None:
    """The signal that asked the active guard to stop, or ``None``."""
    guard = StopGuard._active
    return guard.signum if guard is not None else None


def raise_if_stop_requested() -> None:
    """Raise :class:`StopRequested` if a stop signal arrived: call it where the work can stop without loss.

    Raises:
        StopRequested: a stop was requested.
    """
    signum = stop_requested()
    if signum is not None:
        raise StopRequested(signum)
