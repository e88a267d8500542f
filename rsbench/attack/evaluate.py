"""Attack every certified image at the table's radii: empirical robust accuracy, and a check of every certificate.

For each certified image x (label y, certificate: class c, radius R in the certified norm) and each attack radius r
in increasing order, SmoothAdv (:func:`rsbench.attack.pgd.smoothed_pgd`, noise of the certified distribution) finds
x' with ||x' - x|| <= r, and PREDICT (n samples, alpha; it may abstain) classifies x'. Radius 0 is PREDICT on x
itself. An image counts as empirically robust at r while PREDICT returned y at every attacked radius up to r (an
adversarial image found at a smaller radius lies in every larger ball), so its attack stops at the first radius
where PREDICT does not return y. Empirical robust accuracy (Salman et al.'s, abstentions counting as errors) is, up
to PREDICT's own errors and abstentions, an upper bound on the smoothed classifier's robust accuracy, as certified
accuracy is a lower bound.

**The check.** With probability >= 1 - alpha the certificate is right: g(x + delta) = c for every ||delta|| < R; and
with probability >= 1 - alpha' (PREDICT's alpha) PREDICT at x' returns g(x') or abstains. So an answer of another
class than c (not an abstention) at a radius r < R contradicts the certificate, and on image i happens with
probability at most q_i = alpha + k_i alpha', where k_i is the number of PREDICT calls at radii below R_i (union bound;
the attack's noise, PREDICT's noise and CERTIFY's noise are independent streams of the image's seed). Over the N
images the number of contradictions K is then stochastically below a sum of independent Bernoulli(q_i); the run
fails (:class:`CertificateContradictionError`) when P(sum >= K) < ``attack.fail_below`` (0.001 by default), i.e.
when K exceeds what alpha allows at that significance. More is a bug of the certifier (a wrong closed form, the wrong
noise, a broken bound), not bad luck.

Costs are recorded per image (``attack.tsv``) and in total (``metrics.json["attack"]``), with the certification
time of the same images, so the attack's cost is stated as a multiple of certification's.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from rsbench.attack import records
from rsbench.attack.pgd import distance, smoothed_pgd
from rsbench.attack.records import AttackRow, append_image, check_attack_protocol, read_attack_rows, write_rows
from rsbench.attack.settings import AttackSettings
from rsbench.certify.algorithm.seeding import derive_seed, make_generator
from rsbench.certify.algorithm.smooth import Smooth
from rsbench.certify.pipeline.metrics import radius_key
from rsbench.certify.pipeline.records import CertificationRow
from rsbench.errors import RsbenchError
from rsbench.methods.attacks import frozen

log = logging.getLogger(__name__)

ATTACK_NOISE = 3
"""Key of the attack's noise stream, make_generator(device, image seed, ATTACK_NOISE, k) for the k-th radius: three
keys, so it never coincides with CERTIFY's and PREDICT's two-key streams (image seed, phase)."""
ATTACK_PREDICTION = 4
"""Key of the seed of PREDICT at the k-th adversarial image, derive_seed(image seed, ATTACK_PREDICTION, k)."""


class CertificateContradictionError(RsbenchError, RuntimeError):
    """The attack changed more predictions within their certified radius than alpha allows: a certifier bug."""


@dataclass
class AttackOutcome:
    """What the attack produced: the ``metrics.json["attack"]`` summary and the rows, image by image."""

    summary: dict[str, Any]
    rows: list[AttackRow] = field(default_factory=list)
    stopped: bool = False


def attack_certified(
    smooth: Smooth,
    images: Any,
    certified: Sequence[CertificationRow],
    settings: AttackSettings,
    grid: Sequence[float],
    output_dir: Path,
    *,
    seed: int,
    certify_alpha: float,
    should_stop: Callable[[], bool] | None = None,
) -> AttackOutcome:
    """Attack the certified images, write ``attack.tsv`` and return the summary (:func:`summarize_attack`).

    Call :func:`check_certificates` on the summary once it is stored: it raises when the certificates fail.

    Args:
        smooth: the smoothed classifier as certified (its noise, norm, precision and base classifier).
        images: the test set, ``images[idx] = (image [C, H, W] in [0,1], label, ...)``.
        certified: the certificates of the images to attack, in subset order.
        settings: the attack's settings.
        grid: the radii of the certified-accuracy table, used when ``settings.radii`` is ``None``.
        output_dir: where ``attack.tsv`` and ``attack_protocol.json`` go (the run directory).
        seed: the certification seed; image i's attack streams derive from (seed, i) like its certificate's.
        certify_alpha: CERTIFY's alpha, the failure probability of each certificate.
        should_stop: asked after each image; when true the attack stops there (rows so far are kept).
    """
    radii = sorted(settings.radii if settings.radii is not None else grid)
    targets = list(certified)[: settings.max_images]
    norm = smooth.threat.resolved_norm
    check_attack_protocol(
        output_dir, {**settings.record(), "radii": radii, "norm": norm, "noise": smooth.threat.noise, "seed": seed}
    )
    done = _complete_images(output_dir, radii)
    todo = [row for row in targets if row.idx not in done]
    if done:
        log.info("resuming the attack: %d of %d images already attacked", len(done), len(targets))
    model = smooth.base_classifier
    stopped = False
    progress = tqdm(total=len(targets), initial=len(targets) - len(todo), desc="attack", unit="img", mininterval=1.0)
    with torch.inference_mode(False), _frozen_if_module(model):  # Lightning's test stage runs in inference mode
        for cert in todo:
            image = images[cert.idx][0]
            append_image(output_dir, _attack_image(smooth, model, image, cert, radii, settings, seed))
            progress.update(1)
            if should_stop is not None and should_stop():
                stopped = True
                break
    progress.close()
    rows = [row for row in read_attack_rows(output_dir) if row.idx in {c.idx for c in targets}]
    summary = summarize_attack(
        rows, targets, radii, settings, norm=norm, noise=smooth.threat.noise, certify_alpha=certify_alpha
    )
    return AttackOutcome(summary, rows, stopped)


def _attack_image(
    smooth: Smooth,
    model: Callable[[torch.Tensor], torch.Tensor],
    image: torch.Tensor,
    cert: CertificationRow,
    radii: Sequence[float],
    settings: AttackSettings,
    seed: int,
) -> list[AttackRow]:
    """The rows of one image: attack and PREDICT at each radius until PREDICT does not return the label."""
    device = smooth.device_for(image)
    x = image.to(device).unsqueeze(0).clone()  # a normal tensor even if the test set was built in inference mode
    label = torch.tensor([int(cert.label)], device=device)
    image_seed = derive_seed(seed, cert.idx)
    norm = smooth.threat.resolved_norm
    rows = []
    for k, radius in enumerate(radii):
        start = time.perf_counter()
        adversarial = x
        if radius > 0:
            stream = make_generator(device, image_seed, ATTACK_NOISE, k)
            noise = smooth.noise_copies(x, settings.num_noise, generator=stream)
            adversarial = smoothed_pgd(model, x, label, noise, radius, settings.num_steps, norm)
        predict = smooth.predict(
            adversarial[0],
            settings.n,
            settings.alpha,
            settings.batch_size,
            seed=derive_seed(image_seed, ATTACK_PREDICTION, k),
        )
        rows.append(
            AttackRow(
                idx=cert.idx,
                label=cert.label,
                radius=float(radius),
                predict=predict,
                correct=predict == cert.label,
                distance=distance(x[0], adversarial[0], norm),
                certified_predict=cert.predict,
                certified_radius=cert.radius,
                contradiction=contradicts(predict, radius, cert),
                time=round(time.perf_counter() - start, 4),
            )
        )
        if predict != cert.label:
            break
    return rows


def contradicts(predict: int, radius: float, cert: CertificationRow) -> bool:
    """Whether PREDICT's answer at an adversarial image within ``radius`` contradicts the certificate ``cert``.

    It does when the image was certified (not abstained) at a radius above ``radius`` and PREDICT named another
    class than the certified one (an abstention contradicts nothing): :func:`rsbench.attack.records.contradicts`.
    """
    return records.contradicts(predict, radius, cert.predict, cert.radius)


def summarize_attack(
    rows: Sequence[AttackRow],
    certified: Sequence[CertificationRow],
    radii: Sequence[float],
    settings: AttackSettings,
    *,
    norm: str,
    noise: str,
    certify_alpha: float | None = None,
) -> dict[str, Any]:
    """``metrics.json["attack"]``: empirical and certified accuracy per radius, the check, and the costs.

    Args:
        rows: the attack's rows.
        certified: the certificates of the attacked images (an image without rows is left out).
        radii: the attack radii, increasing.
        settings: the attack's settings.
        norm: the norm of the radii.
        noise: the smoothing noise.
        certify_alpha: CERTIFY's alpha (the certificates' failure probability); PREDICT's when ``None``.
    """
    by_image: dict[int, list[AttackRow]] = {}
    for row in rows:
        by_image.setdefault(row.idx, []).append(row)
    attacked = [cert for cert in certified if cert.idx in by_image]
    empirical, certified_accuracy = {}, {}
    for radius in radii:
        robust = sum(_robust_at(by_image[cert.idx], radius) for cert in attacked)
        empirical[radius_key(radius)] = robust / len(attacked) if attacked else 0.0
        held = sum(cert.correct and cert.radius >= radius for cert in attacked)
        certified_accuracy[radius_key(radius)] = held / len(attacked) if attacked else 0.0
    contradicted = sorted({row.idx for row in rows if row.contradiction and row.idx in by_image})
    alpha = certify_alpha if certify_alpha is not None else settings.alpha
    bounds = [contradiction_bound(by_image[cert.idx], cert, alpha, settings.alpha) for cert in attacked]
    p_value = tail_probability(bounds, len(contradicted))
    attack_seconds = sum(row.time for row in rows)
    certify_seconds = sum(cert.time for cert in attacked)
    return {
        "name": settings.name,
        "norm": norm,
        "noise": noise,
        "num_steps": settings.num_steps,
        "num_noise": settings.num_noise,
        "n": settings.n,
        "alpha": settings.alpha,
        "images": len(attacked),
        "radii": [float(r) for r in radii],
        "empirical_accuracy": empirical,
        "certified_accuracy": certified_accuracy,
        "gap": {key: empirical[key] - certified_accuracy[key] for key in empirical},
        "contradictions": len(contradicted),
        "contradicted_images": contradicted,
        "contradictions_expected_at_most": float(sum(bounds)),
        "contradictions_p_value": p_value,
        "fail_below": settings.fail_below,
        "attack_seconds": attack_seconds,
        "certify_seconds": certify_seconds,
        "cost_ratio": attack_seconds / certify_seconds if certify_seconds > 0 else None,
    }


def check_certificates(summary: Mapping[str, Any]) -> None:
    """Raise :class:`CertificateContradictionError` when the summary's contradictions are too many for alpha."""
    if summary["contradictions_p_value"] >= summary["fail_below"]:
        return
    raise CertificateContradictionError(
        f"the attack changed the prediction within the certified {summary['norm']} radius on "
        f"{summary['contradictions']} of {summary['images']} images (images {summary['contradicted_images'][:10]}), "
        f"where a sound certifier allows at most {summary['contradictions_expected_at_most']:.3f} on average: "
        f"p = {summary['contradictions_p_value']:.2g} < {summary['fail_below']} ({summary['noise']} noise). The "
        "certificates are wrong: check the noise, the closed form and the bound (rows in attack.tsv)"
    )


