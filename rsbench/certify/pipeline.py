"""The certification pipeline, with no Lightning in it: a model and test images in; records and a summary out.

:class:`Certification` certifies the images of a :class:`~rsbench.certify.settings.Subset` of a test set with the
settings' protocol and writes the output contract into its directory: ``certify.tsv`` (one row per image, appended
and flushed as it is computed, resumed after an interruption; ``certify_protocol.json`` refuses to continue rows of
another protocol or model), ``metrics.json`` (ACR, certified accuracy on the radius grid, the exact protocol and
subset) and ``certified_accuracy.png``. Training runs reach it through
:class:`rsbench.runs.certify_callback.CertifyCallback`; ``python -m rsbench.certify`` (models rsbench did not train,
ensembles) calls it directly.

Under several processes, process r certifies every world_size-th image of the subset (a static share, so a resumed
run never computes an image twice) into its own shard file, and process 0 merges the shards and writes the summary:
the rows are the ones a single process would produce, because each image's noise streams are seeded by
(seed, image index) alone.

With a data-dependent sigma mode, ``certify.tsv`` and ``metrics.json`` hold certificates at a per-input sigma,
labelled ``sound = false`` everywhere, and the sound fixed-sigma certificates of the same images go to
``certify_fixed_sigma.tsv`` and ``metrics.json["fixed_sigma"]``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from scipy.stats import norm
from torch import Tensor, nn

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.data_dependent import MEMORY_NOTE, UNSOUND_NOTE, certify_data_dependent, memory_replay
from rsbench.certify.designs import Design
from rsbench.certify.environment import environment
from rsbench.certify.grid_noise import GridSmooth
from rsbench.certify.plot import Curve, plot_certified_accuracy
from rsbench.certify.progress import progress as progress_counter
from rsbench.certify.records import (
    STEM,
    CertificationRow,
    RecordWriter,
    check_protocol,
    merge_records,
    read_records,
    record_columns,
    shard_record,
    write_protocol,
    write_record,
)
from rsbench.certify.seeding import derive_seed
from rsbench.certify.sequential import certify_group
from rsbench.certify.settings import RESUMABLE, CertifySettings
from rsbench.certify.smooth import Certificate, Smooth, module_device
from rsbench.certify.subset import indices_digest, require_images
from rsbench.certify.summary import format_summary, summarize, write_metrics

log = logging.getLogger(__name__)

FIXED_STEM = "certify_fixed_sigma"  # the sound certificates beside data-dependent ones
PER_INPUT_STEM = "certify_data_dependent"  # memory mode: the per-input-sigma certificates before the replay
GroupCertifier = Callable[[Smooth, Tensor, list[int]], Iterator[tuple[int, Certificate]]]


class IndexedImages(Protocol):
    """A test set indexed by image: ``images[i]`` is ``(image [C, H, W] in [0,1], label, ...)``."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> tuple[Any, ...]: ...


@dataclass(frozen=True)
class Subject:
    """What is certified: a base classifier and what identifies it in the records.

    Attributes:
        classifier: maps images ``[B, C, H, W]`` in [0,1] pixel space to scores ``[B, num_classes]`` (its input
            layer included); its top class is the base classifier's vote.
        num_classes: the number of classes.
        sigma: the noise level it was trained at (certified at it unless the protocol names another).
        description: what identifies it in ``certify_protocol.json`` and ``metrics.json`` (``method``, ``dataset``,
            ``arch``); rows of another description are not continued.
        provenance: what it was built from (files and their SHA-256, the stated input layer), recorded in
            ``metrics.json["model"]`` only, so that moving a file does not stop a resumed run.
        hparams: the training method's hyperparameters (``SmoothingModule.method_hparams``), recorded in
            ``metrics.json["hparams"]`` only; ``rsbench.report`` labels and groups runs by them.
        certify_defaults: the certification settings its training method asks for where the settings leave them
            unset (``certify_defaults`` in the method's config, e.g. the DDRS paper's sigma-search n for MACER).
        noise: the noise it was trained with (a warning names a certification noise that differs).
    """

    classifier: nn.Module
    num_classes: int
    sigma: float
    description: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    hparams: Mapping[str, Any] = field(default_factory=dict)
    certify_defaults: Mapping[str, Any] = field(default_factory=dict)
    noise: str = "gaussian"


@dataclass(frozen=True)
class Shard:
    """This process's share of the images: every ``world_size``-th image, starting at position ``rank``."""

    rank: int = 0
    world_size: int = 1


