"""The certification pipeline, with no Lightning in it: a model and test images in; records and a summary out.

:class:`Certification` certifies the images of a :class:`~rsbench.certify.pipeline.settings.Subset` of a test set with
the settings' protocol and writes the output contract into its directory: ``certify.tsv`` (one row per image, appended
and flushed as it is computed, resumed after an interruption; ``certify_protocol.json`` refuses to continue rows of
another protocol or model), ``metrics.json`` (ACR, certified accuracy on the radius grid, the exact protocol and
subset) and ``certified_accuracy.png``. Training runs reach it through
:class:`rsbench.runs.certify_callback.CertifyCallback`; ``python -m rsbench.certify`` (models rsbench did not train,
ensembles) calls it directly.

Under several processes, process r certifies every world_size-th image of the subset (a static share, so a resumed
run never computes an image twice) into its own shard file, and process 0 merges the shards and writes the summary:
the rows are the ones a single process would produce, because each image's noise streams are seeded by
(seed, image index) alone. The jobs of a sharded certification (``certify.shard``,
:mod:`rsbench.certify.pipeline.sharding`) slice the subset the same way, each into its own record of one shared folder,
and the last job to finish merges them (:func:`merge_shards`, also ``python -m rsbench.certify.merge``); the summary is
then written from the files alone, from what each job stored in ``certify_shards.json`` when it started.

The certificates themselves come from the subject's :class:`~rsbench.certify.pipeline.strategy.Strategy`: a
:class:`Subject`'s smoothed classifier (:func:`rsbench.certify.algorithm.groups.certify_images`, the algorithm's one
composition of "certify a group of images", or the per-input-sigma search), or a router and its experts
(:class:`rsbench.certify.pipeline.dual_run.DualSubject`, dual randomized smoothing); this module is the run around it
(settings, records, resume, shards, summary, plot, progress, cost).

With a data-dependent sigma mode, ``certify.tsv`` and ``metrics.json`` hold certificates at a per-input sigma,
labelled ``sound = false`` everywhere, and the sound fixed-sigma certificates of the same images go to
``certify_fixed_sigma.tsv`` and ``metrics.json["fixed_sigma"]``.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
from scipy.stats import norm
from torch import Tensor, nn

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.algorithm.data_dependent import UNSOUND_NOTE, certify_data_dependent
from rsbench.certify.algorithm.designs import Design
from rsbench.certify.algorithm.groups import certify_images
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.smooth import Certificate, Smooth, module_device
from rsbench.certify.pipeline.cost import SEGMENT_KEYS, certification_cost
from rsbench.certify.pipeline.dual_run import DualSubject, dual_presented
from rsbench.certify.pipeline.environment import environment
from rsbench.certify.pipeline.memory_replay import MEMORY_NOTE, memory_replay
from rsbench.certify.pipeline.plot import Curve, plot_certified_accuracy
from rsbench.certify.pipeline.progress import progress as progress_counter
from rsbench.certify.pipeline.records import (
    STEM,
    CertificationRow,
    RecordWriter,
    check_protocol,
    directory_lock,
    merge_records,
    read_records,
    record_columns,
    shard_record,
    write_protocol,
    write_record,
)
from rsbench.certify.pipeline.settings import RESUMABLE, CertifySettings
from rsbench.certify.pipeline.sharding import owner
from rsbench.certify.pipeline.strategy import Presented, RecordPlan, Strategy, recorded_provenance, smooth_for
from rsbench.certify.pipeline.subset import indices_digest, require_images
from rsbench.certify.pipeline.summary import format_summary, summarize, write_metrics
from rsbench.errors import DamagedFileError
from rsbench.files import write_text_atomically

log = logging.getLogger(__name__)

FIXED_STEM = "certify_fixed_sigma"  # the sound certificates beside data-dependent ones
PER_INPUT_STEM = "certify_data_dependent"  # memory mode: the per-input-sigma certificates before the replay
SHARDS = "certify_shards.json"  # a sharded certification's summary context, and each shard's environment
SEGMENTS = "certify_segments.json"  # an unsharded certification's processes: each one's environment and first rows


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

    def strategy(self) -> Strategy:
        """How the pipeline certifies it: its smoothed classifier, at a fixed or a per-input sigma."""
        return SmoothStrategy(self)


@dataclass(frozen=True)
class Shard:
    """This process's share of the images: every ``world_size``-th image, starting at position ``rank``."""

    rank: int = 0
    world_size: int = 1


