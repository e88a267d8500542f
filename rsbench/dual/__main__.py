"""``python -m rsbench.dual stage=<labels|route|iterate|certify> [overrides]`` (conf/dual.yaml, docs/dual_smoothing.md).

Each stage runs as a job of rsbench's one job floor (:func:`rsbench.runs.job.job`, as ``python -m rsbench.certify``
does): the command line is checked before torch is imported (a threat model dual smoothing cannot certify, a required
value unset, a busy run directory), the run directory is locked, ``.hydra/`` and ``status.json`` are written once the
checks pass (nothing is left behind by a refused command), a bad value ends the command with one
``rsbench: error: ...`` line, and a stop signal (Ctrl-C, SIGTERM) ends it after the image in flight with the command
that continues it (``python -m rsbench.dual resume=<run dir>``; rerunning the same command continues too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rsbench.runs.cli import DUAL, config_dir
from rsbench.runs.commands import main as run_command
from rsbench.runs.floor import allowed, refuse

STAGES = ("labels", "route", "iterate", "certify")
log = logging.getLogger("rsbench.dual")


def run_stage(cfg: DictConfig, on_ready: Callable[[], None] | None = None) -> float | None:
    """Run ``cfg.stage`` into ``cfg.output_dir``; return the dual ACR after ``stage=certify``, else ``None``.

    ``on_ready`` is called once the stage's checks have passed, before its first file is written (for
    ``stage=certify``: the models built, the expert records checked).
    """
    from rsbench.certify.pipeline.dual_records import format_dual_summary
    from rsbench.dual import stages
    from rsbench.stop import raise_if_stop_requested

    output_dir = Path(cfg.output_dir)
    if cfg.stage == "certify":
        summary = stages.certify_stage(cfg, output_dir, on_ready=on_ready)
        raise_if_stop_requested()  # stopped after a whole row: the job ends as interrupted, with how to resume
        if summary is None:
            return None
        print(f"{format_dual_summary(summary)}\nwrote {output_dir}", flush=True)
        return float(summary["acr"])
    if on_ready is not None:
        on_ready()
    output_dir.mkdir(parents=True, exist_ok=True)
    if cfg.stage == "labels":
        stages.labels_stage(cfg, output_dir)
    elif cfg.stage == "route":
        stages.route_stage(cfg, output_dir)
    else:
        stages.iterate_stage(cfg, output_dir)
    print(f"wrote {output_dir}", flush=True)
    return None


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="dual")
def main(cfg: DictConfig) -> float | None:
    """Run ``cfg.stage`` as a job (:func:`run_stage`); return the dual ACR after ``stage=certify`` (a sweep objective).

    The threat model was checked before torch was imported (:func:`rsbench.runs.precheck.check_before_run`).
    """
    if cfg.stage not in STAGES:
        refuse(f"stage={cfg.stage!r} is not a stage {allowed(cfg.stage, STAGES)}")
    from rsbench.runs.job import job

    return job(cfg, DUAL, work=run_stage)


if __name__ == "__main__":
    run_command(DUAL, main)
