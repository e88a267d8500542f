"""``certify_model(cfg)``: what ``python -m rsbench.certify`` runs; a model in, the certification files out.

The job around it (:func:`rsbench.runs.job.job`) holds the run directory's lock, writes ``.hydra/`` and
``status.json`` once ``on_ready`` is called, and turns a stop signal into the command that resumes the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from rsbench.attack import AttackSettings
from rsbench.attack.stage import attack_after_certification
from rsbench.certify.pipeline.certification import Certification, Subject
from rsbench.certify.pipeline.records import STEM
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.checkpoint import trained_on
from rsbench.errors import ConfigError
from rsbench.models.dual import DUAL_KIND, certify_dual
from rsbench.runs.run import certification_dir, check_attack, check_certification
from rsbench.stop import raise_if_stop_requested, stop_requested

log = logging.getLogger("rsbench")


def warn_if_trained_elsewhere(provenance: Mapping[str, Any], dataset: str) -> bool:
    """Warn (not refuse: a transfer study is legitimate) when an rsbench checkpoint was trained on another dataset.

    Two datasets of one image shape and class count (MNIST, Fashion-MNIST) load each other's models without a
    complaint and certify for hours to a meaningless result. Returns whether it warned.
    """
    if provenance.get("kind") != "checkpoint":
        return False
    recorded = trained_on(provenance.get("signature") or {}, str(provenance.get("path", "")))
    if recorded is None or recorded == dataset:
        return False
    log.warning(
        "the checkpoint %s was trained on %s, and this run certifies it on %s: check dataset=%s is what you mean "
        "(certifying anyway)",
        provenance.get("path"),
        recorded,
        dataset,
        recorded,
    )
    return True


def certify_dual_model(cfg: DictConfig, on_ready: Callable[[], None] | None = None) -> float | None:
    """``model=dual``: dual randomized smoothing of ``cfg.model`` (:func:`rsbench.models.dual.certify_dual`).

    The subject is built by the one construction ``python -m rsbench.dual stage=certify`` uses, from the same keys
    under ``model.``. Returns the dual ACR (certificates at alpha + beta), ``None`` when stopped.

    Raises:
        ConfigError: an attack asked for (dual smoothing has no attack), or what the dual certification refuses.
    """
    if cfg.get("attack"):
        raise ConfigError("attack=...: model=dual certifies only (an attack on dual smoothing is not built)")
    outcome = certify_dual(cfg, cfg.model, certification_dir(cfg), on_ready, key="model.")
    raise_if_stop_requested()  # a stop signal ended certification after a whole row: end the run as stopped
    return None if outcome.summary is None else float(outcome.summary["acr"])


def certify_model(cfg: DictConfig, on_ready: Callable[[], None] | None = None) -> float | None:
    """Certify ``cfg.model`` on the test split of ``cfg.dataset`` with ``cfg.certify``'s protocol.

    Everything that can be checked (the settings, the dataset, the model, the subset) is checked before
    ``on_ready`` is called and before the first file is written. A stop signal ends certification after the image
    in flight (its row whole, so rerunning resumes after it) with :class:`~rsbench.stop.StopRequested`.

    Args:
        cfg: the composed ``conf/certify_model.yaml``.
        on_ready: called once every check has passed, just before the first file is written.

    Returns:
        The ACR of the sound certificates (the fixed-sigma ones under a data-dependent sigma mode), or ``None``
        when the run stopped before its summary.
    """
    if not cfg.certify.enabled:
        raise ConfigError("certify=off (certify.enabled=false) leaves rsbench.certify nothing to do")
    if cfg.model.get("kind") == DUAL_KIND:
        return certify_dual_model(cfg, on_ready)
    settings = CertifySettings.from_config(cfg.certify)
    attack = AttackSettings.from_config(cfg.get("attack"))
    check_attack(settings, attack)
    datamodule = instantiate(cfg.dataset)
    datamodule.prepare_data()
    datamodule.setup("test")
    built: Subject = instantiate(cfg.model)
    warn_if_trained_elsewhere(built.provenance, datamodule.name)
    check_certification(settings, datamodule, built.sigma)
    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    subject = Subject(
        built.classifier.to(device),
        built.num_classes,
        built.sigma,
        {"method": built.description["method"], "dataset": datamodule.name, "arch": built.description["arch"]},
        built.provenance,
        noise=built.noise,
    )
    if on_ready is not None:
        on_ready()
    certification = Certification(settings, certification_dir(cfg))
    outcome = certification.run(subject, datamodule.test_dataset, should_stop=lambda: stop_requested() is not None)
    raise_if_stop_requested()  # a stop signal ended certification after a whole row: end the run as stopped
    if outcome.summary is None:  # stopped, or a shard whose siblings are still certifying
        return None
    if attack is not None:
        attack_after_certification(
            subject,
            datamodule.test_dataset,
            certification.settings,
            attack,
            outcome.summary,
            outcome.rows[STEM],
            cfg.output_dir,
            should_stop=lambda: stop_requested() is not None,
        )
        raise_if_stop_requested()  # the attack's rows so far are whole: rerunning resumes it
    sound = outcome.summary if outcome.summary["sound"] else outcome.summary["fixed_sigma"]
    return float(sound["acr"])