def contradiction_bound(rows: Sequence[AttackRow], cert: CertificationRow, alpha: float, predict_alpha: float) -> float:
    """q_i = min(1, alpha + k_i alpha'): the chance a sound certifier and PREDICT give image i a contradiction."""
    if cert.predict == Smooth.ABSTAIN:
        return 0.0
    calls = sum(row.radius < cert.radius for row in rows)
    return min(1.0, alpha + calls * predict_alpha) if calls else 0.0


def tail_probability(probabilities: Sequence[float], count: int) -> float:
    """P(sum of independent Bernoulli(p_i) >= count), exactly (the Poisson-binomial tail, by convolution)."""
    if count <= 0:
        return 1.0
    distribution = np.zeros(len(probabilities) + 1)
    distribution[0] = 1.0
    for p in probabilities:
        distribution[1:] = distribution[1:] * (1 - p) + distribution[:-1] * p
        distribution[0] *= 1 - p
    return float(min(1.0, distribution[count:].sum()))


def _robust_at(rows: Sequence[AttackRow], radius: float) -> bool:
    """Whether PREDICT returned the label at every attacked radius up to ``radius`` (and one was attacked)."""
    upto = [row for row in rows if row.radius <= radius]
    return bool(upto) and all(row.correct for row in upto) and max(row.radius for row in upto) >= radius - 1e-12


def _complete_images(output_dir: Path, radii: Sequence[float]) -> set[int]:
    """The images whose rows are complete (stopped at a failure or the last radius); partial ones are removed."""
    rows = read_attack_rows(output_dir)
    by_image: dict[int, list[AttackRow]] = {}
    for row in rows:
        by_image.setdefault(row.idx, []).append(row)
    complete = {idx for idx, own in by_image.items() if not own[-1].correct or own[-1].radius >= max(radii) - 1e-12}
    if len(complete) < len(by_image):  # an image cut short by a crash: attack it again from its first radius
        write_rows(output_dir, [row for row in rows if row.idx in complete])
    return complete


def _frozen_if_module(model: Any) -> Any:
    """Eval mode and frozen weights for a module (restored afterwards); nothing for a plain callable."""
    return frozen(model) if isinstance(model, torch.nn.Module) else contextlib.nullcontext()