@dataclass
class Outcome:
    """What a certification run produced on this process.

    Attributes:
        summary: the ``metrics.json`` content; ``None`` on processes other than 0, when stopped early, and on a
            shard whose siblings are not done yet.
        rows: each record's rows in subset order (``certify`` and, for data-dependent modes, the others); empty
            when ``summary`` is ``None``.
        stopped: whether ``should_stop`` ended the run before every image of this process's share was certified.
        waiting: the shards whose rows are still missing (a sharded certification whose last shard is not done).
    """

    summary: dict[str, Any] | None = None
    rows: dict[str, list[CertificationRow]] = field(default_factory=dict)
    stopped: bool = False
    waiting: tuple[int, ...] = ()


@dataclass(frozen=True)
class Context:
    """What the summary of a run says besides its rows: kept in memory, or in ``certify_shards.json`` for shards.

    Attributes:
        settings: the certification settings.
        sigma: the certification sigma.
        test_size: the size of the test split the subset's indices index.
        dim: the input dimension (C * H * W).
        meta: the subject's description, the certification seed and the weights' fingerprint.
        extra: ``model`` (provenance), ``hparams`` and the run's notes, as recorded in ``metrics.json``.
        environments: the environment of each process that certified (by shard; one entry unless sharded).
        train_seconds: the run's training time (``None``: it trained nothing).
        dual: a dual run's summary parameters (:meth:`rsbench.certify.pipeline.dual_run.DualStrategy.dual`), else
            ``None``.
    """

    settings: CertifySettings
    sigma: float
    test_size: int
    dim: int
    meta: Mapping[str, Any]
    extra: Mapping[str, Any]
    environments: Mapping[int, Mapping[str, Any]]
    train_seconds: float | None = None
    dual: Mapping[str, Any] | None = None

    @property
    def indices(self) -> list[int]:
        """The certified test indices, in order."""
        subset = self.settings.subset
        return require_images(self.test_size, subset.start, subset.skip, subset.max_images)

    def to_json(self) -> dict[str, Any]:
        """The context as stored in ``certify_shards.json`` (``environments`` under ``shards``)."""
        return {
            "settings": self.settings.to_keys(),
            "sigma": self.sigma,
            "test_size": self.test_size,
            "dim": self.dim,
            "meta": dict(self.meta),
            "extra": dict(self.extra),
            "train_seconds": self.train_seconds,
            "dual": None if self.dual is None else dict(self.dual),
            "shards": {str(k): dict(v) for k, v in self.environments.items()},
        }

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> Context:
        """The context :meth:`to_json` stored."""
        return cls(
            settings=CertifySettings.from_keys(**stored["settings"]),
            sigma=float(stored["sigma"]),
            test_size=int(stored["test_size"]),
            dim=int(stored["dim"]),
            meta=stored["meta"],
            extra=stored["extra"],
            environments={int(k): v for k, v in stored["shards"].items()},
            train_seconds=stored.get("train_seconds"),
            dual=stored.get("dual"),
        )


def _no_barrier() -> None:
    """A single process waits for no one."""


