"""Dual randomized smoothing as a subject of the one certification pipeline (:mod:`.certification`).

A :class:`DualSubject` is a router and its experts (:mod:`rsbench.certify.algorithm.dual`); ``Certification.run``
certifies it like any subject, so a dual run gets the pipeline's protocol check, resume, shards and their merge,
progress, cost, summary, result line and plot. Its :class:`DualStrategy` certifies a group of images with
:class:`~rsbench.certify.algorithm.dual.DualSmooth` (the router at ``beta`` with ``router_n0`` / ``router_n`` samples,
the routed expert at ``certify.alpha``, fixed-n or sequential), or takes the routed expert's certificates from its own
certification (``expert_records``, checked by the caller: :mod:`rsbench.certify.pipeline.dual_checks`). Its
``certify_protocol.json`` is the one dual runs have always stored (``kind: dual_rs``; a sharded run adds
``num_shards``), and its ``metrics.json`` holds :func:`~rsbench.certify.pipeline.dual_records.summarize_dual`'s summary
with the pipeline's subset, environment and cost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from rsbench.archs.classifier import weights_fingerprint
from rsbench.certify.algorithm.caps import fixed_n_cap
from rsbench.certify.algorithm.dual import DualSmooth
from rsbench.certify.algorithm.groups import Certifier, certifier
from rsbench.certify.algorithm.seeding import derive_seed
from rsbench.certify.algorithm.smooth import Certificate, Smooth, module_device
from rsbench.certify.pipeline.dual_records import DUAL_RECORD, dual_row, format_dual_summary, summarize_dual
from rsbench.certify.pipeline.plot import Curve
from rsbench.certify.pipeline.records import STEM, read_records
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.strategy import Presented, RecordPlan, recorded_provenance, smooth_for
from rsbench.errors import ConfigError
from rsbench.files import record_path

REUSE_NOTE = "expert rows reused from expert_records keep the time of their own certification"
ReusedCertificates = Callable[[int], Mapping[int, Certificate]]
"""``read(k)``: expert k's certificates by test index, from its own certification of the same images."""


class Model(Protocol):
    """A network of a dual subject: the router (``num_classes`` = K) or an expert (e.g. a ``Subject``)."""

    @property
    def classifier(self) -> nn.Module: ...  # noqa: D102

    @property
    def num_classes(self) -> int: ...  # noqa: D102

    @property
    def sigma(self) -> float: ...  # noqa: D102

    @property
    def description(self) -> Mapping[str, Any]: ...  # noqa: D102

    @property
    def provenance(self) -> Mapping[str, Any]: ...  # noqa: D102


@dataclass(frozen=True)
class DualSubject:
    """A router over K experts, certified as one dual classifier (see the module docstring).

    Attributes:
        router: the router; its ``num_classes`` is K, its ``sigma`` the router's noise level.
        experts: the K experts, in the order of the router's outputs (increasing sigma), on the router's device.
        beta: the router's failure probability (each certificate holds at ``certify.alpha`` + beta).
        router_n0: the router's selection samples.
        router_n: the router's estimation samples (the most, in sequential mode).
        description: what identifies the run (``dataset``).
        expert_records: the experts' own certifications whose rows are reused (folders, one per expert), or none.
        reused: reads those rows (checked against this run's protocol by its maker), ``None`` without records.
        certify_defaults: certification settings the subject asks for where the settings leave them unset.
    """

    router: Model
    experts: Sequence[Model]
    beta: float
    router_n0: int
    router_n: int
    description: Mapping[str, Any] = field(default_factory=dict)
    expert_records: Sequence[str] = ()
    reused: ReusedCertificates | None = None
    certify_defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sigmas(self) -> list[float]:
        """The experts' noise levels, in router order."""
        return [float(e.sigma) for e in self.experts]

    def strategy(self) -> DualStrategy:
        """How the pipeline certifies it."""
        return DualStrategy(self)


