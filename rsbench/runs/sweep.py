"""The end of a sweep (``-m``): one line per job (status, objective, overrides, error), in the log and a file.

Every job of a sweep runs even when others fail (the job reports its error and returns instead of ending the
process); :class:`SweepSummary`, a Hydra callback (``hydra.callbacks`` in ``conf/config.yaml``), then lists them all
from their ``status.json`` files, writes ``sweep_summary.tsv`` into the sweep directory, and ends the command with
exit status 1 when any job failed. A job still running in another process (its run directory locked by a live
process: several commands sharing one sweep folder, e.g. one per seed) is listed as such, not as a failure.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from rsbench.runs.cli import RUN_CONFIG
from rsbench.runs.lock import is_held
from rsbench.runs.status import read_status

log = logging.getLogger("rsbench.sweep")

SUMMARY = "sweep_summary.tsv"
ELSEWHERE = "running (another process)"


class SweepSummary(Callback):
    """Summarise the jobs of a finished sweep; exit with status 1 if any of them failed."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Read every job's ``status.json`` under the sweep directory and report them."""
        sweep_dir = Path(str(config.hydra.sweep.dir))
        jobs = sorted((p for p in sweep_dir.iterdir() if p.is_dir()), key=_job_order) if sweep_dir.is_dir() else []
        rows = []
        for job in jobs:
            status = read_status(job)
            if status is not None and status.get("status") == "running" and is_held(job):
                status = {**status, "status": ELSEWHERE}
            if status is not None or (job / RUN_CONFIG).is_dir():  # a job that got past its checks but left no status
                rows.append((job.name, status or {"status": "unknown (no status.json)"}))
        lines = ["job\tstatus\tobjective\toverrides\terror"]
        lines += [
            "\t".join(
                [
                    name,
                    str(status.get("status")),
                    "" if status.get("objective") is None else f"{status['objective']:.6g}",
                    " ".join(status.get("overrides", [])),
                    (status.get("error") or "").replace("\n", " "),
                ]
            )
            for name, status in rows
        ]
        (sweep_dir / SUMMARY).write_text("\n".join(lines) + "\n")
        elsewhere = [name for name, status in rows if status.get("status") == ELSEWHERE]
        failed = [name for name, status in rows if status.get("status") not in ("completed", ELSEWHERE)]
        counts = f"{len(rows) - len(failed) - len(elsewhere)} of {len(rows)} jobs completed"
        if elsewhere:
            counts += f", {len(elsewhere)} still running in other processes"
        log.info("sweep %s: %s\n%s", sweep_dir, counts, _table(lines))
        if failed:
            log.error("jobs %s did not complete (see %s)", ", ".join(failed), sweep_dir / SUMMARY)
            raise SystemExit(1)


def _job_order(path: Path) -> tuple[int, str]:
    return (int(path.name), "") if path.name.isdigit() else (1 << 30, path.name)


def _table(lines: list[str]) -> str:
    cells = [line.split("\t") for line in lines]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells
    )
