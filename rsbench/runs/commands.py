"""One entry path for the commands that run a job in a run directory: ``python -m rsbench`` and ``rsbench.certify``.

The command line is checked and expanded here, then Hydra composes the config and :func:`rsbench.runs.job.job` runs
it with the same lock, resume, stop, status and error handling for both.

Nothing here imports torch: ``--help`` and ``--cfg job`` answer at once, and a bad request is refused before the
heavy imports of a run (:mod:`rsbench.runs.request`, :mod:`rsbench.runs.precheck`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rsbench.errors import ConfigError, RunDirectoryBusyError
from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.cli import CERTIFY, HELP_FLAGS, TRAIN, Command, expand_resume, is_query, share_config_store
from rsbench.runs.floor import refuse

__all__ = ["CERTIFY", "TRAIN", "Command", "main"]


def main(command: Command, hydra_main: Callable[[], Any]) -> None:
    """Run ``command``: check and expand the command line, re-execute for the fast allocator, then call Hydra.

    ``hydra_main`` is the command's ``@hydra.main`` function (defined in its ``__main__`` module, whose name Hydra
    gives the job). A bad request ends here with one line, ``rsbench: error: ...``, and exit status 2.
    """
    from rsbench.runs.precheck import check_before_run  # (torch-free)
    from rsbench.runs.request import check_request  # (torch-free)

    arguments = sys.argv[1:]
    query = is_query(arguments)
    if not query:
        reexec_with_fast_allocator(command.module)  # before anything else: the new process starts from the top
    try:
        arguments = expand_resume(arguments, command)
        if not query:
            check_request(arguments, command.config_name)
            check_before_run(arguments, command)
    except (ConfigError, RunDirectoryBusyError) as error:
        refuse(str(error))
    if not query:
        from rsbench.runs.schemas import register_schemas  # loads torch: only for a run (queries stay instant)

        register_schemas()
    elif HELP_FLAGS.intersection(arguments):
        share_config_store()
    sys.argv[1:] = arguments
    hydra_main()
