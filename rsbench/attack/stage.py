"""The attack as a stage after certification: what ``python -m rsbench.certify`` and the callback call.

:func:`attack_after_certification` takes a finished certification (its subject, test set, settings and
``metrics.json`` summary with the rows), attacks the certified images with the smoothed classifier as certified (the
same noise, norm, sigma, precision and memory format; ``torch.compile`` is not applied to the attack's PREDICT),
adds ``metrics.json["attack"]``, logs the table, and fails loudly when the certificates are contradicted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rsbench.attack.evaluate import attack_certified, check_certificates
from rsbench.attack.settings import AttackSettings
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.certify.pipeline.certification import IndexedImages, Subject
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.summary import write_metrics

log = logging.getLogger(__name__)


def attack_after_certification(
    subject: Subject,
    images: IndexedImages,
    settings: CertifySettings,
    attack: AttackSettings,
    summary: dict[str, Any],
    rows: Sequence[CertificationRow],
    output_dir: str | Path,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any] | None:
    """Attack the certified images, store ``metrics.json["attack"]``, and check the certificates.

    Args:
        subject: what was certified.
        images: the test set the certificates index.
        settings: the certification settings (noise, norm, alpha, seed, speed options).
        attack: the attack's settings.
        summary: the certification's ``metrics.json`` content (updated in place and rewritten).
        rows: the certificates (``certify.tsv``'s rows, in subset order).
        output_dir: the run directory.
        should_stop: asked after each attacked image; the attack then stops and writes nothing more.

    Returns:
        The attack's summary, or ``None`` when ``should_stop`` ended it early.

    Raises:
        CertificateContradictionError: after the summary is written, when the attack contradicts more certificates
            than alpha allows.
    """
    protocol, speed = settings.protocol, settings.speed
    smooth = Smooth(
        subject.classifier,
        subject.num_classes,
        float(summary["sigma"]),
        precision=speed.precision,
        channels_last=speed.channels_last,
        noise=protocol.noise,
        norm=protocol.norm,
    )
    grid = [float(radius) for radius in summary["certified_accuracy"]]
    outcome = attack_certified(
        smooth,
        images,
        rows,
        attack,
        grid,
        Path(output_dir),
        seed=protocol.seed,
        certify_alpha=protocol.alpha,
        should_stop=should_stop,
    )
    if outcome.stopped:
        log.warning("the attack stopped on request; rerun into %s to resume it", output_dir)
        return None
    summary["attack"] = outcome.summary
    write_metrics(summary, Path(output_dir) / "metrics.json")
    log.info("attack results (%s):\n%s", output_dir, format_attack(outcome.summary))
    check_certificates(outcome.summary)
    return outcome.summary


def format_attack(attack: Mapping[str, Any]) -> str:
    """The attack's table in a few lines: empirical beside certified accuracy per radius, the check, the cost."""
    lines = [
        f"{attack['name']} (T={attack['num_steps']}, m={attack['num_noise']}; PREDICT n={attack['n']}, "
        f"alpha={attack['alpha']}) on {attack['images']} images, {attack['norm']} radii, {attack['noise']} noise",
        "  r        empirical  certified  gap",
    ]
    for key, empirical in attack["empirical_accuracy"].items():
        certified = attack["certified_accuracy"][key]
        lines.append(
            f"  {key:<8} {100 * empirical:6.1f}%    {100 * certified:6.1f}%    {100 * (empirical - certified):+.1f}"
        )
    lines.append(
        f"flipped within the certified radius: {attack['contradictions']} images (a sound certifier: at most "
        f"{attack['contradictions_expected_at_most']:.3f} expected, p = {attack['contradictions_p_value']:.3g})"
    )
    if attack["cost_ratio"] is not None:
        lines.append(
            f"cost: {attack['attack_seconds']:.1f} s against {attack['certify_seconds']:.1f} s of certification "
            f"({attack['cost_ratio']:.2f}x)"
        )
    return "\n".join(lines)
