"""``python -m rsbench.dual stage=<labels|route|iterate|certify> [overrides]`` (conf/dual.yaml, docs/dual_smoothing.md).

A bad value ends the command with one ``rsbench: error: ...`` line; a stop signal (Ctrl-C, SIGTERM) ends it after the
image in flight, and rerunning the same command continues from the files already written.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from rsbench.errors import RsbenchError
from rsbench.runs.cli import config_dir

STAGES = ("labels", "route", "iterate", "certify")
log = logging.getLogger("rsbench.dual")


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="dual")
def main(cfg: DictConfig) -> float | None:
    """Run ``cfg.stage``; return the dual ACR after ``stage=certify`` (a sweep's objective), else ``None``."""
    if cfg.stage not in STAGES:
        print(f"rsbench: error: stage={cfg.stage!r}: use one of {', '.join(STAGES)}", file=sys.stderr)
        sys.exit(2)
    from rsbench.dual.checks import check_dual_threat

    try:
        check_dual_threat(cfg.certify)  # before torch is imported
    except RsbenchError as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        sys.exit(2)
    from rsbench.certify.dual import format_dual_summary
    from rsbench.dual import stages
    from rsbench.stop import StopGuard, StopRequested

    output_dir = Path(cfg.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        with StopGuard():
            if cfg.stage == "labels":
                stages.labels_stage(cfg, output_dir)
            elif cfg.stage == "route":
                stages.route_stage(cfg, output_dir)
            elif cfg.stage == "iterate":
                stages.iterate_stage(cfg, output_dir)
            else:
                summary = stages.certify_stage(cfg, output_dir)
                if summary is None:
                    return None
                print(f"{format_dual_summary(summary)}\nwrote {output_dir}")
                return float(summary["acr"])
    except StopRequested as stop:
        log.warning("stopped: rerun the same command to continue (%s)", output_dir)
        sys.exit(stop.exit_code)
    except (RsbenchError, ValueError) as error:
        print(f"rsbench: error: {error}", file=sys.stderr)
        sys.exit(2)
    return None


if __name__ == "__main__":
    main()
