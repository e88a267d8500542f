"""Loggers that continue a resumed run: the CSV log is appended to, and W&B resumes the run with the same id."""

from __future__ import annotations

import csv
import secrets
import string
from pathlib import Path

from lightning_fabric.loggers.csv_logs import _ExperimentWriter as FabricExperimentWriter
from pytorch_lightning.loggers import CSVLogger as LightningCSVLogger
from pytorch_lightning.loggers.csv_logs import ExperimentWriter
from pytorch_lightning.loggers.logger import rank_zero_experiment

from rsbench.files import atomic_path

WANDB_ID_FILE = Path(".rsbench") / "wandb_id"


class CSVLogger(LightningCSVLogger):
    """Lightning's CSV logger (``logs/metrics.csv``, ``hparams.yaml``) that continues an existing ``metrics.csv``.

    Lightning's deletes it, so a resumed run would lose the rows of its earlier epochs.
    """

    @property
    @rank_zero_experiment
    def experiment(self) -> FabricExperimentWriter:
        """The writer, created on first use."""
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _AppendingWriter(log_dir=self.log_dir)
        return self._experiment

    def keep_epochs_through(self, epoch: int) -> None:
        """Drop the rows of ``metrics.csv`` logged after epoch ``epoch`` (a stopped run's partial epoch).

        A run stopped mid-epoch resumes after its last complete epoch and logs the cut epoch's steps again; without
        this, ``metrics.csv`` would hold them twice.
        """
        path = Path(self.log_dir) / ExperimentWriter.NAME_METRICS_FILE
        if not path.is_file():
            return
        with path.open(newline="") as file:
            reader = csv.DictReader(file)
            columns, rows = reader.fieldnames or [], list(reader)
        kept = [row for row in rows if not row.get("epoch") or float(row["epoch"]) <= epoch]
        if len(kept) == len(rows):
            return
        with atomic_path(path) as temporary, temporary.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=columns)
            writer.writeheader()
            writer.writerows(kept)


class _AppendingWriter(ExperimentWriter):
    def _check_log_dir_exists(self) -> None:
        """Keep an existing ``metrics.csv`` and its columns (Lightning's writer deletes it here)."""
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as file:
                self.metrics_keys = next(csv.reader(file), [])


def wandb_run_id(output_dir: Path) -> str:
    """The W&B run id of the run in ``output_dir``, made once and kept in ``.rsbench/wandb_id``.

    A resumed run (``resume="allow"``) then logs into the same W&B run instead of starting a second one.
    """
    path = Path(output_dir) / WANDB_ID_FILE
    if path.is_file() and (stored := path.read_text().strip()):
        return stored
    run_id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(8))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_id + "\n")
    return run_id