class Certification:
    """Certify test images with the protocol of ``settings`` into ``output_dir`` (see the module docstring).

    Args:
        settings: the protocol, subset, speed options, and optionally the sequential schedule, the data-dependent
            sigma mode or this job's shard.
        output_dir: where ``certify.tsv``, ``certify_protocol.json``, ``metrics.json`` and the plot go (for a
            sharded certification: the folder every shard shares).
        notes: facts about the run recorded in ``metrics.json`` as given (e.g. ``{"protocol": "authors"}``, the
            training protocol); the rows do not depend on them.
        train_seconds: the run's training time, recorded in ``metrics.json["cost"]`` (``None``: none).
    """

    def __init__(
        self,
        settings: CertifySettings,
        output_dir: str | Path,
        notes: Mapping[str, Any] | None = None,
        train_seconds: float | None = None,
    ) -> None:
        self.settings = settings
        self.output_dir = Path(output_dir)
        self.notes = dict(notes or {})
        self.train_seconds = train_seconds

    def run(
        self,
        subject: Subject | DualSubject,
        images: IndexedImages,
        *,
        shard: Shard = Shard(),
        barrier: Callable[[], None] = _no_barrier,
        should_stop: Callable[[], bool] | None = None,
    ) -> Outcome:
        """Certify this process's share of the subset; process 0 then merges the shards and writes the summary.

        Args:
            subject: the classifier and its description, or a router and its experts (dual randomized smoothing).
            images: the test set (the subset's indices index it).
            shard: this process's rank and the number of processes (within this job's shard, if sharded).
            barrier: waits for every process (called after the protocol is stored and after the share is done).
            should_stop: asked after each certified image; when it returns true the run stops there (every row
                certified so far is on disk, so rerunning resumes after it) and writes no summary.
        """
        settings = self.settings.with_defaults(subject.certify_defaults)  # what the settings leave to the method
        sharding = settings.sharding
        strategy: Strategy = subject.strategy()
        strategy.check(settings)
        subset = settings.subset
        dataset = subject.description.get("dataset")
        split = f"the {dataset} test split" if dataset else "the test split"
        indices = require_images(len(images), subset.start, subset.skip, subset.max_images, split)
        context = self._context(settings, strategy, images, indices)
        if shard.rank == 0:
            self._store_protocol(strategy.stored_protocol(settings, len(images)), context)
        barrier()
        first, stride = sharding.slice(shard.rank, shard.world_size)
        kind = "shard" if sharding.sharded else "rank"
        share = indices[first::stride]
        stopped = False
        with strategy.records(settings) as plans:
            for plan in plans:
                record = self.output_dir / shard_record(first, stride, plan.stem, kind)
                stopped = self._certify_share(settings, plan, images, share, record, should_stop)
                if stopped:
                    log.warning("certification stopped on request; rerun into %s to resume", self.output_dir)
                    break
        barrier()
        if shard.rank != 0 or stopped:
            return Outcome(stopped=stopped)
        if sharding.sharded:
            log.info("%s: every image of its share is certified in %s", sharding.describe(), self.output_dir)
            return merge_shards(self.output_dir, wait=True)
        return _summarize_run(self.output_dir, context, images)

    def _store_protocol(self, stored: Mapping[str, Any], context: Context) -> None:
        """Check the stored protocol and store this one; a shard also registers itself, all under the folder's lock.

        The shards of one certification share a folder and may start at once: each checks and writes
        ``certify_protocol.json`` and registers in ``certify_shards.json`` while holding the folder's lock, and once a
        shard is registered its protocol binds every other shard even before any row is written, so two shards with
        different settings can never both pass.
        """
        sharding = context.settings.sharding
        if not sharding.sharded:
            check_protocol(self.output_dir, stored, RESUMABLE)
            write_protocol(self.output_dir, stored)
            _record_segment(self.output_dir, context.settings, context.environments[sharding.shard])
            return
        with directory_lock(self.output_dir):
            check_protocol(self.output_dir, stored, RESUMABLE, binding=(self.output_dir / SHARDS).is_file())
            write_protocol(self.output_dir, stored)
            _register_shard(self.output_dir, context, sharding.shard)

    def _context(
        self, settings: CertifySettings, strategy: Strategy, images: IndexedImages, indices: list[int]
    ) -> Context:
        """What the summary of a run with ``settings`` says besides the rows (see :class:`Context`)."""
        extra = {**strategy.extra(settings, self.output_dir), **self.notes}
        return Context(
            settings=settings,
            sigma=strategy.sigma(settings),
            test_size=len(images),
            dim=images[indices[0]][0].numel() if indices else 0,
            meta=strategy.meta(settings),
            extra=extra,
            environments={settings.sharding.shard: environment(strategy.device())},
            train_seconds=self.train_seconds,
            dual=strategy.dual(settings, self.output_dir),
        )

    def _certify_share(
        self,
        settings: CertifySettings,
        plan: RecordPlan,
        images: IndexedImages,
        share: list[int],
        record: Path,
        should_stop: Callable[[], bool] | None,
    ) -> bool:
        """Certify the images of ``share`` not yet in record ``plan.stem``, appending each row to ``record`` when done.

        Images are taken ``images_per_batch`` at a time: their selection samples are drawn together (filling whole
        batches), then each image's estimation samples (several images together only when n < batch_size), and
        every row is written as soon as its image is certified.

        Returns:
            Whether ``should_stop`` stopped it (after the row of the image in flight was written).
        """
        stem = plan.stem
        done = set(read_records(record.parent, stem)).intersection(share) if record.parent.exists() else set()
        todo = [i for i in share if i not in done]
        if done:
            log.info("resuming certification: %d of %d images already certified", len(done), len(share))
        together = settings.speed.images_together(settings.protocol)
        progress = progress_counter(len(share), f"certifying ({stem})", "images", initial=len(done))
        try:
            with RecordWriter(record, plan.columns, exclusive=settings.sharding.sharded) as writer:
                for first in range(0, len(todo), together):
                    group = todo[first : first + together]
                    items = [images[i] for i in group]
                    xs = torch.stack([item[0] for item in items])
                    for _, row in plan.certify(xs, group, [int(item[1]) for item in items]):
                        writer.append(row)
                        progress.update(1)
                        if should_stop is not None and should_stop():
                            return True
        finally:
            progress.close()
        return False


