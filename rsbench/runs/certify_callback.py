"""``CertifyCallback``: CERTIFY on the test split at the end of ``trainer.test``, with files and logger output.

A thin adapter around :class:`rsbench.certify.pipeline.certification.Certification` (which writes ``certify.tsv``,
``metrics.json`` and ``certified_accuracy.png`` into ``output_dir``; see there for resuming, sharding over DDP
processes and data-dependent sigma modes): it hands over the trained network and the test split, this process's
rank, and a barrier over the trainer's processes. It then logs ``certify/acr`` and ``certify/acc@<r>`` through
Lightning (so every logger and a sweeper see them) and, when a W&B logger is present, the curve as a line plot and
a table, and the records as an artifact. The run's training time (its
:class:`~rsbench.runs.training_clock.TrainingClock`, which the run adds when it trains) goes to
``metrics.json["cost"]``, the epoch the certified weights are from to ``metrics.json["certified_epoch"]``, and the
method's first epoch (its card's; 0 for most methods) to ``metrics.json["method_epoch"]``. The logged ``certify/*``
metrics (and the sweep objective) always come from sound certificates; per-input-sigma ones are logged as
``certify_unsound/*``. With ``attack=smoothadv`` the certified images are then attacked (:mod:`rsbench.attack`, on
process 0) and ``attack/empirical@<r>`` is logged.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Timer
from pytorch_lightning.loggers import WandbLogger

from rsbench.attack import AttackSettings
from rsbench.attack.stage import attack_after_certification
from rsbench.certify.pipeline.certification import FIXED_STEM, Certification, Shard, Subject
from rsbench.certify.pipeline.plot import accuracy_curve
from rsbench.certify.pipeline.records import STEM, CertificationRow
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.files import record_path
from rsbench.methods.base import SmoothingModule
from rsbench.methods.card import find_card
from rsbench.runs.training_clock import TrainingClock
from rsbench.stop import raise_if_stop_requested, stop_requested

log = logging.getLogger(__name__)


class CertifyCallback(pl.Callback):
    """Certify the test split with Cohen et al.'s CERTIFY when the test epoch ends.

    Args:
        settings: the certification settings (``certify.*``, :meth:`CertifySettings.from_config`).
        output_dir: where the files go; the trainer's ``default_root_dir`` when ``None``.
        run_protocol: the training protocol the run was composed with (``rsbench`` or ``authors``, see
            ``conf/protocol``), recorded as ``metrics.json["protocol"]``; ``None`` records nothing.
        attack: attack the certified images afterwards (``attack=smoothadv``); ``None``: no attack.
        method_epoch: the first epoch whose checkpoint is the method (its card's, :mod:`rsbench.methods.card`),
            recorded as ``metrics.json["method_epoch"]``; certifying weights from before it is warned about.
    """

    def __init__(
        self,
        settings: CertifySettings,
        output_dir: str | Path | None = None,
        run_protocol: str | None = None,
        attack: AttackSettings | None = None,
        method_epoch: int = 0,
    ) -> None:
        self.settings = settings
        self.attack = attack
        self.method_epoch = method_epoch
        self.output_dir = output_dir
        self.run_protocol = run_protocol
        self.summary: dict[str, Any] | None = None

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Certify this rank's share of the chosen test images; rank 0 merges, summarises and logs."""
        if not isinstance(pl_module, SmoothingModule):
            raise TypeError(f"CertifyCallback needs a rsbench SmoothingModule, got {type(pl_module).__name__}")
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        net = pl_module.net
        output_dir = Path(self.output_dir or trainer.default_root_dir)
        subject = Subject(
            net,
            datamodule.num_classes,
            pl_module.sigma,
            {"method": pl_module.method_name, "dataset": datamodule.name, "arch": net.arch},
            hparams=recorded_hparams(pl_module, output_dir),
            certify_defaults=pl_module.certify_defaults,
            noise=pl_module.noise.name,
        )
        notes: dict[str, Any] = {"protocol": self.run_protocol} if self.run_protocol is not None else {}
        notes.update(self._epochs(pl_module))
        certification = Certification(self.settings, output_dir, notes, train_seconds=training_seconds(trainer))
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
        if self.attack is not None:
            attack = attack_after_certification(
                subject,
                datamodule.test_dataset,
                certification.settings,
                self.attack,
                outcome.summary,
                outcome.rows[STEM],
                certification.output_dir,
                should_stop=lambda: stop_requested() is not None,
            )
            raise_if_stop_requested()
            for radius, accuracy in (attack or {}).get("empirical_accuracy", {}).items():
                pl_module.log(f"attack/empirical@{radius}", accuracy, rank_zero_only=True)
        self._log(trainer, pl_module, certification.output_dir, outcome.rows)

    def _epochs(self, pl_module: SmoothingModule) -> dict[str, int | None]:
        """``certified_epoch`` (the weights' epoch, ``None`` if unknown) and ``method_epoch``; warns when before it."""
        epoch = pl_module.weights_epoch
        if epoch is not None and epoch < self.method_epoch:
            log.warning(
                "certifying the weights of epoch %d, before epoch %d from which they are method=%s (its card)",
                epoch,
                self.method_epoch,
                pl_module.method_name,
            )
        return {"certified_epoch": epoch, "method_epoch": self.method_epoch}

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


def training_seconds(trainer: pl.Trainer) -> float | None:
    """Seconds the run trained for, summed over the epochs it trained, resumes included (its ``TrainingClock``).

    ``None`` when the run has no clock or it never trained (``train=false``). A plain Lightning ``Timer`` (a user's
    callback) is read as it stands, which a checkpoint loaded for testing may have changed.
    """
    timer = next((c for c in getattr(trainer, "callbacks", []) if isinstance(c, Timer)), None)
    if timer is None:
        return None
    seconds = timer.seconds() if isinstance(timer, TrainingClock) else timer.time_elapsed("train")
    return seconds if seconds > 0 else None


def recorded_hparams(pl_module: SmoothingModule, output_dir: Path) -> dict[str, Any]:
    """The method's hyperparameters as ``metrics.json["hparams"]`` records them.

    The values of its card's checkpoint and path arguments (``teacher_ckpt``, ``teacher_cache_dir``) are named as
    records name files (:func:`rsbench.files.record_path`: relative to the run folder, else to the working
    directory, else absolute); every other value as constructed.
    """
    card = find_card(pl_module.method_name)
    paths = {*card.checkpoint_arguments, *card.path_arguments} if card is not None else set()
    return {
        key: record_path(value, output_dir) if key in paths and isinstance(value, str) and value else value
        for key, value in pl_module.method_hparams().items()
    }


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
