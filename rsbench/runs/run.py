"""``run(cfg)``: build everything from the composed config, train, certify, and return the sweep objective.

Everything that can be checked is checked before anything is written (settings, checkpoints, the dataset, the
objects the config describes); only then does ``on_ready`` mark the directory as this run's. A directory that
already holds the run continues it: training from ``checkpoints/last.ckpt`` when it did not finish, straight to
certification when it did, and certification after its last written row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import Logger, WandbLogger
from pytorch_lightning.utilities.seed import isolate_rng

from rsbench.attack.settings import AttackSettings
from rsbench.certify.pipeline.progress import interactive
from rsbench.certify.pipeline.settings import CertifySettings
from rsbench.certify.pipeline.subset import require_images
from rsbench.checkpoint import load_checkpoint
from rsbench.errors import ConfigError
from rsbench.methods.base import checkpoint_epoch
from rsbench.methods.card import first_method_epoch
from rsbench.noise import check_sigma
from rsbench.noise_distributions import noise_distribution
from rsbench.runs.certify_callback import CertifyCallback
from rsbench.runs.epoch_seed import EpochSeed
from rsbench.runs.loggers import CSVLogger, wandb_run_id
from rsbench.runs.precheck import check_method_epoch, no_gpu_error, require_file
from rsbench.runs.prerequisites import check_given
from rsbench.runs.progress_lines import TrainingProgress
from rsbench.runs.quiet import certification_owns_the_display, quiet_lightning
from rsbench.runs.training_clock import TrainingClock
from rsbench.runs.training_layout import TrainingLayout, bf16_warning, check_layout
from rsbench.stop import raise_if_stop_requested

log = logging.getLogger(__name__)


def check_config(cfg: DictConfig) -> None:
    """Fail before any work on settings that would otherwise fail late (after training, say)."""
    try:
        check_sigma(cfg.sigma, "sigma")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    if not cfg.train and not cfg.ckpt_path:
        raise ConfigError("train=false certifies an existing checkpoint: pass ckpt_path=<path to a .ckpt>")
    require_file("ckpt_path", cfg.ckpt_path)
    if cfg.test_ckpt not in ("best", "last"):
        raise ConfigError(f"test_ckpt must be 'best' or 'last', got {cfg.test_ckpt!r}")
    if not cfg.train and not cfg.test:
        raise ConfigError("train=false and test=false leave nothing to do")
    if cfg.train and cfg.test and cfg.trainer.get("max_epochs") == 0 and not cfg.ckpt_path:
        raise ConfigError(
            "trainer.max_epochs=0 trains nothing, and the run would certify an untrained model: give it epochs, or "
            "certify a trained model with train=false ckpt_path=<path to a .ckpt>"
        )
    check_sharding(cfg)
    check_layout(cfg.get("train_layout", "contiguous"))
    check_given(cfg)  # checkpoints the config gives for what the method needs before it trains
    check_accelerator(str(cfg.trainer.get("accelerator", "auto")))
    warning = (
        bf16_warning(cfg.trainer.get("precision"), str(cfg.trainer.get("accelerator", "auto"))) if cfg.train else None
    )
    if warning:
        log.warning("%s", warning)
    if cfg.train and cfg.get("test", True):  # a run with test=false selects and certifies nothing (a warm-up)
        check_method_epoch(cfg.method, cfg.trainer.get("max_epochs"))
    chunks, batch = cfg.method.get("steps_per_batch", 1), cfg.dataset.batch_size
    if isinstance(chunks, int) and isinstance(batch, int) and batch < chunks:
        raise ConfigError(
            f"dataset.batch_size={batch} cannot be cut into method.steps_per_batch={chunks} chunks (one optimizer "
            "step per chunk): raise dataset.batch_size"
        )


def check_sharding(cfg: DictConfig) -> None:
    """Refuse to train in the shards of a sharded certification: each would train (and certify) its own model.

    Raises:
        ConfigError: ``certify.num_shards > 1`` with ``train=true``, saying how to shard a trained model instead.
    """
    shards = OmegaConf.select(cfg, "certify.num_shards", default=1)
    if cfg.train and cfg.test and cfg.certify.enabled and isinstance(shards, int) and shards > 1:
        raise ConfigError(
            f"certify.num_shards={shards} splits the certification of one trained model over jobs, and train=true "
            "would train a model in every shard: train once (python -m rsbench ...), then certify its checkpoint in "
            "shards with train=false ckpt_path=<run>/checkpoints/best.ckpt, or with python -m rsbench.certify "
            "(docs/sharding.md)"
        )


def certification_dir(cfg: DictConfig) -> Path:
    """Where certification writes: the run directory, or for a shard (``certify.num_shards > 1``) the shared folder.

    The shared folder is ``certify.merge_dir``, by default the folder that holds the shard's run folder (a
    multirun's sweep folder; :mod:`rsbench.certify.pipeline.sharding`).
    """
    node = cfg.get("certify") or {}
    if int(node.get("num_shards", 1) or 1) <= 1:
        return Path(cfg.output_dir)
    merge_dir = node.get("merge_dir")
    return Path(merge_dir).expanduser() if merge_dir else Path(cfg.output_dir).resolve().parent


def check_attack(settings: CertifySettings, attack: AttackSettings | None) -> None:
    """Refuse an attack after a sharded certification (the attack would run in one job over every image).

    Raises:
        ConfigError: ``attack=...`` with ``certify.num_shards > 1``.
    """
    if attack is not None and settings.sharding.sharded:
        raise ConfigError(
            f"attack= runs after certification over every certified image, in one job; with "
            f"certify.num_shards={settings.sharding.num_shards} certify in shards first, then attack without sharding"
        )


def check_certification(settings: CertifySettings, datamodule: Any, sigma: float) -> None:
    """Refuse certification settings that cannot give a result, before anything is trained or written.

    A subset that selects no test image of ``datamodule`` (the run would report ACR 0 as a result); a sequential
    radius cap that cannot be reached at ``sigma``
    (:meth:`~rsbench.certify.pipeline.settings.CertifySettings.check_reachable`).

    Args:
        settings: the certification settings.
        datamodule: the dataset whose test split is certified.
        sigma: the sigma the model is certified at (``certify.sigma``, else the model's).

    Raises:
        ConfigError: naming the setting, the test split's size or the most that can be certified.
    """
    settings.check_reachable(settings.protocol.sigma if settings.protocol.sigma is not None else sigma)
    subset = settings.subset
    split = f"the {datamodule.name} test split"
    require_images(len(datamodule.test_dataset), subset.start, subset.skip, subset.max_images, split)


def check_accelerator(accelerator: str) -> None:
    """Refuse a GPU accelerator on a machine where torch sees no GPU (Lightning says ``No supported gpu backend``).

    Raises:
        ConfigError: naming the accelerator, why there is no GPU, and what to use instead.
    """
    if accelerator not in ("gpu", "cuda") or torch.cuda.is_available():
        return
    why = "this torch was built without CUDA" if torch.version.cuda is None else "torch finds no CUDA device"
    raise no_gpu_error(accelerator, why)


def build_loggers(cfg: DictConfig) -> list[Logger]:
    """Instantiate every logger under ``cfg.logger`` (none when the group is empty).

    A W&B logger without an explicit ``id`` gets the run directory's own id and ``resume="allow"``, so a resumed
    run continues its W&B run instead of starting a second one.
    """
    nodes: Mapping[str, Any] = cfg.get("logger") or {}
    loggers = []
    for node in nodes.values():
        if not node:
            continue
        extra: dict[str, Any] = {}
        if str(node.get("_target_", "")).endswith("WandbLogger") and not node.get("id"):
            extra = {"id": wandb_run_id(Path(cfg.output_dir)), "resume": "allow"}
        loggers.append(instantiate(node, **extra))
    return loggers


def build_callbacks(cfg: DictConfig) -> list[pl.Callback]:
    """The certification callback (unless ``certify=off``), plus ``cfg.callbacks`` (checkpointing, ...) when training.

    Raises:
        ConfigError: a certification setting is unknown or out of range (named as ``certify.<key>``).
    """
    settings = CertifySettings.from_config(cfg.certify)  # checked even when certification is off
    certify: list[pl.Callback] = []
    if cfg.certify.enabled:
        protocol = OmegaConf.select(cfg, "protocol_name", default=None)
        attack = AttackSettings.from_config(cfg.get("attack"))  # attack=smoothadv: attacked after certification
        check_attack(settings, attack)
        method_epoch = first_method_epoch(cfg.method)[0]
        certify.append(CertifyCallback(settings, certification_dir(cfg), protocol, attack, method_epoch))
    nodes: Mapping[str, Any] = (cfg.get("callbacks") or {}) if cfg.train else {}
    seeding = [EpochSeed(cfg.seed)] if cfg.train else []  # a resumed run trains exactly as an uninterrupted one
    timing = [TrainingClock()] if cfg.train else []  # training seconds, kept in checkpoints across resumes
    layout = [TrainingLayout(cfg.get("train_layout", "contiguous"))] if cfg.train else []
    return [*certify, *seeding, *timing, *layout, *(instantiate(node) for node in nodes.values() if node)]


def use_noise(cfg: DictConfig, module: Any) -> None:
    """Give the method the chosen noise (``noise=<name>``; Gaussian when the config predates the group).

    Raises:
        ConfigError: the method's math is Gaussian and refuses another noise (the message says why).
    """
    try:
        module.noise = noise_distribution(str(OmegaConf.select(cfg, "noise.name", default="gaussian")))
    except ValueError as error:
        raise ConfigError(str(error)) from None


def run(
    cfg: DictConfig,
    on_ready: Callable[[], None] | None = None,
    given: Mapping[str, str] | None = None,
    before_training: Callable[[], None] | None = None,
) -> float | None:
    """Train (unless ``train=false``), then certify the best (or given) checkpoint on the test split.

    Args:
        cfg: the composed config.
        on_ready: called once every check has passed, just before the first file is written.
        given: method arguments besides its config: the checkpoints of the runs it needs (see
            :mod:`rsbench.runs.prerequisites`; :func:`rsbench.runs.job.run_with_prerequisites` plans them).
        before_training: called after ``on_ready`` when the run (still) has to train, with the random state
            isolated: it trains or reuses those runs.

    Returns:
        The value of ``cfg.optimized_metric`` (``certify/acr`` by default) for Hydra sweepers, or ``None``.
    """
    check_config(cfg)
    given = dict(given or {})
    pl.seed_everything(cfg.seed, workers=True)
    datamodule = instantiate(cfg.dataset)
    net = instantiate(cfg.arch)
    scheduler = instantiate(cfg.scheduler) if cfg.get("scheduler") else None
    module = instantiate(cfg.method, net=net, optimizer=instantiate(cfg.optimizer), scheduler=scheduler, **given)
    use_noise(cfg, module)
    callbacks = build_callbacks(cfg)
    start = _starting_point(cfg, module, callbacks, cfg.trainer.get("max_epochs"))
    loggers = build_loggers(cfg)
    trainer = _trainer(cfg, callbacks, loggers)
    datamodule.prepare_data()  # a missing dataset stops here, before anything is written
    if cfg.test and cfg.certify.enabled:
        check_certification(CertifySettings.from_config(cfg.certify), datamodule, cfg.sigma)  # before training
    log.info("%s", describe_method(cfg, given))
    if on_ready is not None:
        on_ready()
    if before_training is not None and start.train:
        with isolate_rng():  # training what the method needs now, or reusing it, leaves this run's random state
            before_training()
    _start_logs(cfg, loggers, start)
    try:
        test_ckpt = start.test_ckpt
        if start.train:
            _stoppable(trainer.fit, module, datamodule=datamodule, ckpt_path=start.fit_ckpt, weights_only=True)
            test_ckpt = _trained_checkpoint(trainer, cfg.test_ckpt)
        if cfg.test:
            _test(cfg, trainer, module, datamodule, test_ckpt)
        value = trainer.callback_metrics.get(cfg.optimized_metric)
        return float(value) if value is not None else None
    finally:
        for logger in loggers:
            if isinstance(logger, WandbLogger) and logger._experiment is not None:  # (never start a run to end it)
                logger.experiment.finish()  # each multirun job is its own W&B run


def _trainer(cfg: DictConfig, callbacks: list[pl.Callback], loggers: list[Logger]) -> pl.Trainer:
    """The run's Lightning trainer: a progress bar on a terminal, progress lines instead on a pipe (training runs)."""
    quiet_lightning()
    bar: dict[str, bool] = {}
    if not interactive():  # a pipe, nohup or SLURM: no bar, which a file shows as nothing for minutes
        bar = {"enable_progress_bar": False}
        if cfg.train:  # lines at an interval instead, also where the bar was turned off for a quiet log
            callbacks.append(TrainingProgress())
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **bar)
    return trainer


