"""The certification settings, grouped by what they are, each group validated where it is defined.

- :class:`Protocol`: what every certificate depends on (CERTIFY's n0, n, alpha, the noise seed, sigma, the grid);
- :class:`Subset`: which test images are certified;
- :class:`Speed`: how the network is evaluated (batch size, packing, autocast, memory format, compilation);
- :class:`SequentialSchedule`: sequential CERTIFY's design, looks and radius cap (``certify.mode=sequential``);
- :class:`DataDependent`: data-dependent smoothing's sigma mode and per-input sigma search;
- :class:`~rsbench.certify.pipeline.sharding.Sharding`: which slice of the images this job certifies
  (``certify.shard``).

The user-facing config stays flat (``certify.n``, ``certify.skip``, ``certify.precision``, ... as the README
documents them); :meth:`CertifySettings.from_keys` sorts those keys into the groups. :data:`CertifyConfig`, the
structured config of the ``certify`` node, is derived from the groups' fields (their types and defaults), so a
field added to a group is a ``certify.<key>`` at once and a mistyped key fails when Hydra composes the config.
:data:`RESUMABLE` lists the settings a resumed run may change; every other one is part of what its rows depend on.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, make_dataclass, replace
from typing import Any, Literal, Optional

from scipy.stats import norm

from rsbench.certify.algorithm.caps import reported_cap, table_cap
from rsbench.certify.algorithm.checks import check_alpha, check_count, settings_error
from rsbench.certify.algorithm.data_dependent import SigmaSearch
from rsbench.certify.algorithm.designs import DESIGNS, Design, Goal, LookSchedule, make_design
from rsbench.certify.algorithm.groups import images_together
from rsbench.certify.algorithm.smooth import PRECISIONS, Precision
from rsbench.certify.algorithm.threat import ThreatModel
from rsbench.certify.pipeline.sharding import Sharding
from rsbench.certify.pipeline.subset import certification_indices
from rsbench.errors import ConfigError
from rsbench.noise import check_sigma

Mode = Literal["standard", "sequential"]
SigmaMode = Literal["fixed", "data_dependent", "memory"]
SIGMA_MODES: tuple[str, ...] = ("fixed", "data_dependent", "memory")


@dataclass(frozen=True)
class Protocol:
    """What every certificate depends on besides the model: rows certified under other values are not continued.

    Attributes:
        n0: selection samples per image.
        n: estimation samples per image (the most per image in sequential mode).
        alpha: failure probability of each certificate.
        seed: the certification seed; image i's noise streams derive from (seed, i), so results are reproducible
            and an interrupted run resumes with the numbers an uninterrupted one would give (same batch size).
        sigma: the certification noise level; ``None`` uses the model's training sigma.
        radius_step: the step of the radius grid in ``metrics.json`` (an l-infinity grid scales it by 1/sqrt(d):
            :meth:`rsbench.certify.algorithm.threat.ThreatModel.grid_step`).
        noise: the smoothing noise (``gaussian``, ``laplace``, ``uniform``) at per-coordinate standard deviation sigma.
        norm: the norm certified (``l1``, ``l2``, ``linf``); ``None``: the noise's own
            (:mod:`rsbench.certify.algorithm.threat`).
        noise_grid: draw the noise on the input grid k / noise_grid (255: 8-bit images), sound in floating point
            (:mod:`rsbench.certify.algorithm.grid_noise`, Voráček and Hein 2023); ``None``: float32 Gaussian noise.
    """

    n0: int = 100
    n: int = 100_000
    alpha: float = 0.001
    seed: int = 0
    sigma: float | None = None
    radius_step: float = 0.25
    noise: str = "gaussian"
    norm: str | None = None
    noise_grid: int | None = None

    def __post_init__(self) -> None:
        check_count(n0=self.n0, n=self.n)
        check_alpha(self.alpha)
        if self.sigma is not None:
            check_sigma(self.sigma, "certify.sigma")
        if self.radius_step <= 0:
            raise ValueError(f"certify.radius_step must be > 0, got {self.radius_step}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"certify.seed must be an integer >= 0, got {self.seed!r}")
        if self.noise_grid is not None:
            check_count(noise_grid=self.noise_grid)
        if self.noise_grid is not None and self.noise != "gaussian":
            raise ValueError(
                f"certify.noise_grid={self.noise_grid} draws Gaussian noise on the input grid; "
                f"certify.noise={self.noise!r} has no grid version (use certify.noise_grid=null)"
            )
        ThreatModel(self.noise, self.norm)  # validates both, naming the certify key

    @property
    def threat(self) -> ThreatModel:
        """The threat model certified: the norm and the smoothing noise."""
        return ThreatModel(self.noise, self.norm)


@dataclass(frozen=True)
class Subset:
    """The certified test images: ``start, start + skip, ...``, at most ``max_images`` of them (a count).

    Attributes:
        start: the first test index certified.
        skip: certify every ``skip``-th test image.
        max_images: certify at most this many images (``None``: all selected).
    """

    start: int = 0
    skip: int = 1
    max_images: int | None = None

    def __post_init__(self) -> None:
        self.indices(1)  # validates the arguments

    def indices(self, num_images: int) -> list[int]:
        """The dataset indices certified out of ``num_images``."""
        return certification_indices(num_images, self.start, self.skip, self.max_images)


@dataclass(frozen=True)
class Speed:
    """How the network is evaluated. Each option changes the classifier as evaluated, never the noise's law.

    Attributes:
        batch_size: noisy samples per forward pass.
        precision: ``fp32``, or ``bf16``/``fp16`` autocast of the network (noise stays fp32; the certificate holds
            for the network as evaluated).
        channels_last: run the network in channels-last memory format. The noise keeps its distribution, but a
            seed then places its samples differently, and the convolutions may round differently: rows are
            reproducible only under the same setting.
        compile: ``torch.compile`` the network before certifying (a one-off compile cost; fused kernels may round
            differently from eager mode, so the certified classifier is the compiled one).
        images_per_batch: images certified together in standard mode, their samples packed into full forward
            passes (each image keeps its own noise streams and its own certificate); ``None`` packs
            ``max(1, batch_size // min(n0, n))`` so that the n0 selection samples fill the batch too.
    """

    batch_size: int = 1000
    precision: Precision = "fp32"
    channels_last: bool = False
    compile: bool = False
    images_per_batch: int | None = None

    def __post_init__(self) -> None:
        check_count(batch_size=self.batch_size)
        if self.precision not in PRECISIONS:
            raise ValueError(f"certify.precision must be one of {list(PRECISIONS)}, got {self.precision!r}")
        if self.images_per_batch is not None and self.images_per_batch < 1:
            raise ValueError(f"certify.images_per_batch must be >= 1 or null (auto), got {self.images_per_batch}")

    def images_together(self, protocol: Protocol) -> int:
        """How many images are certified together under ``protocol`` (``groups.images_together``)."""
        return images_together(self.batch_size, protocol.n0, protocol.n, self.images_per_batch)


@dataclass(frozen=True)
class SequentialSchedule:
    """Sequential CERTIFY (see :mod:`rsbench.certify.algorithm.sequential`): its design, looks and radius cap.

    Attributes:
        design: ``informed`` (the default: a betting confidence sequence whose prior the selection votes update,
            futility by the predictive probability), ``betting`` (the same with a fixed prior and the sequence's own
            futility rule), ``looks`` (Clopper-Pearson at alpha / S over S looks, rsbench's first design) or
            ``adaptive`` (Horváth et al.: one target radius, the cap); see :mod:`rsbench.certify.algorithm.designs`.
        radius_cap: the largest radius reported; ``None``: the largest radius of the grid up to 2.5 (the papers'
            tables) that n of n votes can certify, e.g. 0.75 / 1.75 / 2.5 at sigma 0.25 / 0.5 / 1.0.
        first_look: estimation samples before the first look (``None``: the design's, 100 for ``informed`` and
            ``betting``, 1,000 for ``looks``; ``adaptive`` has stages of n/100, n/10 and 5n/4 samples instead).
        growth: each look's cumulative sample count is the previous one times ``growth`` (``None``: the design's,
            1.05 for ``informed``, 1.1 for ``betting``, 2 for ``looks``).
        radius_target: decide this one radius only (certified at it, or not), not the grid; ``adaptive`` always
            decides one radius: this one, or the radius cap.
    """

    design: str = "informed"
    radius_cap: float | None = None
    first_look: int | None = None
    growth: float | None = None
    radius_target: float | None = None

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise ValueError(f"certify.design must be one of {sorted(DESIGNS)}, got {self.design!r}")
        if self.first_look is not None:
            check_count(first_look=self.first_look)
        if self.radius_cap is not None and self.radius_cap <= 0:
            raise ValueError(f"certify.radius_cap must be > 0 or null (the table's largest), got {self.radius_cap!r}")
        if self.growth is not None and self.growth <= 1:
            raise ValueError(f"certify.growth must be > 1 or null (the design's), got {self.growth!r}")
        if self.radius_target is not None and self.radius_target < 0:
            raise ValueError(f"certify.radius_target must be >= 0 or null (the grid), got {self.radius_target!r}")
        if self.design == "adaptive" and (self.first_look, self.growth) != (None, None):
            raise ValueError("certify.first_look and certify.growth do not apply to design=adaptive (fixed stages)")

    def looks(self, n: int) -> LookSchedule:
        """The look schedule of the ``looks`` design up to ``n`` estimation samples."""
        return LookSchedule(min(self.first_look or 1000, n), self.growth or 2.0, n)

    def make(self, sigma: float, protocol: Protocol) -> Design:
        """The design deciding the grid 0, radius_step, ... up to the radius cap (or the one radius target)."""
        if self.radius_target is not None:
            goal = Goal(sigma, protocol.alpha, protocol.n, (self.radius_target,))
        else:
            cap = self.radius_cap if self.radius_cap is not None else default_radius_cap(sigma, protocol)
            goal = Goal.grid(sigma, protocol.alpha, protocol.n, cap, protocol.radius_step)
        looks = {"first_look": self.first_look, "growth": self.growth}
        return make_design(self.design, goal, **{k: v for k, v in looks.items() if v is not None})

    def cap(self, sigma: float, protocol: Protocol) -> float:
        """The largest radius reported at ``sigma``: the configured cap, or the largest one n votes can reach."""
        return self.make(sigma, protocol).cap


def default_radius_cap(sigma: float, protocol: Protocol) -> float:
    """The largest grid radius up to 2.5 below the fixed-n cap (:func:`~rsbench.certify.algorithm.caps.table_cap`)."""
    return table_cap(sigma, protocol.n, protocol.alpha, protocol.radius_step)


@dataclass(frozen=True)
class DataDependent:
    """Data-dependent smoothing (DDRS) certificates, reported beside the sound fixed-sigma ones.

    Attributes:
        mode: ``data_dependent`` (optimise sigma per input, then CERTIFY at it, as the DDRS paper; not sound) or
            ``memory`` (those certificates replayed through DDRS's memory in test-index order; order-dependent).
        search: the per-input sigma search.
    """

    mode: Literal["data_dependent", "memory"]
    search: SigmaSearch

    def __post_init__(self) -> None:
        if self.mode not in ("data_dependent", "memory"):
            raise ValueError(f"certify.sigma_mode must be one of {list(SIGMA_MODES)}, got {self.mode!r}")


# Each flat config key -> (group, field). The groups' own names for the sigma search differ from the keys.
_GROUPS: dict[str, type] = {
    "protocol": Protocol,
    "subset": Subset,
    "speed": Speed,
    "sequential": SequentialSchedule,
    "sigma_search": SigmaSearch,
    "sharding": Sharding,
}
_RENAMED = {
    "sigma_iters": ("sigma_search", "iterations"),
    "sigma_lr": ("sigma_search", "lr"),
    "sigma_samples": ("sigma_search", "samples"),
    "sigma_init": ("sigma_search", "init"),
    "sigma_objective": ("sigma_search", "objective"),
}
KEYS: dict[str, tuple[str, str]] = {
    **{f.name: (group, f.name) for group, cls in _GROUPS.items() if group != "sigma_search" for f in fields(cls)},
    **_RENAMED,
}
CHOICES: dict[str, str] = {"mode": "standard", "sigma_mode": "fixed"}  # the two keys that choose groups, and defaults
SWITCHES: dict[str, tuple[Any, Any]] = {  # certify.* keys that are not settings: what the rows depend on
    "enabled": (bool, True),
    "merge_dir": (Optional[str], None),  # noqa: UP045 (OmegaConf reads typing.Optional)
}
RESUMABLE: tuple[str, ...] = ("max_images", "batch_size", "images_per_batch")
"""The settings a resumed run may change: how many images (certify more later) and how they are batched. Every other
setting is part of the protocol its rows were certified under (``certify_protocol.json``, ``rsbench.runs.resume``)."""


@dataclass(frozen=True)
class CertifySettings:
    """Everything certification is configured by, in its groups.

    Attributes:
        protocol: n0, n, alpha, seed, sigma, radius grid.
        subset: the certified test images.
        speed: batch size, packing, precision, memory format, compilation.
        sequential: sequential CERTIFY's schedule (``certify.mode=sequential``), or ``None`` for Cohen et al.'s
            fixed-n CERTIFY.
        data_dependent: per-input sigma certificates to report beside the fixed-sigma ones, or ``None``.
        sharding: which slice of the selected images this job certifies (all of them unless sharded).
    """

    protocol: Protocol = Protocol()
    subset: Subset = Subset()
    speed: Speed = Speed()
    sequential: SequentialSchedule | None = None
    data_dependent: DataDependent | None = None
    sharding: Sharding = field(default_factory=Sharding)

    def __post_init__(self) -> None:
        if self.data_dependent is not None and self.sequential is not None:
            raise ValueError(
                f"certify.sigma_mode={self.data_dependent.mode} runs standard CERTIFY at each sigma: set mode=standard"
            )
        threat = self.protocol.threat
        if not threat.is_default and (self.sequential is not None or self.data_dependent is not None):
            what = f"mode={self.mode}" if self.sequential is not None else f"sigma_mode={self.sigma_mode}"
            raise ValueError(
                f"certify.{what} certifies the Gaussian l2 radius only, not {threat.describe()}: "
                "use certify.mode=standard and certify.sigma_mode=fixed"
            )
        if self.data_dependent is not None and self.protocol.noise_grid is not None:
            raise ValueError(f"certify.noise_grid={self.protocol.noise_grid} needs sigma_mode=fixed")
        if self.sharding.sharded and self.sigma_mode == "memory":
            raise ValueError(
                f"certify.sigma_mode=memory replays every certificate through one memory in test-index order, so it "
                f"cannot be split into certify.num_shards={self.sharding.num_shards} jobs: certify it in one job "
                "(certify.num_shards=1), or shard sigma_mode=data_dependent"
            )

    @property
    def mode(self) -> Mode:
        """``standard`` or ``sequential``."""
        return "standard" if self.sequential is None else "sequential"

    @property
    def sigma_mode(self) -> SigmaMode:
        """``fixed``, ``data_dependent`` or ``memory``."""
        return "fixed" if self.data_dependent is None else self.data_dependent.mode

    def design(
        self, sigma: float, *, n0: int | None = None, n: int | None = None, alpha: float | None = None
    ) -> Design | None:
        """Sequential CERTIFY's design at ``sigma`` (``None`` in standard mode: fixed-n CERTIFY).

        For the protocol as configured, or with ``n0``, ``n`` and ``alpha`` where given (a dual run's router certifies
        with its own samples, at beta).
        """
        if self.sequential is None:
            return None
        protocol = self.protocol
        changed = replace(protocol, n0=n0 or protocol.n0, n=n or protocol.n, alpha=alpha or protocol.alpha)
        return self.sequential.make(sigma, changed)

    def cap(self, sigma: float, dim: int = 0) -> float:
        """The largest radius reported: the fixed-n cap, or in sequential mode the schedule's radius cap.

        Args:
            sigma: the noise level.
            dim: the input dimension (C * H * W), needed by the l-infinity certificates and norm conversions.
        """
        protocol = self.protocol
        design_cap = self.sequential.cap(sigma, protocol) if self.sequential is not None else None
        return reported_cap(sigma, protocol.n, protocol.alpha, protocol.threat, dim, design_cap)

    def grid_step(self, dim: int) -> float:
        """The step of the certified-accuracy grid in the certified norm (``radius_step`` unless l-infinity)."""
        return self.protocol.threat.grid_step(self.protocol.radius_step, dim)

    def check_reachable(self, sigma: float) -> None:
        """Refuse a sequential ``certify.radius_cap`` (or ``radius_target``) that no image can be certified up to.

        Sampling stops early only once an image is decided up to the cap; the most any image reaches is the radius
        of n right votes out of n under the design's bound
        (:attr:`rsbench.certify.algorithm.designs.Design.unreachable`). A cap beyond it makes every confident image draw
        all n samples, so the mode saves nothing. The default cap (null) is the largest radius of the grid that can be
        reached, so it is never refused.

        Raises:
            ConfigError: naming the cap, the most that can be certified, and what to choose instead.
        """
        schedule = self.sequential
        if schedule is None or (schedule.radius_cap is None and schedule.radius_target is None):
            return
        design = schedule.make(sigma, self.protocol)
        if not design.unreachable:
            return
        key = "radius_target" if schedule.radius_target is not None else "radius_cap"
        most = sigma * float(norm.ppf(design.best_lower()))
        raise ConfigError(
            f"certify.{key}={design.unreachable[-1]:g} cannot be reached at sigma={sigma:g} with "
            f"certify.n={self.protocol.n} and certify.alpha={self.protocol.alpha:g}: the most sequential CERTIFY "
            f"(design={design.name}) can certify there is {most:.3f} (all {self.protocol.n} votes right), so every "
            f"image would draw all n samples and nothing would be saved; choose certify.{key} <= "
            f"{math.floor(most * 1000) / 1000:g} (or certify.radius_cap=null: the largest reachable radius of the grid)"
        )

    @classmethod
    def from_keys(cls, mode: Mode = "standard", sigma_mode: SigmaMode = "fixed", **keys: Any) -> CertifySettings:
        """Group the flat ``certify.*`` config keys (``n0``, ``n``, ``skip``, ``precision``, ``sigma_iters``, ...).

        Args:
            mode: ``standard`` (Cohen et al.'s fixed-n CERTIFY) or ``sequential``; the sequential keys
                (``design``, ``radius_cap``, ``radius_target``, ``first_look``, ``growth``) apply only to the latter.
            sigma_mode: ``fixed`` (sound, the default), ``data_dependent`` or ``memory``; the sigma-search keys
                (``sigma_iters``, ``sigma_lr``, ``sigma_samples``, ``sigma_init``, ``sigma_objective``) apply only
                to the latter two.
            keys: the other flat keys, each one a field of a group (see :data:`KEYS`).

        Raises:
            ValueError: an unknown key, or a value its group refuses (the message names the ``certify.`` key).
        """
        unknown = sorted(set(keys).difference(KEYS))
        if unknown:
            raise ValueError(f"unknown certify keys {unknown}; allowed: {sorted([*KEYS, 'mode', 'sigma_mode'])}")
        if mode not in ("standard", "sequential"):
            raise ValueError(f"certify.mode must be 'standard' or 'sequential', got {mode!r}")
        if sigma_mode not in SIGMA_MODES:
            raise ValueError(f"certify.sigma_mode must be one of {list(SIGMA_MODES)}, got {sigma_mode!r}")
        grouped: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
        for key, value in keys.items():
            group, name = KEYS[key]
            grouped[group][name] = value
        schedule = SequentialSchedule(**grouped["sequential"])  # validated whichever mode is chosen
        search = SigmaSearch(**grouped["sigma_search"])
        return cls(
            protocol=Protocol(**grouped["protocol"]),
            subset=Subset(**grouped["subset"]),
            speed=Speed(**grouped["speed"]),
            sequential=schedule if mode == "sequential" else None,
            data_dependent=DataDependent(sigma_mode, search) if sigma_mode != "fixed" else None,
            sharding=Sharding(**grouped["sharding"]),
        )

    def to_keys(self) -> dict[str, Any]:
        """The flat ``certify.*`` keys of these settings: ``CertifySettings.from_keys(**s.to_keys()) == s``.

        Keys of a group the settings do not use (the sequential ones in standard mode, the sigma search at a fixed
        sigma) take their defaults.
        """
        groups: dict[str, Any] = {
            "protocol": self.protocol,
            "subset": self.subset,
            "speed": self.speed,
            "sequential": self.sequential or SequentialSchedule(),
            "sigma_search": self.data_dependent.search if self.data_dependent is not None else SigmaSearch(),
            "sharding": self.sharding,
        }
        keys: dict[str, Any] = {"mode": self.mode, "sigma_mode": self.sigma_mode}
        for key, (group, name) in KEYS.items():
            keys[key] = getattr(groups[group], name)
        return keys

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> CertifySettings:
        """The settings of a composed ``certify`` node (its flat keys; ``enabled`` and other switches are not settings).

        Raises:
            ConfigError: an unknown key or a value a group refuses, named as ``certify.<key>``.
        """
        keys = {str(key): value for key, value in node.items() if key not in SWITCHES}
        try:
            return cls.from_keys(**keys)
        except ValueError as error:
            raise settings_error(error) from None

    def with_defaults(self, defaults: Mapping[str, Any]) -> CertifySettings:
        """These settings with the sigma search's unset (null) keys taken from ``defaults``, then from the paper's.

        ``defaults`` are the certified model's method's (``method.certify_defaults`` in its config, e.g. the DDRS
        paper's n = 8 for MACER models); what neither sets is the DDRS paper's "unless stated otherwise": n = 1 and
        the ``radius`` objective. Fixed-sigma settings are returned unchanged.
        """
        if self.data_dependent is None:
            return self
        search = self.data_dependent.search.with_defaults(
            samples=defaults.get("sigma_samples"), objective=defaults.get("sigma_objective")
        )
        return replace(self, data_dependent=replace(self.data_dependent, search=search))

    def protocol_record(self, sigma: float, test_size: int) -> dict[str, Any]:
        """Everything the rows depend on besides the model, as stored in ``certify_protocol.json``."""
        record: dict[str, Any] = {
            "n0": self.protocol.n0,
            "n": self.protocol.n,
            "alpha": self.protocol.alpha,
            "sigma": sigma,
            "start": self.subset.start,
            "skip": self.subset.skip,
            "max_images": self.subset.max_images,
            "test_size": test_size,
            "mode": self.mode,
            "precision": self.speed.precision,
            "channels_last": self.speed.channels_last,
            "compile": self.speed.compile,
            **self.protocol.threat.protocol_fields(),
        }
        if self.protocol.noise_grid is not None:
            record["noise_grid"] = self.protocol.noise_grid
        if self.sequential is not None:
            design = self.sequential.make(sigma, self.protocol)
            record.update(radius_cap=design.cap, looks=design.looks(), radius_step=self.protocol.radius_step)
            if design.name != "looks" or self.sequential.radius_target is not None:
                record.update(design.parameters())  # (a run of the first design, #6, keeps its stored protocol)
        if self.data_dependent is not None:
            record.update(sigma_mode=self.sigma_mode, sigma_search=vars(self.data_dependent.search))
        if self.sharding.sharded:  # (its rows are spread over shard files: another count would slice them otherwise)
            record["num_shards"] = self.sharding.num_shards
        return record


def _config_type(hint: Any) -> Any:
    """The type OmegaConf checks for an annotation: a ``Literal``'s values' type, ``Optional[X]`` for ``X | None``."""
    if typing.get_origin(hint) is Literal:
        return type(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(inner) == 1 and len(inner) < len(typing.get_args(hint)):
            return Optional[_config_type(inner[0])]  # noqa: UP045 (OmegaConf reads typing.Optional)
    return hint


def _schema_fields() -> list[tuple[str, Any, Any]]:
    """``(key, type, field)`` of each flat ``certify.*`` key: every group field (:data:`KEYS`), choice and switch."""
    found: list[tuple[str, Any, Any]] = []
    by_group = {group: {f.name: f for f in fields(cls)} for group, cls in _GROUPS.items()}
    hints = {group: typing.get_type_hints(cls) for group, cls in _GROUPS.items()}
    for key, (group, name) in KEYS.items():
        declared = by_group[group][name]
        default = field(default=declared.default, default_factory=declared.default_factory)  # one is MISSING
        found.append((key, _config_type(hints[group][name]), default))
    found += [(key, str, field(default=default)) for key, default in CHOICES.items()]
    found += [(key, kind, field(default=default)) for key, (kind, default) in SWITCHES.items()]
    return found


CertifyConfig = make_dataclass("CertifyConfig", _schema_fields(), frozen=False)
"""The structured config of the ``certify`` node: one field per flat key, typed and defaulted as its group's field.

Hydra merges ``conf/certify/*.yaml`` onto it (``rsbench.runs.schemas`` registers it), so an unknown key or a value of
the wrong type fails when the config is composed; the groups' own checks (ranges, choices) run when the settings are
built (:meth:`CertifySettings.from_config`)."""
CertifyConfig.__module__ = __name__  # picklable by reference (Hydra launchers send composed configs to other processes)