@dataclass(frozen=True)
class SmoothStrategy:
    """The :class:`~rsbench.certify.pipeline.strategy.Strategy` of a :class:`Subject`: its smoothed classifier.

    At a fixed sigma one record; under a per-input sigma mode the sound fixed-sigma record, then the per-input one.
    """

    subject: Subject

    def sigma(self, settings: CertifySettings) -> float:
        """``certify.sigma``, else the subject's training sigma."""
        return settings.protocol.sigma if settings.protocol.sigma is not None else self.subject.sigma

    def check(self, settings: CertifySettings) -> None:
        """Warn about a sigma or noise other than the training's, and a radius cap the design cannot reach."""
        protocol, sigma = settings.protocol, self.sigma(settings)
        if sigma != self.subject.sigma:
            log.warning("certifying at sigma=%s a model trained at sigma=%s", sigma, self.subject.sigma)
        if protocol.noise != self.subject.noise:
            log.warning("certifying with %s noise a model trained with %s noise", protocol.noise, self.subject.noise)
        design = settings.design(sigma)
        if design is not None:
            _warn_unreachable(design, protocol.n)

    def meta(self, settings: CertifySettings) -> dict[str, Any]:
        """The subject's description, the certification seed and the weights' fingerprint."""
        return {
            **self.subject.description,
            "seed": settings.protocol.seed,
            "model_fingerprint": weights_fingerprint(self.subject.classifier),
        }

    def stored_protocol(self, settings: CertifySettings, test_size: int) -> dict[str, Any]:
        """:meth:`meta` and :meth:`CertifySettings.protocol_record`."""
        return {**self.meta(settings), **settings.protocol_record(self.sigma(settings), test_size)}

    def extra(self, settings: CertifySettings, output_dir: Path) -> dict[str, Any]:
        """``model`` (the provenance) and ``hparams``, when the subject has them."""
        extra: dict[str, Any] = {}
        if self.subject.provenance:
            extra["model"] = recorded_provenance(self.subject.provenance, output_dir)
        if self.subject.hparams:
            extra["hparams"] = dict(self.subject.hparams)
        return extra

    def dual(self, settings: CertifySettings, output_dir: Path) -> None:
        """A single model: no dual summary."""
        return None

    def device(self) -> torch.device:
        """The classifier's device."""
        return module_device(self.subject.classifier) or torch.device("cpu")

    @contextlib.contextmanager
    def records(self, settings: CertifySettings) -> Iterator[list[RecordPlan]]:
        """The records of :func:`records_of`, certified by the network as certified.

        Channels-last and/or compiled when asked, restored afterwards.
        """
        speed, protocol = settings.speed, settings.protocol
        net = self.subject.classifier
        if speed.channels_last:
            net.to(memory_format=torch.channels_last)
        try:
            classifier = torch.compile(net) if speed.compile else net
            smooth = smooth_for(classifier, self.subject.num_classes, self.sigma(settings), settings)  # type: ignore[arg-type]
            columns = record_columns(not protocol.threat.is_default)
            plans = []
            for stem in records_of(settings):
                unsound = settings.sigma_mode != "fixed" and stem != FIXED_STEM
                certify_group = _per_input if unsound else _certify_group
                plans.append(RecordPlan(stem, columns, _rows(certify_group, smooth, settings, unsound)))
            yield plans
        finally:
            if speed.channels_last:
                net.to(memory_format=torch.contiguous_format)


