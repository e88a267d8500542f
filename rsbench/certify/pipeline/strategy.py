"""What certifies the images of a run, as :class:`rsbench.certify.pipeline.certification.Certification` asks for it.

The pipeline is the run around the certificates (protocol, records, resume, shards, summary, cost, plot, progress);
a :class:`Strategy` is what it certifies: the smoothed base classifier of a
:class:`~rsbench.certify.pipeline.certification.Subject` (fixed or per-input sigma), or the router and experts of a
:class:`~rsbench.certify.pipeline.dual_run.DualSubject`. A strategy says which records a run writes and how each
certifies a group of images (:class:`RecordPlan`), what ``certify_protocol.json`` binds and what ``metrics.json`` adds;
how a run is summarised from its files alone (a merged sharded run) is chosen by
:class:`~rsbench.certify.pipeline.certification.Context`'s ``dual``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from rsbench.certify.algorithm.grid_noise import GridSmooth
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.certify.pipeline.plot import Curve
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.files import record_path

RowCertifier = Callable[[Tensor, list[int], list[int]], Iterator[tuple[int, CertificationRow]]]
"""``certify(images [B, C, H, W], their test indices, their labels)``: (position in the group, row), each row as
soon as its image is certified (its noise seeded by the certification seed and the test index alone)."""


@dataclass(frozen=True)
class RecordPlan:
    """One record a run writes: its file stem, its header and how a group of images gets its rows."""

    stem: str
    columns: tuple[str, ...]
    certify: RowCertifier


@dataclass(frozen=True)
class Presented:
    """A run's summary as written: ``metrics.json``'s content, the plot's curves, title and note, the result text."""

    summary: dict[str, Any]
    curves: list[Curve]
    title: str
    note: str
    text: str


class Strategy(Protocol):
    """What a :class:`~rsbench.certify.pipeline.certification.Certification` certifies (see the module docstring)."""

    def sigma(self, settings: CertifySettings) -> float:
        """The noise level the summary's grid and threat record stand at (a dual run: its largest expert's)."""
        ...

    def check(self, settings: CertifySettings) -> None:
        """Refuse (``ConfigError``) or warn about settings this subject cannot be certified with."""
        ...

    def meta(self, settings: CertifySettings) -> dict[str, Any]:
        """What identifies the subject in ``metrics.json`` (description, seed, weights' fingerprints)."""
        ...

    def stored_protocol(self, settings: CertifySettings, test_size: int) -> dict[str, Any]:
        """``certify_protocol.json``: everything the rows depend on; a resumed run must match it."""
        ...

    def extra(self, settings: CertifySettings, output_dir: Path) -> dict[str, Any]:
        """What ``metrics.json`` records besides the rows and :meth:`meta` (provenance, hyperparameters, ...)."""
        ...

    def dual(self, settings: CertifySettings, output_dir: Path) -> dict[str, Any] | None:
        """What a dual run's summary needs besides its rows (stored for a merge), ``None`` for a single model."""
        ...

    def device(self) -> torch.device:
        """Where it certifies (the environment ``metrics.json`` records)."""
        ...

    def records(self, settings: CertifySettings) -> AbstractContextManager[list[RecordPlan]]:
        """The records of a run, the sound one first, while the networks are prepared (channels-last, compiled)."""
        ...


def smooth_for(classifier: nn.Module, classes: int, sigma: float, settings: CertifySettings) -> Smooth:
    """``classifier`` smoothed at ``sigma`` with the settings' noise, norm, precision and memory format.

    Gaussian noise on the input grid (:class:`~rsbench.certify.algorithm.grid_noise.GridSmooth`) when
    ``certify.noise_grid`` is set (the settings refuse a grid for the other noises).
    """
    protocol, speed = settings.protocol, settings.speed
    precision, channels_last, norm = speed.precision, speed.channels_last, protocol.norm
    if protocol.noise_grid is not None:
        levels = protocol.noise_grid
        return GridSmooth(
            classifier, classes, sigma, levels=levels, precision=precision, channels_last=channels_last, norm=norm
        )
    return Smooth(
        classifier, classes, sigma, noise=protocol.noise, precision=precision, channels_last=channels_last, norm=norm
    )


PROVENANCE_PATHS = frozenset({"path", "weights", "file"})
"""The keys of a model's provenance that name a file or folder (``model.path``, ``members[i].path``, ...)."""


def recorded_provenance(provenance: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``provenance`` as ``metrics.json["model"]`` records it: each file named by :func:`rsbench.files.record_path`.

    Relative to the run folder ``folder`` when the file lies in it, else to the working directory, else absolute;
    nested records (ensemble members, a denoiser's classifier) alike. A checkpoint's ``signature`` is copied as the
    checkpoint stores it.
    """
    recorded: dict[str, Any] = {}
    for key, value in provenance.items():
        if key in PROVENANCE_PATHS and isinstance(value, str):
            recorded[key] = record_path(value, folder)
        elif key == "signature" or not isinstance(value, Mapping | list):
            recorded[key] = value
        elif isinstance(value, Mapping):
            recorded[key] = recorded_provenance(value, folder)
        else:
            recorded[key] = [recorded_provenance(v, folder) if isinstance(v, Mapping) else v for v in value]
    return recorded
