"""One job (a run, or one point of a sweep) in its run directory: locked, resumable, stoppable, and clean on failure.

:func:`job` is what Hydra calls, for both commands that run jobs (:data:`~rsbench.runs.cli.TRAIN`, ``python -m
rsbench``, whose work is :func:`run_with_prerequisites`; :data:`~rsbench.runs.cli.CERTIFY`, ``python -m
rsbench.certify``, whose work is :func:`rsbench.runs.certify_model.certify_model`). It

- holds the directory's lock (:class:`~rsbench.runs.lock.RunLock`) so that no second process writes into it;
- trains (or reuses) the runs the method needs first (:mod:`rsbench.runs.prerequisites`), each a job of its own;
- refuses to continue a run with settings that change what it trained (:mod:`rsbench.runs.resume`), before any work;
- stops at a safe point on SIGTERM/SIGINT/SIGUSR1/SIGUSR2 (:mod:`rsbench.stop`) and says how to resume;
- writes ``.hydra/`` (the run's config, once) and ``status.json`` only when every check has passed, and removes
  the directory it created when a check fails, so a refused command changes nothing on disk;
- ends a single run with one line and exit status 2 on a bad request; in a sweep it records the failure and
  returns, so that the other jobs run (:mod:`rsbench.runs.sweep` lists them all at the end).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from rsbench.certify.pipeline.records import record_files
from rsbench.errors import RunDirectoryBusyError, user_message
from rsbench.runs.certify_model import certify_model
from rsbench.runs.cli import DUAL, RUN_CONFIG, TRAIN, Command, override_key
from rsbench.runs.floor import refuse
from rsbench.runs.lock import LOCK_FILE, RunLock, is_global_zero
from rsbench.runs.prerequisites import PlannedRun, plan_prerequisites
from rsbench.runs.quoting import override, resume_command
from rsbench.runs.resume import CERTIFIED, CERTIFIED_MODEL, DUAL_RUN, TRAINED, check_resumable
from rsbench.runs.run import certification_dir, run
from rsbench.runs.status import write_status
from rsbench.stop import StopGuard, StopRequested

log = logging.getLogger("rsbench")

Work = Callable[..., "float | None"]
"""A job's work: ``work(cfg, on_ready=...)`` returns the objective (``None`` when stopped); it calls ``on_ready`` once
its checks have passed, before it writes the first file."""


def job(cfg: DictConfig, command: Command = TRAIN, work: Work | None = None) -> float | None:
    """Run the job Hydra composed for ``command``; return the sweep objective (``None`` for a failed sweep job).

    ``work``: what the job does, for a command of the tools layer (``python -m rsbench.dual``'s stages); by default
    training (:data:`~rsbench.runs.cli.TRAIN`) or certifying a model (:data:`~rsbench.runs.cli.CERTIFY`).
    """
    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    overrides = list(hydra_cfg.overrides.task)
    log_file = f"{hydra_cfg.job.name}.log"
    with StopGuard():
        try:
            return execute(
                cfg, output_dir, overrides, keep_failed=multirun, log_file=log_file, command=command, work=work
            )
        except StopRequested as stop:
            log.warning("%s. Resume with: %s", stop, resume_command(command.module, output_dir))
            if multirun:
                log.warning(
                    "(or rerun the whole sweep with %s)", shlex.quote(override("hydra.sweep.dir", hydra_cfg.sweep.dir))
                )
            raise SystemExit(stop.exit_code) from None
        except Exception as error:
            message = user_message(error)
            if not multirun:
                if message is None:
                    raise
                refuse(message)
            if message is None:
                log.exception("job %s failed (%s)", hydra_cfg.job.num, " ".join(overrides))
            else:
                log.error("job %s failed (%s): %s", hydra_cfg.job.num, " ".join(overrides), message)
            return None


def execute(
    cfg: DictConfig,
    output_dir: Path,
    overrides: Sequence[str],
    *,
    keep_failed: bool = False,
    wait: bool = False,
    log_file: str | None = None,
    command: Command = TRAIN,
    work: Work | None = None,
) -> float | None:
    """Run ``cfg`` in ``output_dir``: take its lock, check that it may continue what is there, run, record the outcome.

    Args:
        cfg: the composed config (``output_dir`` must resolve to ``output_dir``).
        output_dir: the run directory.
        overrides: the overrides that made ``cfg`` (stored for ``resume=``).
        keep_failed: record a failure in the checks in ``status.json`` of the directory this job created (sweep
            jobs), instead of removing that directory.
        wait: wait for another process that holds the directory instead of failing (shared teacher runs).
        log_file: the name of Hydra's log file in ``output_dir`` (the only file a new directory holds at the start).
        command: the command whose job this is: what it does and how its runs are resumed.
        work: what it does, when not the command's own (:func:`job`).
    """
    work = work or (run_with_prerequisites if command.trains else certify_model)
    identity = TRAINED if command.trains else DUAL_RUN if command == DUAL else CERTIFIED_MODEL
    certified = False

    def check() -> None:  # read-only: before the lock
        nonlocal certified  # (a shard's rows are in the folder its certification shares with the other shards)
        certified = bool(record_files(output_dir, None)) or bool(record_files(certification_dir(cfg), None))
        check_resumable(cfg, output_dir, certified=certified, keys=identity, module=command.module)

    if not is_global_zero():  # the other processes of a DDP run: rank 0 holds the lock and writes the run files
        check()
        return work(cfg)
    created = is_new(output_dir, log_file)
    started = False

    def ready() -> None:
        nonlocal started
        started = True
        if not save_run_config(output_dir, cfg, overrides) and not certified:  # a resume that has no rows yet
            store_certification_settings(output_dir, cfg, overrides)
        write_status(output_dir, "running", overrides, module=command.module)

    try:
        check()
        with RunLock(output_dir, wait=wait, command=f"python -m {command.module} {' '.join(sys.argv[1:])}"):
            value = work(cfg, on_ready=ready)
            write_status(output_dir, "completed", overrides, objective=value, module=command.module)
            return value
    except RunDirectoryBusyError:
        raise  # the directory is another process's (even if both found it new): leave it exactly as it is
    except BaseException as error:
        _record_failure(error, output_dir, overrides, started, created and keep_failed, created, log_file, command)
        raise  # a directory this job did not create (a refused resume) is left exactly as it was


def _record_failure(
    error: BaseException,
    output_dir: Path,
    overrides: Sequence[str],
    started: bool,
    keep: bool,
    created: bool,
    log_file: str | None,
    command: Command,
) -> None:
    """What a job that raised ``error`` leaves in ``output_dir``.

    A started run records ``interrupted`` (a signal or a launcher stopped it) or ``failed`` in ``status.json``; a run
    that failed its checks in a directory it created records ``failed`` there when ``keep`` (a sweep job) and is not
    stopped, else that directory is removed; a directory it did not create is left exactly as it was.
    """
    stopped = isinstance(error, StopRequested | SystemExit | KeyboardInterrupt)  # by a signal or a launcher
    if started:
        write_status(
            output_dir,
            "interrupted" if stopped else "failed",
            overrides,
            error=_describe(error),
            module=command.module,
        )
    elif keep and not stopped:  # a sweep job: its folder records why it failed
        write_status(output_dir, "failed", overrides, error=_describe(error), module=command.module)
    elif created:
        remove_new(output_dir, log_file)


def run_with_prerequisites(cfg: DictConfig, on_ready: Callable[[], None] | None = None) -> float | None:
    """:func:`~rsbench.runs.run.run` ``cfg`` after the runs its method needs, each executed as a job of its own.

    They are planned before any work (a distributed run that would have to train one is refused), and trained or
    reused once the run's own checks have passed and only if it (still) trains; their checkpoints fill the method's
    arguments.
    """
    planned = plan_prerequisites(cfg) if cfg.train else []
    given = {needed.prerequisite.argument: str(needed.checkpoint) for needed in planned}
    return run(cfg, on_ready=on_ready, given=given, before_training=lambda: train_prerequisites(planned))


def train_prerequisites(planned: Sequence[PlannedRun]) -> None:
    """Reuse each planned run that completed; train (or finish) the others now, waiting for a process training one."""
    for needed in planned:
        what = needed.prerequisite
        if needed.completed():
            log.info("%s: reusing %s", what.name, needed.checkpoint)
            continue
        log.info(
            "%s: method.%s is not set, so training %s of %s with this recipe first, in %s (later runs reuse it)",
            what.name,
            what.argument,
            what.description,
            needed.cfg.dataset.name,
            needed.directory,
        )
        execute(needed.cfg, needed.directory, needed.overrides, wait=True)


def is_new(output_dir: Path, log_file: str | None) -> bool:
    """Whether ``output_dir`` holds nothing yet but Hydra's log file (Hydra creates the directory before the job)."""
    if not output_dir.exists():
        return True
    return {entry.name for entry in output_dir.iterdir()} <= {log_file}


def remove_new(output_dir: Path, log_file: str | None) -> None:
    """Remove a run directory whose job stopped before any work, with the empty folders above it (below the cwd)."""
    leftovers = {entry.name for entry in output_dir.iterdir()} if output_dir.exists() else set()
    if not leftovers <= {log_file, LOCK_FILE.parts[0]}:
        return  # something else appeared meanwhile: keep it
    shutil.rmtree(output_dir, ignore_errors=True)
    cwd = Path.cwd().resolve()
    parent = output_dir.resolve().parent
    while parent != cwd and cwd in parent.parents and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def save_run_config(output_dir: Path, cfg: DictConfig, overrides: Sequence[str]) -> bool:
    """Write ``.hydra/config.yaml``, ``overrides.yaml`` (and ``hydra.yaml``) once: a resumed run keeps its originals.

    Returns whether they were written (False for a resumed run).
    """
    folder = output_dir / RUN_CONFIG
    if (folder / "config.yaml").is_file():
        return False
    folder.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, folder / "config.yaml")
    OmegaConf.save(OmegaConf.create(list(overrides)), folder / "overrides.yaml")
    if HydraConfig.initialized() and Path(HydraConfig.get().runtime.output_dir).resolve() == output_dir.resolve():
        OmegaConf.save(OmegaConf.create({"hydra": HydraConfig.get()}), folder / "hydra.yaml")
    return True


