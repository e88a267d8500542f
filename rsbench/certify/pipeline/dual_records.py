"""A dual randomized-smoothing run's records and summary: the dual row, its reader's check, ``metrics.json``.

The certificates are the algorithm's (:mod:`rsbench.certify.algorithm.dual`: the router at beta, the routed expert at
alpha); a dual ``certify.tsv`` row is a :class:`~rsbench.certify.pipeline.records.CertificationRow` with the router's
and the expert's columns (:func:`dual_row`), :func:`summarize_dual` its ``metrics.json`` content and
:func:`format_dual_summary` its result line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from rsbench.certify.algorithm.dual import ABSTAIN, DualCertificate
from rsbench.certify.pipeline.metrics import average_certified_radius, certified_accuracy_curve, radius_grid
from rsbench.certify.pipeline.records import CertificationRow, record_columns
from rsbench.errors import damaged_record

RECORD = "certify.tsv"
SOUNDNESS = (
    "dual randomized smoothing: sound for the dual classifier G(x) = g_{router(x)}(x); each certificate holds with "
    "probability >= 1 - (alpha + beta) (router at beta, routed expert at alpha, independent noise)"
)

DUAL_RECORD: tuple[str, ...] = record_columns(False, dual=True)
"""The header of a dual ``certify.tsv``: Cohen's six columns, rsbench's, then the router's and the expert's."""


def dual_row(idx: int, label: int, cert: DualCertificate) -> CertificationRow:
    """The record row of image ``idx`` (true class ``label``) certified as ``cert``.

    ``radius`` is min(router_radius, expert_radius) (0 on abstention); ``sigma``, ``count``, ``n`` and ``pA_lower``
    are the routed expert's (0 when the router abstained, ``expert`` = -1); ``expert_predict`` -1 when the routed
    expert abstained or was not run; ``alpha`` and ``beta`` the two failure probabilities, whose sum the certificate
    holds at; ``time`` the router's and the expert's seconds together.
    """
    classifier = cert.classifier
    seconds = cert.router.seconds + (classifier.seconds if classifier is not None else 0.0)
    expert = CertificationRow.of(idx, label, classifier) if classifier is not None else _not_run(idx, label)
    return replace(
        expert,
        predict=cert.prediction,
        radius=cert.radius,
        correct=cert.prediction == label,
        time=round(seconds, 4),
        sigma=cert.sigma,
        expert=cert.expert,
        router_radius=cert.router.radius,
        router_pA_lower=cert.router.p_a_lower,
        router_n=cert.router.n,
        expert_predict=expert.predict,
        expert_radius=expert.radius,
        alpha=cert.alpha,
        beta=cert.beta,
    )


def _not_run(idx: int, label: int) -> CertificationRow:
    """The expert's part of a row whose router abstained: no expert ran (no votes, no samples, no radius)."""
    return CertificationRow(idx, label, ABSTAIN, 0.0, False, 0.0, 0, 0, 0.0, 0.0)


def dual_rows(rows: Iterable[CertificationRow], path: Path | None = None) -> list[CertificationRow]:
    """``rows`` (read by :func:`rsbench.certify.pipeline.records.read_rows`), refused unless every one is a dual row."""
    rows = list(rows)
    single = next((row for row in rows if not row.is_dual), None)
    if single is not None:
        raise damaged_record(
            Path(path or RECORD), None, f"image {single.idx} is not a dual randomized-smoothing row (no router columns)"
        )
    return rows


# ------------------------------------------------------------------------------------------- summary


def summarize_dual(
    rows: Sequence[CertificationRow],
    *,
    sigmas: Sequence[float],
    router_sigma: float,
    cap: float,
    radius_step: float = 0.25,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``metrics.json`` content of dual rows: ACR, certified accuracy up to ``cap``, and what the router chose.

    ``sigma`` is ``None`` (the noise level is input-dependent; ``sigmas`` lists the experts'), ``alpha`` the experts'
    failure probability, ``beta`` the router's and ``failure_probability`` their sum, the promise of every row.

    Args:
        rows: one per certified image.
        sigmas: the experts' noise levels.
        router_sigma: the router's.
        cap: the largest radius the protocol can certify (min of the router's cap and the largest expert cap).
        radius_step: the grid step.
        extra: more fields (dataset, subset, protocol, cost, ...).
    """
    radii = [row.radius for row in rows]
    correct = [row.correct for row in rows]
    alphas = {math.nan if row.alpha is None else row.alpha for row in rows} or {math.nan}
    betas = {math.nan if row.beta is None else row.beta for row in rows} or {math.nan}
    if len(alphas) > 1 or len(betas) > 1:
        raise ValueError(f"rows certified at different alpha/beta: {sorted(alphas)} / {sorted(betas)}")
    alpha, beta = alphas.pop(), betas.pop()
    chosen = {repr(float(s)): sum(row.expert == k for row in rows) for k, s in enumerate(sigmas)}
    summary: dict[str, Any] = {
        "acr": average_certified_radius(radii, correct),
        "certified_accuracy": certified_accuracy_curve(radii, correct, radius_grid(cap, radius_step)),
        "abstain_rate": sum(row.predict == ABSTAIN for row in rows) / len(rows) if rows else 0.0,
        "num_images": len(rows),
        "method": "dual_rs",
        "sigma": None,
        "sigmas": [float(s) for s in sigmas],
        "router_sigma": float(router_sigma),
        "alpha": alpha,
        "beta": beta,
        "failure_probability": alpha + beta,
        "radius_cap": cap,
        "sound": all(row.sound for row in rows),
        "soundness": SOUNDNESS,
        "router_abstain_rate": sum(row.expert == -1 for row in rows) / len(rows) if rows else 0.0,
        "chosen_sigma": chosen,
        "mean_samples": {
            "router": float(np.mean([row.router_n for row in rows])) if rows else 0.0,
            "expert": float(np.mean([row.n for row in rows])) if rows else 0.0,
        },
    }
    summary.update(extra or {})
    return summary


def format_dual_summary(summary: Mapping[str, Any]) -> str:
    """The result line of a dual certification: ACR, the failure probability as alpha + beta, certified accuracy.

    Every certificate of the run holds with probability at least 1 - (alpha + beta); the line says both terms and
    their sum, as ``metrics.json`` (``alpha``, ``beta``, ``failure_probability``) does.
    """
    accuracy = "  ".join(f"r={r}: {100 * a:.1f}%" for r, a in summary["certified_accuracy"].items())
    return (
        f"dual RS: ACR {summary['acr']:.4f} over {summary['num_images']} images (experts at sigma "
        f"{list(summary['sigmas'])}, router at {summary['router_sigma']}; each certificate at alpha + beta = "
        f"{summary['alpha']:g} + {summary['beta']:g} = {summary['failure_probability']:g}; abstained "
        f"{100 * summary['abstain_rate']:.1f}%)\ncertified accuracy: {accuracy}"
    )
