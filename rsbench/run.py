"""``run(cfg)``: build everything from the composed config, train, certify, and return the sweep objective."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import Logger, WandbLogger

from rsbench.errors import ConfigError
from rsbench.loading import load_weights_only
from rsbench.noise import check_sigma

log = logging.getLogger(__name__)


def check_config(cfg: DictConfig) -> None:
    """Fail before any work on settings that would otherwise fail late (after training, say)."""
    try:
        check_sigma(cfg.sigma, "sigma")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if not cfg.train and not cfg.ckpt_path:
        raise ConfigError("train=false certifies an existing checkpoint: pass ckpt_path=<path to a .ckpt>")
    if cfg.ckpt_path and not Path(cfg.ckpt_path).expanduser().is_file():
        raise ConfigError(f"ckpt_path={cfg.ckpt_path!r} is not a file")
    if cfg.test_ckpt not in ("best", "last"):
        raise ConfigError(f"test_ckpt must be 'best' or 'last', got {cfg.test_ckpt!r}")
    if not cfg.train and not cfg.test:
        raise ConfigError("train=false and test=false leave nothing to do")


def build_loggers(cfg: DictConfig) -> list[Logger]:
    """Instantiate every logger under ``cfg.logger`` (none when the group is empty)."""
    nodes: Mapping[str, Any] = cfg.get("logger") or {}
    return [instantiate(node) for node in nodes.values() if node]


def build_callbacks(cfg: DictConfig) -> list[pl.Callback]:
    """The certification callback, plus ``cfg.callbacks`` (checkpointing, ...) when the run trains."""
    nodes: Mapping[str, Any] = (cfg.get("callbacks") or {}) if cfg.train else {}
    return [instantiate(cfg.certify), *(instantiate(node) for node in nodes.values() if node)]


def run(cfg: DictConfig) -> float | None:
    """Train (unless ``train=false``), then certify the best (or given) checkpoint on the test split.

    Returns:
        The value of ``cfg.optimized_metric`` (``certify/acr`` by default) for Hydra sweepers, or ``None``.
    """
    check_config(cfg)
    pl.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.dataset)
    net = instantiate(cfg.arch)
    scheduler = instantiate(cfg.scheduler) if cfg.get("scheduler") else None
    module = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer), scheduler=scheduler)
    if cfg.ckpt_path:
        checkpoint = load_weights_only(cfg.ckpt_path)  # tensors and plain values only: no code runs from the file
        module.check_checkpoint(checkpoint, cfg.ckpt_path)
        if not cfg.train:
            module.load_state_dict(checkpoint["state_dict"])  # strict: every weight must be there
    callbacks = build_callbacks(cfg)
    loggers = build_loggers(cfg)
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False)
    hyperparameters = OmegaConf.to_container(cfg, resolve=True)
    for logger in loggers:
        logger.log_hyperparams(hyperparameters)  # type: ignore[arg-type]
    try:
        test_ckpt = None  # train=false: the weights loaded above
        if cfg.train:
            trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.ckpt_path, weights_only=True)
            test_ckpt = _trained_checkpoint(trainer, cfg.test_ckpt)
        if cfg.test:
            log.info("testing and certifying %s", test_ckpt or cfg.ckpt_path or "the final weights")
            trainer.test(module, datamodule=datamodule, ckpt_path=test_ckpt, weights_only=True)
        value = trainer.callback_metrics.get(cfg.optimized_metric)
        return float(value) if value is not None else None
    finally:
        for logger in loggers:
            if isinstance(logger, WandbLogger):
                logger.experiment.finish()  # each multirun job is its own W&B run


def _trained_checkpoint(trainer: pl.Trainer, which: str) -> str | None:
    """The path of the best or last checkpoint of the fit that just ran (``None``: test the weights in memory).

    ``best`` comes from the checkpoint callback that monitors a metric, ``last`` from the one that monitors none (it
    keeps the latest epoch); see ``conf/callbacks/default.yaml``.
    """
    wanted = [
        callback
        for callback in trainer.checkpoint_callbacks
        if isinstance(callback, ModelCheckpoint) and (callback.monitor is None) == (which == "last")
    ]
    path = wanted[0].best_model_path if wanted else ""
    if not path:
        log.warning("no %s checkpoint was saved: certifying the weights at the end of training", which)
        return None
    return str(path)
