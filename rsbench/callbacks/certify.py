"""``CertifyCallback``: CERTIFY on the test split at the end of ``trainer.test``, with files and logger output.

It writes the output contract into ``output_dir``: ``certify.tsv`` (one row per image, appended and flushed as it
is computed, resumed after an interruption), ``metrics.json`` (ACR, certified accuracy on the radius grid, the exact
protocol) and ``certified_accuracy.png``. It logs ``certify/acr`` and ``certify/acc@<r>`` through Lightning (so
every logger and a sweeper see them) and, when a W&B logger is present, the curve as a line plot and a table,
and the records as an artifact.

Under a multi-process strategy (DDP), rank r certifies every world_size-th image of the subset (a static share, so
a resumed run never computes an image twice), appends to its own shard file, and rank 0 merges the shards and
writes the summary: the rows are the ones a single process would produce, because each image's noise streams are
seeded by (seed, image index) alone.

With ``sigma_mode`` ``data_dependent`` or ``memory`` (data-dependent smoothing), ``certify.tsv`` and
``metrics.json`` hold certificates at a per-input sigma, labelled ``sound = false`` everywhere, and the sound
fixed-sigma certificates of the same images go to ``certify_fixed_sigma.tsv`` and ``metrics.json["fixed_sigma"]``.
The logged ``certify/*`` metrics (and the sweep objective) always come from sound certificates; the others are
logged as ``certify_unsound/*``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import WandbLogger
from torch import nn
from tqdm.auto import tqdm

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.bounds import check_alpha, radius_cap
from rsbench.certify.data_dependent import (
    MEMORY_NOTE,
    UNSOUND_NOTE,
    SigmaSearch,
    certify_data_dependent,
    memory_replay,
)
from rsbench.certify.plot import Curve, accuracy_curve, plot_certified_accuracy
from rsbench.certify.records import (
    STEM,
    CertificationRow,
    RecordWriter,
    check_protocol,
    merge_records,
    read_records,
    shard_record,
    write_protocol,
    write_record,
)
from rsbench.certify.seeding import derive_seed
from rsbench.certify.sequential import LookSchedule, certify_sequential
from rsbench.certify.smooth import PRECISIONS, Certificate, Precision, Smooth
from rsbench.certify.subset import certification_indices, indices_digest
from rsbench.certify.summary import format_summary, summarize, write_metrics
from rsbench.methods.base import SmoothingModule
from rsbench.noise import check_sigma
from rsbench.stop import raise_if_stop_requested

log = logging.getLogger(__name__)

Mode = Literal["standard", "sequential"]
SigmaMode = Literal["fixed", "data_dependent", "memory"]
EXTENDABLE = {"max_images"}  # protocol keys a resumed run may change (certify more images later)
FIXED_STEM = "certify_fixed_sigma"  # the sound certificates beside data-dependent ones
PER_INPUT_STEM = "certify_data_dependent"  # memory mode: the per-input-sigma certificates before the replay
GroupCertifier = Callable[[Smooth, torch.Tensor, list[int]], Iterator[tuple[int, Certificate]]]


class CertifyCallback(pl.Callback):
    """Certify the test split with Cohen et al.'s CERTIFY when the test epoch ends.

    Args:
        n0: selection samples per image.
        n: estimation samples per image (the most per image in sequential mode).
        alpha: failure probability of each certificate.
        batch_size: noisy samples per forward pass.
        start: the first test index certified.
        skip: certify every ``skip``-th test image.
        max_images: certify at most this many images (``None``: all selected).
        seed: the certification seed; image i's noise streams derive from (seed, i), so results are reproducible
            and an interrupted run resumes with the numbers an uninterrupted one would give (same batch_size).
        sigma: the certification noise level; ``None`` uses the model's training sigma.
        radius_step: the step of the radius grid in ``metrics.json``.
        output_dir: where the files go; the trainer's ``default_root_dir`` when ``None``.
        enabled: set false to skip certification.
        mode: ``standard`` (Cohen et al.'s fixed-n CERTIFY) or ``sequential`` (stops sampling an image once its
            certificate up to ``radius_cap`` is decided, at the same overall alpha; see
            :mod:`rsbench.certify.sequential`).
        radius_cap: sequential mode: the largest radius reported; ``None``: 3 sigma (Phi(3) = 0.99865, reached
            after about 7,000 samples when every vote is right).
        first_look: sequential mode: estimation samples before the first look.
        growth: sequential mode: each look's cumulative sample count is the previous one times ``growth``.
        precision: ``fp32``, or ``bf16``/``fp16`` autocast of the network (noise stays fp32; the certificate holds
            for the network as evaluated).
        channels_last: run the network in channels-last memory format. The noise keeps its distribution, but a
            seed places its samples differently, and the convolutions may round differently: rows are reproducible
            only under the same setting.
        compile: ``torch.compile`` the network before certifying (a one-off compile cost; fused kernels may round
            differently from eager mode, so the certified classifier is the compiled one).
        images_per_batch: images certified together in standard mode, their samples packed into full forward
            passes (each image keeps its own noise streams and its own certificate); ``None`` packs
            ``max(1, batch_size // min(n0, n))`` so that the n0 selection samples fill the batch too.
        sigma_mode: ``fixed`` (sound, the default), ``data_dependent`` (optimise sigma per input, then CERTIFY at
            it, as the DDRS paper; not sound, reported beside the fixed-sigma certificate) or ``memory`` (the
            data-dependent certificates replayed through DDRS's memory in test-index order; order-dependent).
        sigma_iters: data-dependent modes: K, ascent steps of the per-input sigma search.
        sigma_lr: data-dependent modes: the search's step size alpha.
        sigma_samples: data-dependent modes: n, noise draws per step; ``None``: the DDRS paper's for the certified
            model's method (8 for MACER models, 1 otherwise).
        sigma_init: data-dependent modes: sigma_0; ``None`` starts from the certification sigma.
        sigma_objective: data-dependent modes: ``radius`` or ``relu_radius``; ``None``: the authors' for the
            model's method (``relu_radius`` for SmoothAdv models).
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
        mode: Mode = "standard",
        radius_cap: float | None = None,
        first_look: int = 1000,
        growth: float = 2.0,
        precision: Precision = "fp32",
        channels_last: bool = False,
        compile: bool = False,
        images_per_batch: int | None = None,
        sigma_mode: SigmaMode = "fixed",
        sigma_iters: int = 100,
        sigma_lr: float = 1e-4,
        sigma_samples: int | None = None,
        sigma_init: float | None = None,
        sigma_objective: str | None = None,
    ) -> None:
        for key, value in {"n0": n0, "n": n, "batch_size": batch_size, "first_look": first_look}.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"certify.{key} must be an integer >= 1, got {value!r}")
        check_alpha(alpha)
        if sigma is not None:
            check_sigma(sigma, "certify.sigma")
        if radius_step <= 0:
            raise ValueError(f"certify.radius_step must be > 0, got {radius_step}")
        if seed < 0:
            raise ValueError(f"certify.seed must be >= 0, got {seed}")
        if mode not in ("standard", "sequential"):
            raise ValueError(f"certify.mode must be 'standard' or 'sequential', got {mode!r}")
        if radius_cap is not None and radius_cap <= 0:
            raise ValueError(f"certify.radius_cap must be > 0 or null (3 sigma), got {radius_cap!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"certify.precision must be one of {list(PRECISIONS)}, got {precision!r}")
        if images_per_batch is not None and images_per_batch < 1:
            raise ValueError(f"certify.images_per_batch must be >= 1 or null (auto), got {images_per_batch}")
        if sigma_mode not in ("fixed", "data_dependent", "memory"):
            raise ValueError(
                f"certify.sigma_mode must be one of ['fixed', 'data_dependent', 'memory'], got {sigma_mode!r}"
            )
        if sigma_mode != "fixed" and mode != "standard":
            raise ValueError(f"certify.sigma_mode={sigma_mode} runs standard CERTIFY at each sigma: set mode=standard")
        self.sigma_mode = sigma_mode
        self.search_settings = (
            SigmaSearch(sigma_iters, sigma_lr, sigma_samples, sigma_init, objective=sigma_objective)
            if sigma_mode != "fixed"
            else None
        )
        self.search: SigmaSearch | None = None  # the settings with the certified model's paper defaults filled in
        certification_indices(1, start, skip, max_images)  # validates the subset arguments
        self.schedule = LookSchedule(min(first_look, n), growth, n) if mode == "sequential" else None
        self.n0, self.n, self.alpha, self.batch_size = n0, n, alpha, batch_size
        self.start, self.skip, self.max_images = start, skip, max_images
        self.seed, self.sigma, self.radius_step = seed, sigma, radius_step
        self.output_dir = output_dir
        self.enabled = enabled
        self.mode, self.radius_cap = mode, radius_cap
        self.precision, self.channels_last, self.compile = precision, channels_last, compile
        self.images_per_batch = images_per_batch or max(1, batch_size // min(n0, n))
        self.summary: dict[str, Any] | None = None

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Certify this rank's share of the chosen test images; rank 0 merges, summarises and logs."""
        if not self.enabled:
            return
        if not isinstance(pl_module, SmoothingModule):
            raise TypeError(f"CertifyCallback needs a rsbench SmoothingModule, got {type(pl_module).__name__}")
        if self.search_settings is not None:
            self.search = self.search_settings.for_method(pl_module.method_name)
        datamodule = trainer.datamodule  # type: ignore[attr-defined]
        dataset = datamodule.test_dataset
        sigma = self.sigma if self.sigma is not None else pl_module.sigma
        if sigma != pl_module.sigma:
            log.warning("certifying at sigma=%s a model trained at sigma=%s", sigma, pl_module.sigma)
        output_dir = Path(self.output_dir or trainer.default_root_dir)
        indices = certification_indices(len(dataset), self.start, self.skip, self.max_images)
        net = pl_module.net
        meta = {
            "method": pl_module.method_name,
            "dataset": datamodule.name,
            "arch": net.arch,
            "seed": self.seed,
            "model_fingerprint": weights_fingerprint(net),
        }
        protocol = {**meta, **self._protocol(sigma, len(dataset))}
        rank, world_size = trainer.global_rank, trainer.world_size
        if rank == 0:
            check_protocol(output_dir, protocol, EXTENDABLE)
            write_protocol(output_dir, protocol)
        _barrier(trainer)
        share = indices[rank::world_size]
        with self._prepared(net) as classifier:
            smooth = Smooth(
                classifier, datamodule.num_classes, sigma, precision=self.precision, channels_last=self.channels_last
            )
            for stem, certify_group, sound in self._records():
                record = output_dir / shard_record(rank, world_size, stem)
                self._certify_share(smooth, dataset, share, record, stem, certify_group, sound)
        _barrier(trainer)
        if rank != 0:
            return
        rows = {stem: self._collect(output_dir, stem, indices) for stem, _, _ in self._records()}
        if self.sigma_mode == "memory":
            images = torch.stack([dataset[i][0] for i in indices])
            replayed, report = memory_replay(rows[PER_INPUT_STEM], images)
            write_record(output_dir / f"{STEM}.tsv", replayed)
            rows[STEM] = replayed
            log.info("memory replay: %d certificates shrunk, %d switched class", report.shrunk, report.switched)
        extra = {"subset": self._subset(indices, len(dataset)), **meta, "hparams": pl_module.method_hparams()}
        self.summary = self._summarize(rows[STEM], sigma, extra)
        curves = [Curve(f"{self.sigma_mode} sigma", [r.radius for r in rows[STEM]], [r.correct for r in rows[STEM]])]
        if self.sigma_mode != "fixed":
            fixed = self._summarize(rows[FIXED_STEM], sigma, {})
            self.summary.update(
                soundness=MEMORY_NOTE if self.sigma_mode == "memory" else UNSOUND_NOTE,
                fixed_sigma=fixed,
                mean_sigma=sum(r.sigma for r in rows[STEM]) / max(1, len(rows[STEM])),
            )
            if self.sigma_mode == "memory":
                self.summary["memory"] = {"order": "test index", **vars(report)}
            curves = [
                Curve(
                    f"fixed sigma={sigma} (sound)",
                    [r.radius for r in rows[FIXED_STEM]],
                    [r.correct for r in rows[FIXED_STEM]],
                ),
                Curve(f"{self.sigma_mode} sigma (NOT sound)", curves[0].radii, curves[0].correct, dashed=True),
            ]
            log.warning("%s certificates are not sound guarantees: %s", self.sigma_mode, self.summary["soundness"])
        write_metrics(self.summary, output_dir / "metrics.json")
        title = f"{meta['method']} on {meta['dataset']} ({meta['arch']}), sigma={sigma}"
        note = f"{len(indices)} images, n0={self.n0}, n={self.n}, alpha={self.alpha}, {self.mode} CERTIFY"
        plot_certified_accuracy(curves, self.summary["radius_cap"], output_dir / "certified_accuracy.png", title, note)
        log.info("certification results (%s):\n%s", output_dir, format_summary(self.summary))
        self._log(trainer, pl_module, output_dir, rows)

    def _records(self) -> list[tuple[str, GroupCertifier, bool]]:
        """The records this run writes: (file stem, how a group of images is certified, whether it is sound)."""
        if self.sigma_mode == "fixed":
            return [(STEM, self._certify_group, True)]
        per_input = STEM if self.sigma_mode == "data_dependent" else PER_INPUT_STEM
        return [(FIXED_STEM, self._certify_group, True), (per_input, self._certify_group_per_input_sigma, False)]

    def _collect(self, output_dir: Path, stem: str, indices: list[int]) -> list[CertificationRow]:
        """Merge a record's shards and return its rows for ``indices``, in that order."""
        rows_by_idx = {row.idx: row for row in merge_records(output_dir, stem)}
        extra = sorted(set(rows_by_idx).difference(indices))
        if extra:
            log.warning("%s.tsv holds %d rows outside the requested subset; they are not summarised", stem, len(extra))
        return [rows_by_idx[i] for i in indices]

    def _subset(self, indices: list[int], test_size: int) -> dict[str, Any]:
        return {
            "start": self.start,
            "skip": self.skip,
            "max_images": self.max_images,
            "test_size": test_size,
            "digest": indices_digest(indices),
            "indices": indices,
        }

    def _protocol(self, sigma: float, test_size: int) -> dict[str, Any]:
        """Everything the rows depend on besides the model: resuming under other values is refused."""
        protocol: dict[str, Any] = {
            "n0": self.n0,
            "n": self.n,
            "alpha": self.alpha,
            "sigma": sigma,
            "start": self.start,
            "skip": self.skip,
            "max_images": self.max_images,
            "test_size": test_size,
            "mode": self.mode,
            "precision": self.precision,
            "channels_last": self.channels_last,
            "compile": self.compile,
        }
        if self.schedule is not None:
            protocol.update(radius_cap=self._cap(sigma), looks=self.schedule.looks(), radius_step=self.radius_step)
        if self.search is not None:
            protocol.update(sigma_mode=self.sigma_mode, sigma_search=vars(self.search))
        return protocol

    def _cap(self, sigma: float) -> float:
        """The largest radius reported: the fixed-n cap, or in sequential mode ``radius_cap`` (3 sigma if unset)."""
        if self.schedule is None:
            return radius_cap(sigma, self.n, self.alpha)
        return self.radius_cap if self.radius_cap is not None else 3.0 * sigma

    @contextlib.contextmanager
    def _prepared(self, net: nn.Module) -> Iterator[nn.Module]:
        """The network as certified (channels-last and/or compiled when asked), restored afterwards."""
        if self.channels_last:
            net.to(memory_format=torch.channels_last)
        try:
            yield torch.compile(net) if self.compile else net  # type: ignore[misc]
        finally:
            if self.channels_last:
                net.to(memory_format=torch.contiguous_format)

    def _certify_share(
        self,
        smooth: Smooth,
        dataset: Any,
        share: list[int],
        record: Path,
        stem: str,
        certify_group: GroupCertifier,
        sound: bool,
    ) -> None:
        """Certify the images of ``share`` not yet in record ``stem``, appending each row to ``record`` when done.

        Images are taken ``images_per_batch`` at a time: their selection samples are drawn together (filling whole
        batches), then each image's estimation samples (several images together only when n < batch_size), and
        every row is written as soon as its image is certified.
        """
        done = set(read_records(record.parent, stem)).intersection(share) if record.parent.exists() else set()
        todo = [i for i in share if i not in done]
        if done:
            log.info("resuming certification: %d of %d images already certified", len(done), len(share))
        progress = tqdm(total=len(share), initial=len(done), desc=stem, unit="img", mininterval=1.0)
        with RecordWriter(record) as writer:
            for first in range(0, len(todo), self.images_per_batch):
                group = todo[first : first + self.images_per_batch]
                items = [dataset[i] for i in group]
                xs = torch.stack([item[0] for item in items])
                labels = [int(item[1]) for item in items]
                for position, cert in certify_group(smooth, xs, [derive_seed(self.seed, i) for i in group]):
                    writer.append(self._row(group[position], labels[position], cert, sound))
                    progress.update(1)
                    raise_if_stop_requested()  # a stop signal ends certification here, after a whole row
        progress.close()

    def _certify_group(self, smooth: Smooth, xs: torch.Tensor, seeds: list[int]) -> Iterator[tuple[int, Certificate]]:
        """Yield (position in the group, certificate) as each image of the group is certified."""
        if self.schedule is not None:
            for position, (x, seed) in enumerate(zip(xs, seeds, strict=True)):
                yield (
                    position,
                    certify_sequential(
                        smooth,
                        x,
                        self.n0,
                        self.alpha,
                        self.batch_size,
                        radius_cap=self._cap(smooth.sigma),
                        schedule=self.schedule,
                        radius_step=self.radius_step,
                        seed=seed,
                    ),
                )
            return
        start = time.perf_counter()
        selected = smooth.select(xs, self.n0, self.batch_size, seeds=seeds)
        selection_seconds = (time.perf_counter() - start) / len(xs)
        together = max(1, self.batch_size // self.n)
        for first in range(0, len(xs), together):
            part = slice(first, first + together)
            certificates = smooth.estimate(
                xs[part],
                selected[part],
                self.n0,
                self.n,
                self.alpha,
                self.batch_size,
                seeds=seeds[part],
                extra_seconds=selection_seconds,
            )
            yield from enumerate(certificates, start=first)

    def _certify_group_per_input_sigma(
        self, smooth: Smooth, xs: torch.Tensor, seeds: list[int]
    ) -> Iterator[tuple[int, Certificate]]:
        """Yield (position, certificate at the image's own optimised sigma) for each image of the group."""
        assert self.search is not None
        for position, (x, seed) in enumerate(zip(xs, seeds, strict=True)):
            (cert,) = certify_data_dependent(
                smooth, x.unsqueeze(0), self.n0, self.n, self.alpha, self.batch_size, self.search, seeds=[seed]
            )
            yield position, cert

    @staticmethod
    def _row(idx: int, label: int, cert: Certificate, sound: bool) -> CertificationRow:
        return CertificationRow(
            idx=idx,
            label=label,
            predict=cert.prediction,
            radius=cert.radius,
            correct=cert.prediction == label,
            time=round(cert.seconds, 4),
            count=cert.count,
            n=cert.n,
            pA_lower=cert.p_a_lower,
            sigma=cert.sigma,
            sound=sound,
        )

    def _summarize(self, rows: list[CertificationRow], sigma: float, extra: dict[str, Any]) -> dict[str, Any]:
        """The metrics.json content of ``rows`` (the radius grid reaches the largest sigma's cap)."""
        largest_sigma = max([sigma, *(row.sigma for row in rows)])
        return summarize(
            rows,
            sigma=sigma,
            n0=self.n0,
            n=self.n,
            alpha=self.alpha,
            radius_step=self.radius_step,
            cap=self._cap(largest_sigma),
            extra={
                **extra,
                "mode": self.mode,
                "sigma_mode": self.sigma_mode,
                "precision": self.precision,
                "mean_samples": sum(row.n for row in rows) / len(rows) if rows else 0.0,
            },
        )

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
        if self.sigma_mode != "fixed":
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