@dataclass(frozen=True)
class DualStrategy:
    """The :class:`~rsbench.certify.pipeline.strategy.Strategy` of a :class:`DualSubject`."""

    subject: DualSubject

    def sigma(self, settings: CertifySettings) -> float:
        """The largest expert sigma (where a dual result stands in a table)."""
        return max(self.subject.sigmas)

    def check(self, settings: CertifySettings) -> None:
        """Refuse a per-input sigma mode or a certification sigma: each expert is certified at its own sigma."""
        if settings.sigma_mode != "fixed":
            raise ConfigError(
                "stage=certify: dual smoothing certifies each expert at its own sigma (certify.sigma_mode=fixed)"
            )
        if settings.protocol.sigma is not None:
            raise ConfigError(
                f"certify.sigma={settings.protocol.sigma}: dual smoothing certifies each expert at its own sigma and "
                "the router at router.sigma; leave certify.sigma unset"
            )

    def meta(self, settings: CertifySettings) -> dict[str, Any]:
        """The dataset, the router's arch and the certification seed."""
        return {
            "dataset": self.subject.description.get("dataset"),
            "arch": self.subject.router.description.get("arch"),
            "seed": settings.protocol.seed,
        }

    def stored_protocol(self, settings: CertifySettings, test_size: int) -> dict[str, Any]:
        """The dual protocol: both budgets and sample sizes, every network's fingerprint, the subset, the speed."""
        subject, protocol, subset = self.subject, settings.protocol, settings.subset
        return {
            "kind": "dual_rs",
            "dataset": subject.description.get("dataset"),
            "seed": protocol.seed,
            "n0": protocol.n0,
            "n": protocol.n,
            "alpha": protocol.alpha,
            "beta": subject.beta,
            "failure_probability": protocol.alpha + subject.beta,
            "router_n0": subject.router_n0,
            "router_n": subject.router_n,
            "mode": settings.mode,
            **({"design": settings.sequential.design} if settings.sequential is not None else {}),
            "sigmas": subject.sigmas,
            "router_sigma": subject.router.sigma,
            "router_fingerprint": weights_fingerprint(subject.router.classifier),
            **({"router_denoiser": denoiser} if (denoiser := subject.router.description.get("denoiser")) else {}),
            "expert_fingerprints": [weights_fingerprint(e.classifier) for e in subject.experts],
            "start": subset.start,
            "skip": subset.skip,
            "max_images": subset.max_images,
            "test_size": test_size,
            "precision": settings.speed.precision,
            "channels_last": settings.speed.channels_last,
            **({"noise_grid": protocol.noise_grid} if protocol.noise_grid is not None else {}),
            **({"num_shards": settings.sharding.num_shards} if settings.sharding.sharded else {}),
        }

    def extra(self, settings: CertifySettings, output_dir: Path) -> dict[str, Any]:
        """The protocol's sample sizes, the router's and experts' provenance, the reused records and the caps."""
        subject, protocol = self.subject, settings.protocol
        router = subject.router
        return {
            "n0": protocol.n0,
            "n": protocol.n,
            "router_n0": subject.router_n0,
            "router_n": subject.router_n,
            "mode": settings.mode,
            **({"design": settings.sequential.design} if settings.sequential is not None else {}),
            "router": {
                **dict(router.description),
                "provenance": recorded_provenance(router.provenance, output_dir),
                "sigma": router.sigma,
            },
            "experts": [recorded_provenance(e.provenance, output_dir) for e in subject.experts],
            "expert_records": [record_path(f, output_dir) for f in subject.expert_records] or None,
            **({"noise_grid": protocol.noise_grid} if protocol.noise_grid is not None else {}),
            "radius_caps": {
                "router": self._router_cap(settings),
                "experts": {
                    repr(s): cap_for(settings, s, protocol.n0, protocol.n, protocol.alpha) for s in subject.sigmas
                },
            },
        }

    def dual(self, settings: CertifySettings, output_dir: Path) -> dict[str, Any]:
        """What the summary needs (:func:`dual_presented`), stored for a merge from the files alone."""
        protocol = settings.protocol
        expert_cap = max(cap_for(settings, s, protocol.n0, protocol.n, protocol.alpha) for s in self.subject.sigmas)
        return {
            "sigmas": self.subject.sigmas,
            "router_sigma": float(self.subject.router.sigma),
            "beta": self.subject.beta,
            "router_n0": self.subject.router_n0,
            "cap": min(self._router_cap(settings), expert_cap),
            "expert_records": [str(Path(f).resolve()) for f in self.subject.expert_records],
        }

    def device(self) -> torch.device:
        """The router's device."""
        return module_device(self.subject.router.classifier) or torch.device("cpu")

    @contextlib.contextmanager
    def records(self, settings: CertifySettings) -> Iterator[list[RecordPlan]]:
        """One record, ``certify.tsv``, of dual rows."""
        subject, protocol = self.subject, settings.protocol
        router = smoothed(subject.router.classifier, subject.router.num_classes, subject.router.sigma, settings)
        experts = [smoothed(e.classifier, e.num_classes, e.sigma, settings) for e in subject.experts]
        dual = DualSmooth(
            router,
            experts,
            certifier_for(settings, subject.router_n0, subject.router_n),
            certifier_for(settings, protocol.n0, protocol.n),
        )
        reused = subject.reused

        def certify(xs: Tensor, group: list[int], labels: list[int]) -> Iterator[tuple[int, Any]]:
            seeds = [derive_seed(protocol.seed, i) for i in group]
            given = None if reused is None else _reuse(reused, group)
            certificates = dual.certify_batch(xs, seeds, protocol.alpha, subject.beta, expert_certificates=given)
            for position, cert in enumerate(certificates):
                yield position, dual_row(group[position], labels[position], cert)

        yield [RecordPlan(STEM, DUAL_RECORD, certify)]

    def _router_cap(self, settings: CertifySettings) -> float:
        subject = self.subject
        return cap_for(settings, subject.router.sigma, subject.router_n0, subject.router_n, subject.beta)


