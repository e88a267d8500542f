"""``--wandb``: the report's tables as W&B tables and its figures as images, in a run of job type ``report``.

The run is offline unless ``WANDB_MODE`` says otherwise (``wandb sync`` uploads it); it sits in the same project as
the training runs, whose names, groups (one per setting, its seeds together) and tags say what they vary.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rsbench.report.render import Section


def log_report(sections: Sequence[Section], files: Sequence[Path], project: str, inputs: Sequence[str]) -> str:
    """Log each section as ``report/<name>`` (a ``wandb.Table``), each PNG as an image, all files as an artifact.

    Returns:
        The W&B run's directory.
    """
    import wandb

    run = wandb.init(
        project=project,
        job_type="report",
        name="report",
        mode=os.environ.get("WANDB_MODE", "offline"),  # type: ignore[arg-type]
        config={"inputs": list(inputs)},
        dir=str(Path(files[0]).parent) if files else None,
    )
    try:
        run.log({f"report/{s.name}": wandb.Table(dataframe=s.table.astype(str)) for s in sections})
        run.log({f"report/{p.stem}": wandb.Image(str(p)) for p in files if p.suffix == ".png"})
        artifact = wandb.Artifact(f"report-{run.id}", type="report")
        for path in files:
            artifact.add_file(str(path))
        run.log_artifact(artifact)
        return str(run.dir)
    finally:
        run.finish()