def _start_logs(cfg: DictConfig, loggers: list[Logger], start: Start) -> None:
    """Drop the CSV rows of an epoch cut short (they are logged again on resuming), and log the hyperparameters."""
    if start.resumed_after is not None:
        for logger in loggers:
            if isinstance(logger, CSVLogger):  # the rows of the epoch that was cut short are logged again
                logger.keep_epochs_through(start.resumed_after)
    hyperparameters = OmegaConf.to_container(cfg, resolve=True)
    for logger in loggers:
        logger.log_hyperparams(hyperparameters)  # type: ignore[arg-type]


def _test(cfg: DictConfig, trainer: pl.Trainer, module: Any, datamodule: Any, test_ckpt: str | None) -> None:
    """Test and certify ``test_ckpt`` (the final weights when None), then log the test split's metrics in one line."""
    log.info("testing and certifying %s", test_ckpt or cfg.ckpt_path or "the final weights")
    certification_owns_the_display(trainer)
    # Lightning's own table of the test metrics would follow rsbench's summary: one line instead
    _stoppable(trainer.test, module, datamodule=datamodule, ckpt_path=test_ckpt, weights_only=True, verbose=False)
    tested = {k: float(v) for k, v in trainer.callback_metrics.items() if str(k).startswith("test/")}
    if tested:
        log.info("test split: %s", ", ".join(f"{k.removeprefix('test/')} {v:.4g}" for k, v in sorted(tested.items())))