def store_certification_settings(output_dir: Path, cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Store the certification settings of a resumed run that has no certificate rows yet.

    A resumed run may change them until it has rows (:func:`rsbench.runs.resume.check_resumable`); its first rows are
    certified under the settings given now, so ``.hydra/config.yaml`` and ``overrides.yaml`` take them (the keys under
    :data:`~rsbench.runs.resume.CERTIFIED`; the training settings stay the original ones), and a later ``resume=`` is
    compared with, and replays, what the rows were certified under.
    """
    folder = output_dir / RUN_CONFIG
    stored = OmegaConf.load(folder / "config.yaml")
    for key in CERTIFIED:
        node = OmegaConf.select(cfg, key, default=None)
        if node is not None:
            value = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
            OmegaConf.update(stored, key, value, merge=False)
    OmegaConf.save(stored, folder / "config.yaml")
    stored_overrides = [str(o) for o in OmegaConf.to_container(OmegaConf.load(folder / "overrides.yaml"))]  # type: ignore[union-attr]

    def certifying(argument: str) -> bool:
        key = override_key(argument)
        return any(key == name or key.startswith(f"{name}.") for name in CERTIFIED)

    kept = [o for o in stored_overrides if not certifying(o)]
    OmegaConf.save(OmegaConf.create(kept + [o for o in overrides if certifying(o)]), folder / "overrides.yaml")


def _describe(error: BaseException) -> str:
    return user_message(error) or f"{type(error).__name__}: {error}"
