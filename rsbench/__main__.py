"""``python -m rsbench [overrides]``: train and certify, configured by Hydra (see ``--help`` and ``--cfg job``)."""

from __future__ import annotations

import logging
import sys
import warnings

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from rsbench.allocator import reexec_with_fast_allocator
from rsbench.errors import RsbenchError

log = logging.getLogger("rsbench")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    """Train and certify as ``cfg`` says; return the sweep objective.

    Errors in the request (a bad value, a missing dataset, a checkpoint that does not fit) end the run with their
    message and exit status 2, without a traceback; files already written (checkpoints, certify.tsv) are kept.
    """
    from rsbench.run import run

    # A deprecation inside Lightning's own pytree helpers, not actionable by users.
    warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
    try:
        return run(cfg)
    except (RsbenchError, InstantiationException, InterpolationResolutionError) as error:
        log.error("%s", error)
        sys.exit(2)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench")
    main()
