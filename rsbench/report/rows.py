"""Group results into the rows of a table: one row per setting, its runs differing only in ``seed``.

A setting is the threat model (norm and noise: rows of two threat models are never merged, compared or paired), the
method (with its variant: sound/unsound, sequential), dataset, architecture, sigma, the method's
recorded hyperparameters and the value of every key any run overrode on the command line (``.hydra/overrides.yaml``;
the seed excepted). A run whose ``metrics.json`` predates recorded hyperparameters joins the one recorded setting its
own ``.hydra/config.yaml`` agrees with. Runs of one setting must have been certified alike (n0, n, alpha, mode, the
same images); otherwise the report stops and names them, since averaging them would mix two experiments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from rsbench.report.load import ReportError, Result, canonical
from rsbench.report.stats import Estimate, MeanInterval, mean_interval, proportion_interval

DEDICATED = {"method", "dataset", "arch", "sigma", "seed"}  # keys with their own column, or the one rows average
PROTOCOL_KEYS = ("n0", "n", "alpha", "mode", "network", "test_size", "subset")
HParams = tuple[tuple[str, str], ...]  # a method's hyperparameters as sorted (name, canonical value) pairs


@dataclass(frozen=True)
class Row:
    """One setting: its results, one per seed, certified on the same images under the same protocol."""

    results: tuple[Result, ...]
    settings: tuple[tuple[str, str], ...]  # (key, value) for every override key whose value differs between rows

    @property
    def first(self) -> Result:
        """The first result (they agree on everything but the seed and the weights)."""
        return self.results[0]

    @property
    def label(self) -> str:
        """The method with its variant."""
        return self.first.label

    @property
    def threat(self) -> str:
        """The threat model of the row, e.g. ``l1 (laplace noise)``."""
        return self.first.threat

    @property
    def seeds(self) -> list[int | None]:
        """The training seeds of the runs."""
        return [r.seed for r in self.results]

    @property
    def images(self) -> tuple[int, ...]:
        """The certified image indices."""
        return self.first.images

    @property
    def stated_settings(self) -> tuple[tuple[str, str], ...]:
        """The settings this row sets (``-``: a key only other rows' methods have, left out)."""
        return tuple((k, v) for k, v in self.settings if v != "-")

    @property
    def name(self) -> str:
        """The method, sigma and the settings that set this row apart, for messages and legends."""
        parts = [self.label, f"sigma={self.first.sigma:g}"] + [f"{k}={v}" for k, v in self.stated_settings]
        return " ".join(parts)

    @cached_property
    def scores(self) -> np.ndarray:
        """Per-image scores (correct * radius) averaged over the seeds, in image order."""
        return np.mean([r.scores for r in self.results], axis=0)

    def certified(self, radius: float) -> np.ndarray:
        """Per image, the fraction of the seeds that certify it at ``radius`` (0 or 1 for one seed)."""
        return np.mean([r.certified(radius) for r in self.results], axis=0)

    def acr(self, confidence: float, method: MeanInterval) -> Estimate:
        """ACR (mean over seeds) with its SE and interval over the images (of the seed-averaged scores).

        The interval is cut at 0, the least any ACR can be (a t interval over a few images can reach below it).
        """
        estimate = mean_interval(self.scores, confidence, method)
        return replace(estimate, low=max(estimate.low, 0.0))

    def accuracy(self, radius: float, confidence: float, ci_method: str) -> Estimate:
        """Certified accuracy at ``radius`` (mean over seeds) with its binomial interval over the images."""
        return proportion_interval(float(np.sum(self.certified(radius))), len(self.images), confidence, ci_method)

    def seed_values(self, radius: float | None = None) -> np.ndarray:
        """Per seed: ACR, or certified accuracy at ``radius``."""
        if radius is None:
            return np.array([np.mean(r.scores) for r in self.results])
        return np.array([np.mean(r.certified(radius)) for r in self.results])

    def seed_sd(self, radius: float | None = None) -> float:
        """The sample standard deviation over seeds of ACR (or of certified accuracy at ``radius``); nan for 1 seed."""
        values = self.seed_values(radius)
        return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def group_rows(results: Sequence[Result]) -> tuple[list[Row], list[str], dict[str, str]]:
    """The rows of the table, the override keys whose values differ between rows, and those common to all rows.

    Every key some run overrode (``method``, ``dataset``, ``arch``, ``sigma``, ``seed`` excepted) takes part in telling
    settings apart; the ones with one value for all rows are returned apart, for a table's caption.

    Raises:
        ReportError: two runs of one setting were certified differently, or share a seed (the message names them).
    """
    keys = sorted({k for r in results for k in r.overrides} - DEDICATED)

    settings_of = [
        (r.label, r.dataset, r.arch, canonical(r.sigma), tuple((k, r.setting(k)) for k in keys), r.threat)
        for r in results
    ]
    recorded: dict[tuple[Any, ...], dict[HParams, Mapping[str, Any]]] = {}
    for result, setting in zip(results, settings_of, strict=True):
        if result.hparams_recorded:
            recorded.setdefault(setting, {})[_hparams_key(result.hparams, _seed_derived(result))] = result.hparams
    groups: dict[tuple[Any, ...], list[Result]] = {}
    for result, setting in zip(results, settings_of, strict=True):
        if not result.hparams_recorded:
            result = _adopt_hparams(result, recorded.get(setting, {}))
        groups.setdefault((*setting, _hparams_key(result.hparams, _seed_derived(result))), []).append(result)
    for members in groups.values():
        _check_alike(members)
    values = {key: {dict(identity[4])[key] for identity in groups} for key in keys}
    varying = [key for key in keys if len(values[key]) > 1]
    common = {key: next(iter(values[key])) for key in keys if len(values[key]) == 1}
    rows = [
        Row(
            tuple(sorted(members, key=lambda r: (r.seed is None, r.seed or 0))),
            tuple((k, v) for k, v in identity[4] if k in varying),
        )
        for identity, members in groups.items()
    ]
    rows.sort(key=lambda row: (row.threat, row.first.dataset, row.first.sigma, row.label, _numeric_order(row.settings)))
    return rows, varying, common


def _numeric_order(settings: HParams) -> tuple[tuple[str, tuple[int, float, str]], ...]:
    """A row's settings as a sort key in which numbers sort as numbers (``lbd`` 5, 10, 20, not 10, 20, 5).

    >>> sorted(["10", "20", "5", "none"], key=lambda v: _numeric_order((("lbd", v),)))
    ['5', '10', '20', 'none']
    """
    key = []
    for name, value in settings:
        try:
            key.append((name, (0, float(value), "")))
        except ValueError:
            key.append((name, (1, 0.0, value)))
    return tuple(key)


def _hparams_key(hparams: Mapping[str, Any], seeded: frozenset[str] = frozenset()) -> HParams:
    """The recorded hyperparameters as a setting's identity, those at None and those in ``seeded`` left out.

    rsbench adds an optional feature as a hyperparameter that defaults to None (``lora``): a run recorded before it
    existed ran without it, so ``{"lora": None, ...}`` and ``{...}`` are one setting. A hyperparameter the config
    takes from the training seed (``seeded``, :func:`_seed_derived`) differs between seeds of one setting.

    >>> _hparams_key({"lbd": 5, "lora": None}) == _hparams_key({"lbd": 5.0})
    True
    >>> _hparams_key({"lbd": 5, "estimate_seed": 1}, frozenset({"estimate_seed"})) == _hparams_key({"lbd": 5})
    True
    """
    return tuple(sorted((k, canonical(v)) for k, v in hparams.items() if v is not None and k not in seeded))


def _seed_derived(result: Result) -> frozenset[str]:
    """The method's hyperparameters that the run's config sets to its training seed (``${seed}``).

    E.g. sun2025's ``estimate_seed``: they follow the seed, so runs differing only there are seeds of one setting.
    """
    method = _select_raw(result.config, "method")
    if not isinstance(method, Mapping):
        return frozenset()
    return frozenset(str(k) for k, v in method.items() if isinstance(v, str) and v.replace(" ", "") == "${seed}")


def _select_raw(config: Any, key: str) -> Any:
    """``config``'s node at ``key`` as plain containers with interpolations left as written, None when absent."""
    if config is None or not OmegaConf.is_config(config):
        return None
    node = OmegaConf.select(config, key, default=None, throw_on_missing=False)
    return OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else None


def _adopt_hparams(result: Result, candidates: Mapping[HParams, Mapping[str, Any]]) -> Result:
    """``result`` (no recorded hyperparameters) with the one recorded setting its config agrees with, else as it is.

    A hyperparameter its config does not state (a constructor default) is taken to agree; one it states must equal
    the recorded value. Without a config (a TSV) nothing is adopted.
    """
    if result.config is None:
        return result
    agreeing = [
        hparams
        for key, hparams in candidates.items()
        if all(result.setting(f"method.{name}") in ("?", value) for name, value in key)
    ]
    return replace(result, hparams=agreeing[0]) if len(agreeing) == 1 else result


def _check_alike(members: list[Result]) -> None:
    first = members[0]
    for other in members[1:]:
        differences = [
            f"{key}: {first.protocol.get(key)!r} vs {other.protocol.get(key)!r}"
            for key in PROTOCOL_KEYS
            if first.protocol.get(key) != other.protocol.get(key)
        ]
        if differences:
            raise ReportError(
                f"{first.source} and {other.source} are the same setting ({first.label}, sigma={first.sigma:g}) "
                f"but were certified under different protocols ({'; '.join(differences)}), so their seeds cannot "
                "be averaged. Certify them alike, or report them separately."
            )
    seeds = [m.seed for m in members]
    for seed in set(seeds):
        same = [str(m.source) for m in members if m.seed == seed]
        if len(same) > 1:
            what = f"seed {seed}" if seed is not None else "no seed recorded"
            raise ReportError(
                f"{', '.join(same)} are the same setting ({first.label}, sigma={first.sigma:g}) with {what}: "
                "pass only one of them (or give TSV files different labels)"
            )
