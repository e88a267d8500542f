"""``python -m rsbench [overrides]`` and the ``rsbench`` command: train and certify, configured by Hydra.

``--help`` lists the options, ``--cfg job`` prints the composed config (``--resolve`` with the looked-up values),
``resume=<run dir>`` continues a stopped run. Nothing heavy is imported before Hydra has parsed the command, so
queries answer at once, a bad request is refused at once, and a run re-executes itself for the fast allocator
before torch is loaded (:mod:`rsbench.runs.commands`, shared with ``python -m rsbench.certify``).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rsbench.runs.cli import TRAIN, config_dir
from rsbench.runs.commands import main as run_command


def main() -> None:
    """The command: check and expand the command line, re-execute for the fast allocator, then run Hydra."""
    run_command(TRAIN, hydra_main)


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def hydra_main(cfg: DictConfig) -> float | None:
    """One job of Hydra (a run, or one point of a sweep): see :func:`rsbench.runs.job.job`."""
    from rsbench.runs.job import job

    return job(cfg, TRAIN)


if __name__ == "__main__":
    main()
