"""``python -m rsbench [overrides]`` and the ``rsbench`` command: train and certify, configured by Hydra.

``--help`` lists the options, ``--cfg job`` prints the composed config (``--resolve`` with the looked-up values),
``resume=<run dir>`` continues a stopped run. Nothing heavy is imported before Hydra has parsed the command, so
queries answer at once and a run re-executes itself for the fast allocator before torch is loaded.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from rsbench.errors import ConfigError
from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.cli import HELP_FLAGS, config_dir, expand_resume, is_query, share_config_store


def main() -> None:
    """The command: expand ``resume=``, re-execute for the fast allocator when running a job, then run Hydra."""
    arguments = sys.argv[1:]
    if not is_query(arguments):
        reexec_with_fast_allocator("rsbench")
        from rsbench.runs.schemas import register_schemas  # loads torch: only for a run (queries stay instant)

        register_schemas()
    elif HELP_FLAGS.intersection(arguments):
        share_config_store()
    try:
        sys.argv[1:] = expand_resume(arguments)
    except ConfigError as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    hydra_main()


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job of Hydra (a run, or one point of a sweep): see :func:`rsbench.runs.job.job`."""
    from rsbench.runs.job import job

    return job(cfg)


if __name__ == "__main__":
    main()
