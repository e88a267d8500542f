"""What a dual certification accepts, checked without torch: its threat model and the expert records it reuses.

The command line's check (:func:`check_dual_threat`) runs before torch is imported
(:func:`rsbench.runs.precheck.check_before_run`), the expert records' when ``stage=certify`` reads them
(:func:`rsbench.dual.stages.expert_record_reader`).

A dual certificate is (c, min(R_sigma, R_c)): the router's and the routed expert's radii are both l2 radii of
Gaussian smoothing at a fixed sigma (:mod:`rsbench.certify.algorithm.dual`). So

* the run itself smooths with Gaussian noise and certifies the l2 norm (``certify.noise=gaussian``,
  ``certify.norm`` null or ``l2``); Gaussian noise on the input grid (``certify.noise_grid``) is honoured, for the
  router and every expert alike;
* an expert's own certification (``expert_records``) is reused only when it is a sound certificate of the same
  kind: a fixed sigma (``sigma_mode`` fixed: a per-input sigma, DDRS, is not sound), Gaussian noise and the l2 norm
  (a Laplace l1 radius is not an l2 radius), the same grid noise, dataset and precision as this run, and every row
  it gives marked ``sound``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rsbench.errors import ConfigError

NOISE = "gaussian"
NORM = "l2"
SIGMA_MODE = "fixed"


def check_dual_threat(certify: Mapping[str, Any]) -> None:
    """Refuse a dual certification of another threat model than Gaussian noise and the l2 norm.

    Args:
        certify: the ``certify`` block (``noise``, ``norm``; absent keys are Gaussian and l2).

    Raises:
        ConfigError: naming the key, its value and what is allowed.
    """
    noise = certify.get("noise") or NOISE
    if noise != NOISE:
        raise ConfigError(
            f"certify.noise={noise!r}: dual randomized smoothing combines the router's and the routed expert's l2 "
            f"radii of Gaussian smoothing; allowed: certify.noise={NOISE} (with certify.noise_grid=255 for noise on "
            "the 8-bit input grid)"
        )
    norm = certify.get("norm")
    if norm not in (None, NORM):
        raise ConfigError(
            f"certify.norm={norm!r}: a dual certificate is an l2 radius; allowed: certify.norm=null or {NORM}"
        )


def expert_record_problems(
    stored: Mapping[str, Any], metrics: Mapping[str, Any] | None, *, dataset: str, precision: str, noise_grid: Any
) -> list[str]:
    """Why an expert's certification is not a sound certificate this dual run may reuse (empty: it is).

    Args:
        stored: the expert's ``certify_protocol.json``.
        metrics: its ``metrics.json`` (``None`` when absent: a certification still running is read by its protocol).
        dataset: this run's dataset.
        precision: this run's ``certify.precision``.
        noise_grid: this run's ``certify.noise_grid`` (``None``: continuous noise).
    """
    problems = []
    for where, record in (("certify_protocol.json", stored), ("metrics.json", metrics or {})):
        mode = record.get("sigma_mode", SIGMA_MODE)
        if mode != SIGMA_MODE:
            problems.append(
                f"{where} has sigma_mode {mode!r}, a per-input sigma whose certificates are not sound "
                f"(allowed: {SIGMA_MODE}, one sigma for every image)"
            )
        threat = (record.get("noise", NOISE), record.get("norm", NORM))
        if threat != (NOISE, NORM):
            problems.append(
                f"{where} has noise {threat[0]!r} and norm {threat[1]!r} (allowed: {NOISE} and {NORM}: the dual "
                "radius is the smaller of two l2 radii)"
            )
    if metrics is not None and metrics.get("sound", True) is not True:
        problems.append(f"metrics.json has sound {metrics.get('sound')!r} (allowed: true)")
    wanted = {"noise_grid": noise_grid, "dataset": dataset, "precision": precision}
    for key, value in wanted.items():
        if stored.get(key) != value:
            problems.append(
                f"certify_protocol.json has {key} {stored.get(key, '<missing>')!r} (allowed: {value!r}, this run's)"
            )
    return list(dict.fromkeys(problems))  # (both files saying the same thing: once)


def unsound_rows(rows: Iterable[Any]) -> list[str]:
    """The rows (``CertificationRow``) that are not sound Gaussian l2 certificates, as ``image <idx>: <why>``."""
    found = []
    for row in rows:
        if not row.sound:
            found.append(f"image {row.idx}: sound false (allowed: true)")
        elif (row.noise, row.norm) != (NOISE, NORM):
            found.append(f"image {row.idx}: noise {row.noise!r}, norm {row.norm!r} (allowed: {NOISE}, {NORM})")
    return found


def refuse_expert_record(k: int, folder: Any, problems: list[str]) -> None:
    """Raise the refusal of ``expert_records[k]`` for ``problems`` (nothing when there are none)."""
    if problems:
        shown = problems[:4] + ([f"... and {len(problems) - 4} more"] if len(problems) > 4 else [])
        raise ConfigError(
            f"expert_records[{k}]={folder} is not a sound Gaussian l2 certificate this dual certification can reuse: "
            + "; ".join(shown)
            + ". Certify the expert with python -m rsbench.certify at this run's settings, or drop expert_records"
        )