@dataclass
class Outcome:
    """What a certification run produced on this process.

    Attributes:
        summary: the ``metrics.json`` content; ``None`` on processes other than 0, and when stopped early.
        rows: each record's rows in subset order (``certify`` and, for data-dependent modes, the others); empty
            when ``summary`` is ``None``.
        stopped: whether ``should_stop`` ended the run before every image of this process's share was certified.
    """

    summary: dict[str, Any] | None = None
    rows: dict[str, list[CertificationRow]] = field(default_factory=dict)
    stopped: bool = False


def _no_barrier() -> None:
    """A single process waits for no one."""


class Certification:
    """Certify test images with the protocol of ``settings`` into ``output_dir`` (see the module docstring).

    Args:
        settings: the protocol, subset, speed options, and optionally the sequential schedule or the
            data-dependent sigma mode.
        output_dir: where ``certify.tsv``, ``certify_protocol.json``, ``metrics.json`` and the plot go.
        notes: facts about the run recorded in ``metrics.json`` as given (e.g. ``{"protocol": "authors"}``, the
            training protocol); the rows do not depend on them.
    """

    def __init__(
        self, settings: CertifySettings, output_dir: str | Path, notes: Mapping[str, Any] | None = None
    ) -> None:
        self.settings = settings
        self.output_dir = Path(output_dir)
        self.notes = dict(notes or {})

    def run(
        self,
        subject: Subject,
        images: IndexedImages,
        *,
        shard: Shard = Shard(),
        barrier: Callable[[], None] = _no_barrier,
        should_stop: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Certify this process's share of the subset; process 0 then merges the shards and writes the summary.

        Args:
            subject: the classifier and its description.
            images: the test set (the subset's indices index it).
            shard: this process's rank and the number of processes.
            barrier: waits for every process (called after the protocol is stored and after the share is done).
            should_stop: asked after each certified image; when it returns true the run stops there (every row
                certified so far is on disk, so rerunning resumes after it) and writes no summary.
        """
        self.settings = self.settings.with_defaults(subject.certify_defaults)  # what the settings leave to the method
        settings, protocol = self.settings, self.settings.protocol
        sigma = protocol.sigma if protocol.sigma is not None else subject.sigma
        if sigma != subject.sigma:
            log.warning("certifying at sigma=%s a model trained at sigma=%s", sigma, subject.sigma)
        if protocol.noise != subject.noise:
            log.warning("certifying with %s noise a model trained with %s noise", protocol.noise, subject.noise)
        if settings.sequential is not None:
            _warn_unreachable(settings.sequential.make(sigma, protocol), protocol.n)
        subset = settings.subset
        dataset = subject.description.get("dataset")
        split = f"the {dataset} test split" if dataset else "the test split"
        indices = require_images(len(images), subset.start, subset.skip, subset.max_images, split)
        meta = {
            **subject.description,
            "seed": protocol.seed,
            "model_fingerprint": weights_fingerprint(subject.classifier),
        }
        if shard.rank == 0:
            stored = {**meta, **settings.protocol_record(sigma, len(images))}
            check_protocol(self.output_dir, stored, RESUMABLE)
            write_protocol(self.output_dir, stored)
        barrier()
        share = indices[shard.rank :: shard.world_size]
        stopped = False
        with self._prepared(subject.classifier) as classifier:
            # Gaussian noise on the input grid when asked for (the settings refuse a grid for the other noises)
            noise = {"noise": protocol.noise} if protocol.noise_grid is None else {"levels": protocol.noise_grid}
            make = Smooth if protocol.noise_grid is None else GridSmooth
            smooth = make(
                classifier,
                subject.num_classes,
                sigma,
                precision=settings.speed.precision,
                channels_last=settings.speed.channels_last,
                norm=protocol.norm,
                **noise,
            )
            for stem, certify_group, sound in self._records():
                record = self.output_dir / shard_record(shard.rank, shard.world_size, stem)
                stopped = self._certify_share(smooth, images, share, record, stem, certify_group, sound, should_stop)
                if stopped:
                    log.warning("certification stopped on request; rerun into %s to resume", self.output_dir)
                    break
        barrier()
        if shard.rank != 0 or stopped:
            return Outcome(stopped=stopped)
        return self._summarize_run(indices, images, sigma, meta, subject)

    def _summarize_run(
        self,
        indices: list[int],
        images: IndexedImages,
        sigma: float,
        meta: Mapping[str, Any],
        subject: Subject,
    ) -> Outcome:
        """Merge every record's shards, write ``metrics.json`` and the plot; return the rows and the summary."""
        settings = self.settings
        rows = {stem: self._collect(stem, indices) for stem, _, _ in self._records()}
        if settings.sigma_mode == "memory":
            stacked = torch.stack([images[i][0] for i in indices])
            replayed, report = memory_replay(rows[PER_INPUT_STEM], stacked)
            write_record(self.output_dir / f"{STEM}.tsv", replayed)
            rows[STEM] = replayed
            log.info("memory replay: %d certificates shrunk, %d switched class", report.shrunk, report.switched)
        extra = {"subset": self._subset_record(indices, len(images)), **meta}
        extra["environment"] = environment(module_device(subject.classifier) or torch.device("cpu"))
        if subject.provenance:
            extra["model"] = dict(subject.provenance)
        if subject.hparams:
            extra["hparams"] = dict(subject.hparams)
        extra.update(self.notes)
        dim = images[indices[0]][0].numel() if indices else 0
        extra.update(settings.protocol.threat.record(sigma, dim, settings.protocol.radius_step))
        summary = self._summarize(rows[STEM], sigma, extra, dim)
        curves = [
            Curve(f"{settings.sigma_mode} sigma", [r.radius for r in rows[STEM]], [r.correct for r in rows[STEM]])
        ]
        if settings.sigma_mode != "fixed":
            fixed = self._summarize(rows[FIXED_STEM], sigma, {})
            summary.update(
                soundness=MEMORY_NOTE if settings.sigma_mode == "memory" else UNSOUND_NOTE,
                fixed_sigma=fixed,
                mean_sigma=sum(r.sigma for r in rows[STEM]) / max(1, len(rows[STEM])),
            )
            if settings.sigma_mode == "memory":
                summary["memory"] = {"order": "test index", **vars(report)}
            curves = [
                Curve(
                    f"fixed sigma={sigma} (sound)",
                    [r.radius for r in rows[FIXED_STEM]],
                    [r.correct for r in rows[FIXED_STEM]],
                ),
                Curve(f"{settings.sigma_mode} sigma (NOT sound)", curves[0].radii, curves[0].correct, dashed=True),
            ]
            log.warning("%s certificates are not sound guarantees: %s", settings.sigma_mode, summary["soundness"])
        write_metrics(summary, self.output_dir / "metrics.json")
        title = f"{meta.get('method')} on {meta.get('dataset')} ({meta.get('arch')}), sigma={sigma}"
        if "norm" in summary:
            title += f", {settings.protocol.threat.describe()}"
        p = settings.protocol
        note = f"{len(indices)} images, n0={p.n0}, n={p.n}, alpha={p.alpha}, {settings.mode} CERTIFY"
        plot_certified_accuracy(curves, summary["radius_cap"], self.output_dir / "certified_accuracy.png", title, note)
        log.info("certification results (%s):\n%s", self.output_dir, format_summary(summary))
        return Outcome(summary=summary, rows=rows)

    def _records(self) -> list[tuple[str, GroupCertifier, bool]]:
        """The records this run writes: (file stem, how a group of images is certified, whether it is sound)."""
        sigma_mode = self.settings.sigma_mode
        if sigma_mode == "fixed":
            return [(STEM, self._certify_group, True)]
        per_input = STEM if sigma_mode == "data_dependent" else PER_INPUT_STEM
        return [(FIXED_STEM, self._certify_group, True), (per_input, self._certify_group_per_input_sigma, False)]

    def _collect(self, stem: str, indices: list[int]) -> list[CertificationRow]:
        """Merge a record's shards and return its rows for ``indices``, in that order."""
        rows_by_idx = {row.idx: row for row in merge_records(self.output_dir, stem)}
        extra = sorted(set(rows_by_idx).difference(indices))
        if extra:
            log.warning("%s.tsv holds %d rows outside the requested subset; they are not summarised", stem, len(extra))
        return [rows_by_idx[i] for i in indices]

    def _subset_record(self, indices: list[int], test_size: int) -> dict[str, Any]:
        subset = self.settings.subset
        return {
            "start": subset.start,
            "skip": subset.skip,
            "max_images": subset.max_images,
            "test_size": test_size,
            "digest": indices_digest(indices),
            "indices": indices,
        }

    @contextlib.contextmanager
    def _prepared(self, net: nn.Module) -> Iterator[nn.Module]:
        """The network as certified (channels-last and/or compiled when asked), restored afterwards."""
        speed = self.settings.speed
        if speed.channels_last:
            net.to(memory_format=torch.channels_last)
        try:
            yield torch.compile(net) if speed.compile else net  # type: ignore[misc]
        finally:
            if speed.channels_last:
                net.to(memory_format=torch.contiguous_format)

    def _certify_share(
        self,
        smooth: Smooth,
        images: IndexedImages,
        share: list[int],
        record: Path,
        stem: str,
        certify_group: GroupCertifier,
        sound: bool,
        should_stop: Callable[[], bool] | None,
    ) -> bool:
        """Certify the images of ``share`` not yet in record ``stem``, appending each row to ``record`` when done.

        Images are taken ``images_per_batch`` at a time: their selection samples are drawn together (filling whole
        batches), then each image's estimation samples (several images together only when n < batch_size), and
        every row is written as soon as its image is certified.

        Returns:
            Whether ``should_stop`` stopped it (after the row of the image in flight was written).
        """
        done = set(read_records(record.parent, stem)).intersection(share) if record.parent.exists() else set()
        todo = [i for i in share if i not in done]
        if done:
            log.info("resuming certification: %d of %d images already certified", len(done), len(share))
        together = self.settings.speed.images_together(self.settings.protocol)
        seed = self.settings.protocol.seed
        progress = progress_counter(len(share), f"certifying ({stem})", "images", initial=len(done))
        columns = record_columns(not self.settings.protocol.threat.is_default)
        try:
            with RecordWriter(record, columns) as writer:
                for first in range(0, len(todo), together):
                    group = todo[first : first + together]
                    items = [images[i] for i in group]
                    xs = torch.stack([item[0] for item in items])
                    labels = [int(item[1]) for item in items]
                    for position, cert in certify_group(smooth, xs, [derive_seed(seed, i) for i in group]):
                        writer.append(_row(group[position], labels[position], cert, sound))
                        progress.update(1)
                        if should_stop is not None and should_stop():
                            return True
        finally:
            progress.close()
        return False

    def _certify_group(self, smooth: Smooth, xs: Tensor, seeds: list[int]) -> Iterator[tuple[int, Certificate]]:
        """Yield (position in the group, certificate) as each image of the group is certified."""
        protocol, schedule = self.settings.protocol, self.settings.sequential
        batch_size = self.settings.speed.batch_size
        if schedule is not None:
            design = schedule.make(smooth.sigma, protocol)
            yield from enumerate(certify_group(smooth, xs, protocol.n0, batch_size, design, seeds=seeds))
            return
        start = time.perf_counter()
        selected = smooth.select(xs, protocol.n0, batch_size, seeds=seeds)
        selection_seconds = (time.perf_counter() - start) / len(xs)
        together = max(1, batch_size // protocol.n)
        for first in range(0, len(xs), together):
            part = slice(first, first + together)
            certificates = smooth.estimate(
                xs[part],
                selected[part],
                protocol.n0,
                protocol.n,
                protocol.alpha,
                batch_size,
                seeds=seeds[part],
                extra_seconds=selection_seconds,
            )
            yield from enumerate(certificates, start=first)

    def _certify_group_per_input_sigma(
        self, smooth: Smooth, xs: Tensor, seeds: list[int]
    ) -> Iterator[tuple[int, Certificate]]:
        """Yield (position, certificate at the image's own optimised sigma) for each image of the group."""
        assert self.settings.data_dependent is not None
        protocol, batch_size = self.settings.protocol, self.settings.speed.batch_size
        for position, (x, seed) in enumerate(zip(xs, seeds, strict=True)):
            (cert,) = certify_data_dependent(
                smooth,
                x.unsqueeze(0),
                protocol.n0,
                protocol.n,
                protocol.alpha,
                batch_size,
                self.settings.data_dependent.search,
                seeds=[seed],
            )
            yield position, cert

    def _summarize(
        self, rows: list[CertificationRow], sigma: float, extra: dict[str, Any], dim: int = 0
    ) -> dict[str, Any]:
        """The metrics.json content of ``rows`` (the radius grid, in the certified norm, reaches the largest cap)."""
        settings, protocol = self.settings, self.settings.protocol
        largest_sigma = max([sigma, *(row.sigma for row in rows)])
        return summarize(
            rows,
            sigma=sigma,
            n0=protocol.n0,
            n=protocol.n,
            alpha=protocol.alpha,
            radius_step=settings.grid_step(dim),
            cap=settings.cap(largest_sigma, dim),
            extra={
                **extra,
                "mode": settings.mode,
                "sigma_mode": settings.sigma_mode,
                "precision": settings.speed.precision,
                "channels_last": settings.speed.channels_last,
                "compile": settings.speed.compile,
                "mean_samples": sum(row.n for row in rows) / len(rows) if rows else 0.0,
                **({"design": settings.sequential.design} if settings.sequential is not None else {}),
            },
        )


def _warn_unreachable(design: Design, n: int) -> None:
    """Say so when the configured radius cap is more than n of n votes can certify (the design stops below it)."""
    if design.unreachable:
        log.warning(
            "certify.radius_cap=%g is above the largest radius %d of %d votes can certify with design=%s at "
            "sigma=%g (%.4g); images stop at radius %g. Raise certify.n or lower certify.radius_cap",
            design.unreachable[-1],
            n,
            n,
            design.name,
            design.goal.sigma,
            design.goal.sigma * float(norm.ppf(design.best_lower())),
            design.cap,
        )


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
        norm=cert.norm,
        noise=cert.noise,
    )
