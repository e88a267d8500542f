"""``CertifyCallback``: CERTIFY on the test split at the end of ``trainer.test``, with files and logger output.

A thin adapter around :class:`rsbench.certify.pipeline.Certification` (which writes ``certify.tsv``,
``metrics.json`` and ``certified_accuracy.png`` into ``output_dir``; see there for resuming, sharding over DDP
processes and data-dependent sigma modes): it hands over the trained network and the test split, this process's
rank, and a barrier over the trainer's processes. It then logs ``certify/acr`` and ``certify/acc@<r>`` through
Lightning (so every logger and a sweeper see them) and, when a W&B logger is present, the curve as a line plot and
a table, and the records as an artifact. The logged ``certify/*`` metrics (and the sweep objective) always come
from sound certificates; per-input-sigma ones are logged as ``certify_unsound/*``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import WandbLogger

from rsbench.certify.pipeline import FIXED_STEM, Certification, Shard, Subject
from rsbench.certify.plot import accuracy_curve
from rsbench.certify.records import STEM, CertificationRow
from rsbench.certify.settings import CertifySettings
from rsbench.methods.base import SmoothingModule
from rsbench.stop import raise_if_stop_requested, stop_requested


class CertifyCallback(pl.Callback):
    """Certify the test split with Cohen et al.'s CERTIFY when the test epoch ends.

    Args:
        output_dir: where the files go; the trainer's ``default_root_dir`` when ``None``.
        enabled: set false to skip certification.
        run_protocol: the training protocol the run was composed with (``rsbench`` or ``authors``, see
            ``conf/protocol``), recorded as ``metrics.json["protocol"]``; ``None`` records nothing.
        settings: the flat ``certify.*`` keys (``n0``, ``n``, ``alpha``, ``batch_size``, ``start``, ``skip``,
            ``max_images``, ``seed``, ``sigma``, ``radius_step``, ``noise_grid``, ``mode``, ``design``, ``radius_cap``,
            ``radius_target``, ``first_look``, ``growth``, ``precision``, ``channels_last``, ``compile``,
            ``images_per_batch``, ``sigma_mode``, ``sigma_iters``, ``sigma_lr``, ``sigma_samples``, ``sigma_init``,
            ``sigma_objective``), grouped and validated by
            :meth:`rsbench.certify.settings.CertifySettings.from_keys`, whose groups document each one.
    """

    def __init__(
        self, output_dir: str | None = None, enabled: bool = True, run_protocol: str | None = None, **settings: Any
    ) -> None:
        self.settings = CertifySettings.from_keys(**settings)
        self.output_dir = output_dir
        self.enabled = enabled
        self.run_protocol = run_protocol
        self.summary: dict[str, Any] | None = None

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Certify this rank's share of the chosen test images; rank 0 merges, summarises and logs."""
        if not self.enabled:
            return
        if not isinstance(pl_module, SmoothingModule):
            raise TypeError(f"CertifyCallback needs a rsbench SmoothingModule, got {type(pl_module).__name__}")
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        net = pl_module.net
        subject = Subject(
            net,
            datamodule.num_classes,
            pl_module.sigma,
            {"method": pl_module.method_name, "dataset": datamodule.name, "arch": net.arch},
            hparams=pl_module.method_hparams(),
        )
        notes = {"protocol": self.run_protocol} if self.run_protocol is not None else {}
        certification = Certification(self.settings, Path(self.output_dir or trainer.default_root_dir), notes)
        outcome = certification.run(
            subject,
            datamodule.test_dataset,
            shard=Shard(trainer.global_rank, trainer.world_size),
            barrier=lambda: _barrier(trainer),
            should_stop=lambda: stop_requested() is not None,
        )
        raise_if_stop_requested()  # a stop signal ended certification after a whole row: end the run as stopped
        if outcome.summary is None:
            return
        self.summary = outcome.summary
        self._log(trainer, pl_module, certification.output_dir, outcome.rows)

    def _log(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        output_dir: Path,
        rows: dict[str, list[CertificationRow]],
    ) -> None:
        """Log sound certificates as ``certify/*`` and per-input-sigma ones as ``certify_unsound/*``, everywhere."""
        assert self.summary is not None
        logged = [("certify", self.summary, rows[STEM])]
        if self.settings.sigma_mode != "fixed":
            logged = [
                ("certify", self.summary["fixed_sigma"], rows[FIXED_STEM]),
                ("certify_unsound", self.summary, rows[STEM]),
            ]
        for prefix, summary, records in logged:
            pl_module.log(f"{prefix}/acr", summary["acr"], rank_zero_only=True)
            pl_module.log(f"{prefix}/abstain_rate", summary["abstain_rate"], rank_zero_only=True)
            for radius, accuracy in summary["certified_accuracy"].items():
                pl_module.log(f"{prefix}/acc@{radius}", accuracy, rank_zero_only=True)
            for logger in trainer.loggers:
                if isinstance(logger, WandbLogger):
                    _log_to_wandb(logger, prefix, summary, [r.radius for r in records], [r.correct for r in records])
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                _log_records_to_wandb(logger, self.summary, output_dir)


def _barrier(trainer: pl.Trainer) -> None:
    if trainer.world_size > 1:
        trainer.strategy.barrier("certify")


def _log_to_wandb(
    logger: WandbLogger, prefix: str, summary: dict[str, Any], radii: list[float], correct: list[bool]
) -> None:
    """The certified-accuracy curve as a W&B line plot and table under ``prefix`` (labelled when not sound)."""
    import wandb

    grid, accuracy = accuracy_curve(radii, correct, summary["radius_cap"])
    table = wandb.Table(
        columns=["radius", "certified_accuracy"],
        data=[[float(r), float(a)] for r, a in zip(grid, accuracy, strict=True)],
    )
    label = "" if summary.get("sound", True) else f" NOT SOUND ({summary.get('sigma_mode')} sigma)"
    title = f"certified accuracy{label} ({summary.get('method')}, {summary.get('dataset')}, sigma={summary['sigma']})"
    run = logger.experiment
    run.log(
        {
            f"{prefix}/curve": wandb.plot.line(table, "radius", "certified_accuracy", title=title),
            f"{prefix}/curve_table": table,
        }
    )
    run.summary[f"{prefix}/acr"] = summary["acr"]


def _log_records_to_wandb(logger: WandbLogger, summary: dict[str, Any], output_dir: Path) -> None:
    """The plot and every record file of the run (with metrics.json) as a W&B image and artifact."""
    import wandb

    run = logger.experiment
    run.log({"certify/plot": wandb.Image(str(output_dir / "certified_accuracy.png"))})
    artifact = wandb.Artifact(
        f"certify-{run.id}", type="certification", metadata={"acr": summary["acr"], "sound": summary["sound"]}
    )
    for path in sorted(output_dir.glob("certify*.tsv")):
        artifact.add_file(str(path))
    artifact.add_file(str(output_dir / "metrics.json"))
    run.log_artifact(artifact)
