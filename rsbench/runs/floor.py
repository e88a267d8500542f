"""The floor every ``python -m rsbench.*`` command stands on: one error line, refused before anything heavy loads.

Two grammars stand on it. The commands that run a job take Hydra overrides (``python -m rsbench``,
``rsbench.certify``, ``rsbench.dual``: :mod:`rsbench.runs.commands`); ``rsbench.leaderboard`` and
``rsbench.importer`` compose theirs with Hydra as well. The commands whose grammar is positional (``rsbench.report``,
the shard merge ``rsbench.certify.merge``, ``rsbench.published.importer``, ``rsbench.importer.plain`` and the
benchmarks under ``rsbench.bench``) parse with :class:`CommandParser`. Either way:

- a bad option, key or value ends the command with one line on stderr, ``rsbench: error: <what> (allowed: ...;
  did you mean X?)``, and exit status 2 (:func:`refuse`), before torch is imported;
- the work runs under the run's stop handling (:func:`run_guarded`, :class:`rsbench.stop.StopGuard`): the first
  SIGTERM, SIGINT, SIGUSR1 or SIGUSR2 lets the files in flight be finished, then the command ends with the signal's
  exit status (128 + its number); a second one stops at once;
- an error in the request met while working (an :class:`~rsbench.errors.RsbenchError`, or one Hydra wrapped) ends
  with the same one line; anything else is a bug and keeps its traceback.

Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

PREFIX = "rsbench: error: "
USAGE_ERROR = 2
"""The exit status of a refused request (as argparse and Hydra use)."""

log = logging.getLogger("rsbench")


def error_line(message: str) -> int:
    """Print ``rsbench: error: <message>`` as one line on stderr; return the exit status of a refusal (2)."""
    print(PREFIX + " ".join(str(message).split()), file=sys.stderr, flush=True)
    return USAGE_ERROR


def refuse(message: str) -> NoReturn:
    """End the command with ``rsbench: error: <message>`` on one line of stderr and exit status 2."""
    raise SystemExit(error_line(message))


def allowed(value: object, names: Iterable[str]) -> str:
    """``(allowed: a, b, c; did you mean b?)``: what ``value`` may be, with the close names when there are any.

    >>> allowed("wilsn", ["beta", "wilson"])
    '(allowed: beta, wilson; did you mean wilson?)'
    """
    names = [str(name) for name in names]
    close = difflib.get_close_matches(str(value), names, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"(allowed: {', '.join(names)}{hint})"


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose refusals are the floor's: one line, what is allowed, the close names.

    An unknown option is named with the close ones (``--radi`` is a prefix of ``--radii`` and accepted, as argparse
    does; ``--radiis`` is refused with ``did you mean --radii?``), a value outside an option's choices likewise, and
    every other argparse complaint (a missing argument, a value that is not a number) is one line too.
    """

    def __init__(self, prog: str, description: str | None = None, **options: Any) -> None:
        options.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(prog=prog, description=description, **options)

    def error(self, message: str) -> NoReturn:
        """Refuse the command line in one line (argparse prints its usage and the message on two)."""
        usage = "" if "(allowed: " in message else f" ({self.prog} --help lists the arguments)"
        refuse(message + usage)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        """Parse ``args`` (default: ``sys.argv[1:]``); an argument no option takes is refused with the close options."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            self.error(self._unknown(extra))
        return parsed

    def options(self) -> list[str]:
        """Every long option of the command (``--radii``, ...), and the short ones that have no long form."""
        found: list[str] = []
        for action in self._actions:
            strings = action.option_strings
            found += [s for s in strings if s.startswith("--")] or strings
        return found

    def _unknown(self, extra: Sequence[str]) -> str:
        option = next((arg for arg in extra if arg.startswith("-") and arg != "-"), None)
        if option is None:
            return f"unrecognized arguments: {' '.join(extra)}"
        name = option.split("=", 1)[0]
        return f"unknown option {name} {allowed(name, self.options())}"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            raise argparse.ArgumentError(action, f"{value!r} is not a choice {allowed(value, action.choices)}")


def run_guarded(work: Callable[[], int], what: str, again: str) -> int:
    """Run ``work`` under the run's stop handling; return its exit status.

    A stop signal lets the unit in flight finish: ``work`` calls :func:`rsbench.stop.raise_if_stop_requested` between
    its units (a folder merged, the report's files written), so none is left half written.

    Args:
        work: the command's work, after its arguments were checked; returns the exit status.
        what: what the work is, for the stop message (``merging shards``).
        again: how to do it again after a stop (the command to rerun).

    Returns:
        ``work``'s status; after a stop, 128 + the signal's number; 2, after one ``rsbench: error:`` line, for an
        error in the request met while working.
    """
    from rsbench.errors import user_message
    from rsbench.stop import StopGuard, StopRequested

    try:
        with StopGuard():
            return work()
    except StopRequested as stop:
        log.warning("%s while %s; to do it again: %s", stop, what, again)
        return stop.exit_code
    except Exception as error:
        message = user_message(error)
        if message is None:
            raise
        return error_line(message)
