"""``python -m rsbench.certify [overrides]``: certify a model rsbench did not train, or an ensemble of checkpoints.

See ``conf/certify_model.yaml``, ``--help`` and ``--cfg job``. It runs through the same lifecycle as
``python -m rsbench`` (:mod:`rsbench.runs.commands`, :mod:`rsbench.runs.job`): one writer per run directory,
``resume=<run dir>``, a safe stop on Ctrl-C or SIGTERM with the command that continues, ``status.json``, nothing left
behind by a refused request, and errors in one line.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rsbench.runs.cli import CERTIFY, config_dir
from rsbench.runs.commands import main as run_command


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="certify_model")
def main(cfg: DictConfig) -> float | None:
    """Certify ``cfg.model`` as ``cfg`` says; return the sound ACR (the sweep objective).

    See :func:`rsbench.runs.certify_model.certify_model`; the job around it is :func:`rsbench.runs.job.job`.
    """
    from rsbench.runs.job import job

    return job(cfg, CERTIFY)


if __name__ == "__main__":
    run_command(CERTIFY, main)