def smoothed(classifier: nn.Module, classes: int, sigma: float, settings: CertifySettings) -> Smooth:
    """``classifier`` in evaluation mode (channels-last when asked), smoothed at ``sigma`` with the settings' noise.

    ``certify.noise_grid`` draws the Gaussian noise on the input grid for the router and every expert alike; other
    threat models are refused before (:func:`rsbench.certify.pipeline.dual_checks.check_dual_threat`).
    """
    classifier = classifier.eval()
    if settings.speed.channels_last:
        classifier.to(memory_format=torch.channels_last)
    return smooth_for(classifier, classes, sigma, settings)


def _reuse(read: ReusedCertificates, group: list[int]) -> Callable[[int, list[int]], list[Certificate]]:
    """The expert certificates of ``group``'s images at ``positions``, read from the experts' own records."""
    return lambda k, positions: [read(k)[group[p]] for p in positions]


def certifier_for(settings: CertifySettings, n0: int, n: int) -> Certifier:
    """Fixed-n CERTIFY with (n0, n), or the sequential design of ``certify.*`` up to n samples."""
    return certifier(
        n0, n, settings.speed.batch_size, lambda sigma, alpha: settings.design(sigma, n0=n0, n=n, alpha=alpha)
    )


def cap_for(settings: CertifySettings, sigma: float, n0: int, n: int, alpha: float) -> float:
    """The largest radius reported at ``sigma`` with (n0, n, alpha): fixed-n's cap, or the sequential design's."""
    design = settings.design(sigma, n0=n0, n=n, alpha=alpha)
    return fixed_n_cap(sigma, n, alpha) if design is None else design.cap


def dual_presented(
    settings: CertifySettings,
    dual: Mapping[str, Any],
    rows: Sequence[Any],
    indices: Sequence[int],
    extra: dict[str, Any],
) -> Presented:
    """A dual run's ``metrics.json``, its plot (beside each reused expert alone) and its result text.

    Args:
        settings: the certification settings.
        dual: what :meth:`DualStrategy.dual` stored.
        rows: the dual rows, in the subset's order.
        indices: the certified test indices.
        extra: the pipeline's fields (subset, environment, cost, the strategy's extras).
    """
    protocol = settings.protocol
    if dual["expert_records"]:
        extra["cost"] = {**extra["cost"], "note": REUSE_NOTE}
    sigmas, router_sigma, cap = dual["sigmas"], dual["router_sigma"], dual["cap"]
    summary = summarize_dual(
        rows, sigmas=sigmas, router_sigma=router_sigma, cap=cap, radius_step=protocol.radius_step, extra=extra
    )
    curves = [Curve("dual RS", [r.radius for r in rows], [r.correct for r in rows])]
    for k, folder in enumerate(dual["expert_records"]):
        own = read_records(Path(folder))
        curves.append(
            Curve(
                f"sigma={sigmas[k]} alone",
                [own[i].radius for i in indices],
                [own[i].predict == own[i].label for i in indices],
                dashed=True,
            )
        )
    title = f"dual RS on {extra.get('dataset')}: router at sigma={router_sigma}, experts at {sigmas}"
    note = f"{len(rows)} images, alpha={protocol.alpha} + beta={dual['beta']}, {settings.mode} CERTIFY"
    text = f"{format_dual_summary(summary)}\nchosen sigmas {summary['chosen_sigma']}"
    return Presented(summary, curves, title, note, text)