@dataclass(frozen=True)
class Start:
    """Where a run starts.

    Attributes:
        train: whether to (continue to) train.
        resumed_after: the last complete epoch of the run's own ``last.ckpt`` that training continues after.
        fit_ckpt: the checkpoint training continues from (``None``: from scratch; ``"last"``: this run's own
            ``last.ckpt``, which Lightning finds through the run's checkpoint callbacks).
        test_ckpt: without training, the checkpoint to test and certify (``None``: the weights in memory).
    """

    train: bool
    fit_ckpt: str | None = None
    test_ckpt: str | None = None
    resumed_after: int | None = None


def _starting_point(
    cfg: DictConfig, module: pl.LightningModule, callbacks: list[pl.Callback], max_epochs: int | None
) -> Start:
    """Continue what the run directory holds: from ``last.ckpt`` if training did not finish, else to certification.

    Without a ``last.ckpt``, training starts from ``ckpt_path`` (or from scratch); ``train=false`` loads
    ``ckpt_path``. Every checkpoint used is read once here, so a damaged one stops the run before any work.
    """
    if cfg.ckpt_path:
        advice = "pass another checkpoint (a run's checkpoints/best.ckpt or last.ckpt)"
        checkpoint = load_checkpoint(cfg.ckpt_path, f"ckpt_path={cfg.ckpt_path}", advice)
        module.check_checkpoint(checkpoint, cfg.ckpt_path)  # type: ignore[operator]
        if not cfg.train:
            module.load_state_dict(checkpoint["state_dict"])  # strict: every weight must be there
            module.weights_epoch = checkpoint_epoch(checkpoint)  # type: ignore[assignment]
            return Start(train=False)
    last = checkpoint_file(callbacks, "last")
    if last is None or not last.is_file():
        return Start(train=True, fit_ckpt=cfg.ckpt_path or None)
    origin = cfg.ckpt_path or "scratch"
    state = load_checkpoint(last, str(last), f"restore it, or move {last.parent} away to train again from {origin}")
    epoch = int(state.get("epoch", -1)) + 1
    if not finished_training(state, max_epochs):
        log.info("continuing training at epoch %d of %s from %s", epoch + 1, max_epochs, last)
        # Lightning restores it: the newest last*.ckpt of the callbacks
        return Start(train=True, fit_ckpt="last", resumed_after=epoch - 1)
    log.info("training finished earlier (%d epochs, %s): going straight to testing and certification", epoch, last)
    for callback in callbacks:  # the training time it recorded (rsbench.runs.certify_callback.training_seconds)
        if isinstance(callback, TrainingClock) and isinstance(state.get("callbacks", {}).get(callback.state_key), dict):
            callback.settle(state["callbacks"][callback.state_key])
    test_ckpt = checkpoint_file(callbacks, cfg.test_ckpt)
    if test_ckpt is None or not test_ckpt.is_file():
        raise ConfigError(
            f"training finished, but its {cfg.test_ckpt} checkpoint {test_ckpt} is missing: use test_ckpt=last"
        )
    load_checkpoint(test_ckpt, str(test_ckpt), "certify the other one (test_ckpt=best or last), or restore it")
    return Start(train=False, test_ckpt=str(test_ckpt))


