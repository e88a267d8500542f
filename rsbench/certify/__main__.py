"""``python -m rsbench.certify [overrides]``: certify a model rsbench did not train, or an ensemble of checkpoints.

See ``conf/certify_model.yaml``, ``--help`` and ``--cfg job``.
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.errors import InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

from rsbench.errors import RsbenchError
from rsbench.runs.allocator import reexec_with_fast_allocator
from rsbench.runs.cli import is_query

log = logging.getLogger("rsbench")


@hydra.main(version_base="1.3", config_path="../../conf", config_name="certify_model")
def main(cfg: DictConfig) -> float | None:
    """Certify ``cfg.model`` as ``cfg`` says; return the sound ACR (the sweep objective).

    Errors in the request (a bad value, a missing file, weights that do not fit) end the run with their message
    and exit status 2, without a traceback; rows already written are kept.
    """
    from rsbench.runs.certify_model import certify_model

    try:
        return certify_model(cfg)
    except (RsbenchError, InstantiationException, InterpolationResolutionError, MissingMandatoryValue) as error:
        log.error("%s", error)
        sys.exit(2)


if __name__ == "__main__":
    reexec_with_fast_allocator("rsbench.certify")
    if not is_query(sys.argv[1:]):  # the settings' schema loads torch: only for a run (queries stay instant)
        from rsbench.runs.schemas import register_schemas

        register_schemas()
    main()
