"""``certify_model(cfg)``: what ``python -m rsbench.certify`` runs; a model in, the certification files out."""

from __future__ import annotations

from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from rsbench.certify.pipeline import Certification, Subject
from rsbench.certify.settings import CertifySettings
from rsbench.errors import ConfigError
from rsbench.runs.run import check_subset


def certify_model(cfg: DictConfig) -> float | None:
    """Certify ``cfg.model`` on the test split of ``cfg.dataset`` with ``cfg.certify``'s protocol.

    Returns:
        The ACR of the sound certificates (the fixed-sigma ones under a data-dependent sigma mode), or ``None``
        when the run stopped before its summary.
    """
    if not cfg.certify.enabled:
        raise ConfigError("certify=off (certify.enabled=false) leaves rsbench.certify nothing to do")
    settings = CertifySettings.from_config(cfg.certify)
    datamodule = instantiate(cfg.dataset)
    datamodule.prepare_data()
    datamodule.setup("test")
    check_subset(settings, datamodule)
    built: Subject = instantiate(cfg.model)
    device = torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    subject = Subject(
        built.classifier.to(device),
        built.num_classes,
        built.sigma,
        {"method": built.description["method"], "dataset": datamodule.name, "arch": built.description["arch"]},
        built.provenance,
    )
    outcome = Certification(settings, Path(cfg.output_dir)).run(subject, datamodule.test_dataset)
    if outcome.summary is None:
        return None
    sound = outcome.summary if outcome.summary["sound"] else outcome.summary["fixed_sigma"]
    return float(sound["acr"])