def checkpoint_file(callbacks: Sequence[pl.Callback], which: str) -> Path | None:
    """Where the run's ``best`` (monitors a metric) or ``last`` (monitors none) checkpoint callback writes.

    ``None`` when the run has no such callback (``train=false``). See ``conf/callbacks/default.yaml``.
    """
    for callback in callbacks:
        if isinstance(callback, ModelCheckpoint) and (callback.monitor is None) == (which == "last"):
            if callback.dirpath is None or callback.filename is None:
                return None
            return Path(callback.dirpath) / f"{callback.filename}{callback.FILE_EXTENSION}"
    return None


def finished_training(checkpoint: Mapping[str, Any], max_epochs: int | None) -> bool:
    """Whether an end-of-epoch checkpoint is the last epoch of a ``max_epochs`` schedule (Lightning counts from 0)."""
    return max_epochs is not None and max_epochs >= 0 and int(checkpoint.get("epoch", -1)) + 1 >= max_epochs


def _stoppable(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``trainer.fit``/``test``; Lightning's own SIGTERM exit (a ``SystemExit``) becomes ``StopRequested``."""
    try:
        return method(*args, **kwargs)
    except SystemExit:
        raise_if_stop_requested()
        raise


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


def describe_method(cfg: DictConfig, given: Mapping[str, Any] | None = None) -> str:
    """One line with the chosen method's resolved hyperparameters (``--cfg job --resolve`` shows the same).

    ``*`` marks the values a lookup picked for this dataset and sigma: the authors' published ones, or, where they
    published none, rsbench's choice with its evidence in the method's config; ``given`` are values passed to the
    method besides its config (the checkpoints of the runs it needs, e.g. the teacher rsbench trained).
    """
    raw = OmegaConf.to_container(cfg.method, resolve=False)
    assert isinstance(raw, dict)
    shown = []
    for key, value in raw.items():
        if key in ("_target_", "sigma", "allow_sigma_mismatch"):
            continue
        looked_up = isinstance(value, str) and "rs.lookup" in value
        value = (given or {}).get(str(key), cfg.method[key])
        shown.append(f"{key!s}={value}{'*' if looked_up else ''}")
    method = str(cfg.method._target_).rsplit(".", 1)[-1]
    line = f"{method} on {cfg.dataset.name} at sigma={cfg.sigma}: {', '.join(shown) or 'no hyperparameters'}"
    if any(value.endswith("*") for value in shown):
        family = cfg.dataset.get("family", cfg.dataset.name)
        whose = family if family == cfg.dataset.name else f"{family} (the family of {cfg.dataset.name})"
        line += f" (* = looked up for {whose} at this sigma: the authors' value, or rsbench's where none is published)"
    return line