GroupCertifier = Callable[[Smooth, Tensor, list[int], CertifySettings], Iterator[tuple[int, Certificate]]]


def _rows(certify_group: GroupCertifier, smooth: Smooth, settings: CertifySettings, unsound: bool) -> Any:
    """The :data:`~rsbench.certify.pipeline.strategy.RowCertifier` of ``certify_group`` on ``smooth``."""
    seed = settings.protocol.seed

    def certify(xs: Tensor, group: list[int], labels: list[int]) -> Iterator[tuple[int, CertificationRow]]:
        seeds = [derive_seed(seed, i) for i in group]
        for position, cert in certify_group(smooth, xs, seeds, settings):
            yield position, CertificationRow.of(group[position], labels[position], cert, sound=not unsound)

    return certify


def _certify_group(
    smooth: Smooth, xs: Tensor, seeds: list[int], settings: CertifySettings
) -> Iterator[tuple[int, Certificate]]:
    """Yield (position in the group, certificate) as each image of the group is certified."""
    protocol, batch_size, design = settings.protocol, settings.speed.batch_size, settings.design(smooth.sigma)
    return certify_images(
        smooth, xs, seeds, n0=protocol.n0, n=protocol.n, alpha=protocol.alpha, batch_size=batch_size, design=design
    )


def _per_input(
    smooth: Smooth, xs: Tensor, seeds: list[int], settings: CertifySettings
) -> Iterator[tuple[int, Certificate]]:
    """Yield (position, certificate at the image's own optimised sigma) for each image of the group."""
    assert settings.data_dependent is not None
    protocol, batch_size = settings.protocol, settings.speed.batch_size
    for position, (x, seed) in enumerate(zip(xs, seeds, strict=True)):
        (cert,) = certify_data_dependent(
            smooth,
            x.unsqueeze(0),
            protocol.n0,
            protocol.n,
            protocol.alpha,
            batch_size,
            settings.data_dependent.search,
            seeds=[seed],
        )
        yield position, cert


def records_of(settings: CertifySettings) -> list[str]:
    """The stems of the records a run with ``settings`` writes, the sound fixed-sigma one first."""
    if settings.sigma_mode == "fixed":
        return [STEM]
    return [FIXED_STEM, STEM if settings.sigma_mode == "data_dependent" else PER_INPUT_STEM]


def _register_shard(directory: Path, context: Context, shard: int) -> None:
    """Store the summary context in ``certify_shards.json``, with this shard's environment beside the others'.

    The caller holds the folder's lock (:func:`~rsbench.certify.pipeline.records.directory_lock`).
    """
    path = directory / SHARDS
    stored = _read_json(path) if path.is_file() else {"shards": {}}
    shards = {int(k): v for k, v in stored.get("shards", {}).items()}
    shards[shard] = context.environments[shard]
    record = replace(context, environments=shards).to_json()
    write_text_atomically(path, json.dumps(record, indent=2) + "\n")


def _record_segment(directory: Path, settings: CertifySettings, env: Mapping[str, Any]) -> None:
    """Append this process to ``certify_segments.json`` when it certifies on another machine than the last one.

    Each entry is an environment (device, device name, torch, threads) and ``rows``: how many rows each record held
    when that process started, so the rows from there to the next entry's are the ones it certified (an unsharded
    run appends its rows in the subset's order). A run resumed on the machine it started on adds nothing.
    """
    segments = read_segments(directory)
    machine = {key: env.get(key) for key in SEGMENT_KEYS}
    if segments and {key: segments[-1].get(key) for key in SEGMENT_KEYS} == machine:
        return
    rows = {stem: _row_count(directory / f"{stem}.tsv") for stem in records_of(settings)}
    segments.append({**machine, "rows": rows})
    write_text_atomically(directory / SEGMENTS, json.dumps({"segments": segments}, indent=2) + "\n")


def _row_count(record: Path) -> int:
    """The complete rows of a record file, its header left out (0 when there is none yet).

    Counted, not parsed: a torn last line (a process killed mid-write) is the records' own reader's to handle.
    """
    if not record.is_file():
        return 0
    with record.open("rb") as handle:
        return max(sum(1 for line in handle if line.endswith(b"\n")) - 1, 0)


