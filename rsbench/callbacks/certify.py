"""``CertifyCallback``: CERTIFY on the test split at the end of ``trainer.test``, with files and logger output.

It writes the output contract into ``output_dir``: ``certify.tsv`` (one row per image, appended and flushed as it
is computed, resumed after an interruption), ``metrics.json`` (ACR, certified accuracy on the radius grid, the exact
protocol) and ``certified_accuracy.png``. It logs ``certify/acr`` and ``certify/acc@<r>`` through Lightning (so
every logger and a sweeper see them) and, when a W&B logger is present, the curve as a line plot and a table,
and the records as an artifact.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.loggers import WandbLogger
from tqdm.auto import tqdm

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.bounds import check_alpha
from rsbench.certify.plot import accuracy_curve, plot_certified_accuracy
from rsbench.certify.records import CertificationLog, CertificationRow
from rsbench.certify.seeding import derive_seed
from rsbench.certify.smooth import Smooth
from rsbench.certify.subset import certification_indices, indices_digest
from rsbench.certify.summary import format_summary, summarize, write_metrics
from rsbench.methods.base import SmoothingModule
from rsbench.noise import check_sigma

log = logging.getLogger(__name__)


class CertifyCallback(pl.Callback):
    """Certify the test split with Cohen et al.'s CERTIFY when the test epoch ends.

    Args:
        n0: selection samples per image.
        n: estimation samples per image.
        alpha: failure probability of each certificate.
        batch_size: noisy samples per forward pass.
        start: the first test index certified.
        skip: certify every ``skip``-th test image.
        max_images: certify at most this many images (``None``: all selected).
        seed: the certification seed; image i's noise streams derive from (seed, i), so results are reproducible
            and an interrupted run resumes with the numbers an uninterrupted one would give.
        sigma: the certification noise level; ``None`` uses the model's training sigma.
        radius_step: the step of the radius grid in ``metrics.json``.
        output_dir: where the files go; the trainer's ``default_root_dir`` when ``None``.
        enabled: set false to skip certification.
    """

    def __init__(
        self,
        n0: int = 100,
        n: int = 100_000,
        alpha: float = 0.001,
        batch_size: int = 1000,
        start: int = 0,
        skip: int = 1,
        max_images: int | None = None,
        seed: int = 0,
        sigma: float | None = None,
        radius_step: float = 0.25,
        output_dir: str | None = None,
        enabled: bool = True,
    ) -> None:
        for key, value in {"n0": n0, "n": n, "batch_size": batch_size}.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"certify.{key} must be an integer >= 1, got {value!r}")
        check_alpha(alpha)
        if sigma is not None:
            check_sigma(sigma, "certify.sigma")
        if radius_step <= 0:
            raise ValueError(f"certify.radius_step must be > 0, got {radius_step}")
        if seed < 0:
            raise ValueError(f"certify.seed must be >= 0, got {seed}")
        certification_indices(1, start, skip, max_images)  # validates the subset arguments
        self.n0, self.n, self.alpha, self.batch_size = n0, n, alpha, batch_size
        self.start, self.skip, self.max_images = start, skip, max_images
        self.seed, self.sigma, self.radius_step = seed, sigma, radius_step
        self.output_dir = output_dir
        self.enabled = enabled
        self.summary: dict[str, Any] | None = None

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Certify the chosen test images, write the files and log the results."""
        if not self.enabled or not trainer.is_global_zero:
            return
        if not isinstance(pl_module, SmoothingModule):
            raise TypeError(f"CertifyCallback needs a rsbench SmoothingModule, got {type(pl_module).__name__}")
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        dataset = datamodule.test_dataset
        sigma = self.sigma if self.sigma is not None else pl_module.sigma
        if sigma != pl_module.sigma:
            log.warning("certifying at sigma=%s a model trained at sigma=%s", sigma, pl_module.sigma)
        output_dir = Path(self.output_dir or trainer.default_root_dir)
        indices = certification_indices(len(dataset), self.start, self.skip, self.max_images)
        net = pl_module.net
        smooth = Smooth(net, datamodule.num_classes, sigma)
        meta = {
            "method": pl_module.method_name,
            "dataset": datamodule.name,
            "arch": net.arch,
            "seed": self.seed,
            "model_fingerprint": weights_fingerprint(net),
        }
        protocol = {
            **meta,
            "n0": self.n0,
            "n": self.n,
            "alpha": self.alpha,
            "sigma": sigma,
            "start": self.start,
            "skip": self.skip,
            "max_images": self.max_images,
            "test_size": len(dataset),
        }
        with CertificationLog(output_dir / "certify.tsv", protocol, extendable={"max_images"}) as records:
            done = {row.idx: row for row in records.open()}
            rows = self._certify(smooth, dataset, indices, done, records)
        summary = summarize(
            rows,
            sigma=sigma,
            n0=self.n0,
            n=self.n,
            alpha=self.alpha,
            radius_step=self.radius_step,
            extra={
                **meta,
                "subset": {
                    "start": self.start,
                    "skip": self.skip,
                    "max_images": self.max_images,
                    "test_size": len(dataset),
                    "digest": indices_digest(indices),
                    "indices": indices,
                },
            },
        )
        write_metrics(summary, output_dir / "metrics.json")
        cap = summary["radius_cap"]
        radii, correct = [r.radius for r in rows], [r.correct for r in rows]
        title = f"{summary['method']} on {summary['dataset']} ({summary['arch']}), sigma={sigma}"
        note = f"{len(rows)} images, n0={self.n0}, n={self.n}, alpha={self.alpha}"
        plot_certified_accuracy(radii, correct, cap, output_dir / "certified_accuracy.png", title, note)
        self.summary = summary
        log.info("certification results (%s):\n%s", output_dir, format_summary(summary))
        self._log(trainer, pl_module, summary, output_dir, radii, correct)

    def _certify(
        self,
        smooth: Smooth,
        dataset: Any,
        indices: list[int],
        done: dict[int, CertificationRow],
        records: CertificationLog,
    ) -> list[CertificationRow]:
        """Certify the images not in ``done``, appending each row as soon as it is computed."""
        extra = sorted(set(done).difference(indices))
        if extra:
            log.warning("certify.tsv holds %d rows outside the requested subset; they are not summarised", len(extra))
        todo = [i for i in indices if i not in done]
        if done:
            log.info(
                "resuming certification: %d of %d images already in certify.tsv", len(indices) - len(todo), len(indices)
            )
        progress = tqdm(
            total=len(indices), initial=len(indices) - len(todo), desc="certify", unit="img", mininterval=1.0
        )
        wanted = set(indices)
        correct_radius_sum = sum(r.radius for r in done.values() if r.correct and r.idx in wanted)
        for count, idx in enumerate(todo, start=len(indices) - len(todo) + 1):
            x, label = dataset[idx][:2]
            started = time.perf_counter()
            cert = smooth.certify_with_details(
                x, self.n0, self.n, self.alpha, self.batch_size, seed=derive_seed(self.seed, idx)
            )
            row = CertificationRow(
                idx=idx,
                label=int(label),
                predict=cert.prediction,
                radius=cert.radius,
                correct=cert.prediction == int(label),
                time=round(time.perf_counter() - started, 4),
                count=cert.count,
                pA_lower=cert.p_a_lower,
                sigma=cert.sigma,
            )
            records.append(row)
            done[idx] = row
            correct_radius_sum += row.radius if row.correct else 0.0
            progress.update(1)
            progress.set_postfix(acr=f"{correct_radius_sum / count:.3f}", refresh=False)
        progress.close()
        return [done[i] for i in indices]

    def _log(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        summary: dict[str, Any],
        output_dir: Path,
        radii: list[float],
        correct: list[bool],
    ) -> None:
        """Log ACR and certified accuracy through Lightning, and the curve, table and records to W&B."""
        pl_module.log("certify/acr", summary["acr"], rank_zero_only=True)
        pl_module.log("certify/abstain_rate", summary["abstain_rate"], rank_zero_only=True)
        for radius, accuracy in summary["certified_accuracy"].items():
            pl_module.log(f"certify/acc@{radius}", accuracy, rank_zero_only=True)
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                _log_to_wandb(logger, summary, output_dir, radii, correct)


def _log_to_wandb(
    logger: WandbLogger, summary: dict[str, Any], output_dir: Path, radii: list[float], correct: list[bool]
) -> None:
    import wandb

    grid, accuracy = accuracy_curve(radii, correct, summary["radius_cap"])
    table = wandb.Table(
        columns=["radius", "certified_accuracy"],
        data=[[float(r), float(a)] for r, a in zip(grid, accuracy, strict=True)],
    )
    title = f"certified accuracy ({summary['method']}, {summary['dataset']}, sigma={summary['sigma']})"
    run = logger.experiment
    run.log(
        {
            "certify/curve": wandb.plot.line(table, "radius", "certified_accuracy", title=title),
            "certify/curve_table": table,
            "certify/plot": wandb.Image(str(output_dir / "certified_accuracy.png")),
        }
    )
    run.summary["certify/acr"] = summary["acr"]
    artifact = wandb.Artifact(f"certify-{run.id}", type="certification", metadata={"acr": summary["acr"]})
    artifact.add_file(str(output_dir / "certify.tsv"))
    artifact.add_file(str(output_dir / "metrics.json"))
    run.log_artifact(artifact)