def read_segments(directory: Path) -> list[dict[str, Any]]:
    """The processes of ``certify_segments.json`` (:func:`_record_segment`), ``[]`` for a run without one."""
    path = Path(directory) / SEGMENTS
    if not path.is_file():
        return []
    try:
        segments = json.loads(path.read_text()).get("segments")
    except (ValueError, AttributeError):
        segments = None
    if not isinstance(segments, list) or not all(
        isinstance(s, dict) and isinstance(s.get("rows"), dict) for s in segments
    ):
        raise DamagedFileError(
            f"{path} is damaged (not a list of segments); delete it and rerun: the rows are kept, only the cost's "
            "split by machine is lost"
        )
    return segments


def merge_shards(directory: str | Path, *, wait: bool = False) -> Outcome:
    """Merge a sharded certification in ``directory``: when every image has its row, ``certify.tsv`` and the summary.

    The shards' records are folded into ``certify.tsv`` (and each other record, data-dependent sigma modes) in the
    subset's order, and ``metrics.json`` and the plot are written from the rows and what the shards stored in
    ``certify_shards.json``: the same rows and summary as an unsharded run. Merging an already merged folder writes
    the same files again.

    Args:
        directory: the folder the shards certified into (``certify.merge_dir``).
        wait: called by a finishing shard: when images are missing, say which shards are still to finish and return
            (without ``wait``, a missing image is an error).

    Returns:
        The outcome; its ``waiting`` lists the shards with missing rows (then nothing was merged).

    Raises:
        DamagedFileError: the folder holds no sharded certification, or (without ``wait``) rows are missing.
    """
    directory = Path(directory)
    path = directory / SHARDS
    if not path.is_file():
        raise DamagedFileError(
            f"{directory} holds no sharded certification ({SHARDS} is missing): give the folder the shards certified "
            "into (certify.merge_dir; by default the folder above their run folders)"
        )
    with directory_lock(directory):
        context = Context.from_json(_read_json(path))
        indices = context.indices
        num_shards = context.settings.sharding.num_shards
        missing: dict[int, int] = {}  # images without a row in some record, by shard
        records = [read_records(directory, stem) for stem in records_of(context.settings)]
        for position, index in enumerate(indices):
            if any(index not in present for present in records):
                missing[owner(position, num_shards)] = missing.get(owner(position, num_shards), 0) + 1
        if missing:
            shards = ", ".join(f"{k} ({count} images)" for k, count in sorted(missing.items()))
            if not wait:
                raise DamagedFileError(
                    f"{directory} cannot be merged yet: shards {shards} of {num_shards} have images left to certify; "
                    "run (or resume) them, and the last one to finish merges"
                )
            log.info("shards %s of %d are still to finish; the last one merges %s", shards, num_shards, directory)
            return Outcome(waiting=tuple(sorted(missing)))
        return _summarize_run(directory, context)


def _summarize_run(directory: Path, context: Context, images: IndexedImages | None = None) -> Outcome:
    """Merge every record's shards, write ``metrics.json`` and the plot; return the rows and the summary."""
    settings, sigma, meta, indices = context.settings, context.sigma, context.meta, context.indices
    rows = {stem: _collect(directory, stem, indices) for stem in records_of(settings)}
    report = None
    if settings.sigma_mode == "memory":
        assert images is not None, "memory mode is summarised where its images are (never sharded)"
        stacked = torch.stack([images[i][0] for i in indices])
        replayed, report = memory_replay(rows[PER_INPUT_STEM], stacked)
        write_record(directory / f"{STEM}.tsv", replayed)
        rows[STEM] = replayed
        log.info("memory replay: %d certificates shrunk, %d switched class", report.shrunk, report.switched)
    first = min(context.environments)
    extra: dict[str, Any] = {
        "subset": _subset_record(settings, indices, context.test_size),
        **meta,
        "environment": dict(context.environments[first]),
    }
    extra.update(context.extra)
    if context.dual is None:  # (a dual run certifies Gaussian l2 only; its summary says alpha + beta instead)
        extra.update(settings.protocol.threat.record(sigma, context.dim, settings.protocol.radius_step))
    if settings.sharding.sharded:
        extra["shards"] = settings.sharding.num_shards
    certified = {stem: rows[stem] for stem in records_of(settings)}  # (memory mode's replay draws no sample)
    search = settings.data_dependent.search if settings.data_dependent is not None else None
    per_input_samples = search.iterations * (search.samples or 0) if search is not None else 0
    if context.dual is not None:
        per_input_samples = int(context.dual["router_n0"])  # (the router's selection; its n is each row's router_n)
    extra["cost"] = certification_cost(
        certified,
        n0=settings.protocol.n0,
        environment=context.environments[first],
        precision=settings.speed.precision,
        train_seconds=context.train_seconds,
        extra_samples={stem: per_input_samples for stem in certified if stem != FIXED_STEM},
        shards=context.environments if settings.sharding.sharded else None,
        segments=None if settings.sharding.sharded else read_segments(directory),
    )
    if context.dual is not None:
        presented = dual_presented(settings, context.dual, rows[STEM], indices, extra)
    else:
        presented = _presented(settings, rows, sigma, extra, context.dim, report)
    write_metrics(presented.summary, directory / "metrics.json")
    plot = directory / "certified_accuracy.png"
    plot_certified_accuracy(presented.curves, presented.summary["radius_cap"], plot, presented.title, presented.note)
    log.info("certification results (%s):\n%s", directory, presented.text)
    return Outcome(summary=presented.summary, rows=rows)


def _presented(
    settings: CertifySettings,
    rows: Mapping[str, list[CertificationRow]],
    sigma: float,
    extra: dict[str, Any],
    dim: int,
    report: Any = None,
) -> Presented:
    """A single model's ``metrics.json``, plot and result text (beside the sound record under a per-input sigma)."""
    summary = _summarize(settings, rows[STEM], sigma, extra, dim)
    curves = [Curve(f"{settings.sigma_mode} sigma", [r.radius for r in rows[STEM]], [r.correct for r in rows[STEM]])]
    if settings.sigma_mode != "fixed":
        fixed = _summarize(settings, rows[FIXED_STEM], sigma, {})
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
    title = f"{extra.get('method')} on {extra.get('dataset')} ({extra.get('arch')}), sigma={sigma}"
    if "norm" in summary:
        title += f", {settings.protocol.threat.describe()}"
    p = settings.protocol
    note = f"{len(rows[STEM])} images, n0={p.n0}, n={p.n}, alpha={p.alpha}, {settings.mode} CERTIFY"
    return Presented(summary, curves, title, note, format_summary(summary))


def _collect(directory: Path, stem: str, indices: list[int]) -> list[CertificationRow]:
    """Merge a record's shards and return its rows for ``indices``, in that order."""
    rows_by_idx = {row.idx: row for row in merge_records(directory, stem)}
    extra = sorted(set(rows_by_idx).difference(indices))
    if extra:
        log.warning("%s.tsv holds %d rows outside the requested subset; they are not summarised", stem, len(extra))
    return [rows_by_idx[i] for i in indices]


def _subset_record(settings: CertifySettings, indices: list[int], test_size: int) -> dict[str, Any]:
    subset = settings.subset
    return {
        "start": subset.start,
        "skip": subset.skip,
        "max_images": subset.max_images,
        "test_size": test_size,
        "digest": indices_digest(indices),
        "indices": indices,
    }


def _summarize(
    settings: CertifySettings, rows: list[CertificationRow], sigma: float, extra: dict[str, Any], dim: int = 0
) -> dict[str, Any]:
    """The metrics.json content of ``rows`` (the radius grid, in the certified norm, reaches the largest cap)."""
    protocol = settings.protocol
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


REREGISTER = (
    "delete it and rerun every shard: their rows are kept, so each registers again at once, certifies only what it "
    "has left, and the last to finish merges"
)


def _read_json(path: Path) -> dict[str, Any]:
    """``certify_shards.json``, refused in one line (with what to do) when damaged."""
    try:
        content = json.loads(path.read_text())
    except ValueError as error:
        raise DamagedFileError(f"{path} is damaged ({error}); {REREGISTER}") from None
    if not isinstance(content, dict) or not isinstance(content.get("shards"), dict):
        raise DamagedFileError(f"{path} is damaged (not what a shard stores); {REREGISTER}")
    return content


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
