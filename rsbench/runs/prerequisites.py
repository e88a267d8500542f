"""Models a method needs before it can train: CAT-RS's sigma = 0.25 Gaussian teacher, trained once and reused.

``python -m rsbench method=catrs dataset=cifar10 sigma=1.0`` without ``method.teacher_ckpt`` first trains the
teacher the authors use: ``method=gaussian sigma=0.25`` with the same dataset, recipe (architecture, optimizer,
schedule, epochs) and seed, into ``<teacher_dir>/<dataset>/<arch>_sigma0.25_seed<seed>_<digest>/`` (``teacher_dir``
defaults to ``teachers/`` in the working directory, or ``$RSBENCH_TEACHER_DIR``). The digest covers every training
setting, so any other recipe gets its own teacher. That directory is an ordinary run directory: a teacher stopped
half-way is resumed by the next run that needs it, and runs that need it at the same time wait for each other.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rsbench.errors import ConfigError
from rsbench.runs.cli import config_dir, override_key
from rsbench.runs.resume import TRAINED, settings
from rsbench.runs.status import read_status

log = logging.getLogger("rsbench")

TEACHER_SIGMA = 0.25
# The teacher's own settings; every other override of the student's command (dataset, arch, optimizer, trainer, seed,
# experiment, ...) is kept, so the teacher has the student's recipe.
TEACHER_OVERRIDES = (
    "method=gaussian",
    f"sigma={TEACHER_SIGMA}",
    "certify=off",
    "logger=csv",
    "train=true",
    "test=true",
    "test_ckpt=best",
    "ckpt_path=null",
    "allow_sigma_mismatch=false",
)
STUDENT_ONLY = (
    *("method", "sigma", "certify", "logger", "train", "test", "test_ckpt", "ckpt_path"),
    *("allow_sigma_mismatch", "optimized_metric", "output_dir", "hydra"),
)


@dataclass(frozen=True)
class TeacherRun:
    """The teacher run a CAT-RS run uses.

    Attributes:
        cfg: the teacher's composed config.
        overrides: the overrides that compose it (stored for ``resume=``).
        directory: its run directory.
    """

    cfg: DictConfig
    overrides: tuple[str, ...]
    directory: Path

    @property
    def checkpoint(self) -> Path:
        """The teacher's weights: its best checkpoint (validation noisy accuracy), as the authors' teachers."""
        return self.directory / "checkpoints" / "best.ckpt"

    def ensure(self) -> None:
        """Reuse the teacher when its run completed; otherwise train (or finish training) it now."""
        status = read_status(self.directory) or {}
        if status.get("status") == "completed" and self.checkpoint.is_file():
            log.info("CAT-RS teacher: reusing %s", self.checkpoint)
            return
        log.info(
            "CAT-RS teacher: method.teacher_ckpt is not set, so training the sigma=%s Gaussian model of %s with this "
            "recipe first, in %s (later runs reuse it)",
            TEACHER_SIGMA,
            self.cfg.dataset.name,
            self.directory,
        )
        from rsbench.runs.job import execute

        execute(self.cfg, self.directory, self.overrides, wait=True)


def plan_teacher(cfg: DictConfig) -> TeacherRun | None:
    """The teacher run ``cfg`` needs: for a method that takes ``teacher_ckpt`` when none is given, else ``None``.

    Raises:
        ConfigError: the run is distributed (the teacher would have to be trained by every process): train it first.
    """
    method = cfg.method
    if "teacher_ckpt" not in method or method.teacher_ckpt or method.get("soft_label", "teacher") != "teacher":
        return None
    strategy, devices, nodes = (
        str(cfg.trainer.get("strategy")),
        cfg.trainer.get("devices"),
        cfg.trainer.get("num_nodes"),
    )
    if "ddp" in strategy or devices not in (1, "1", None) or nodes not in (1, None):
        raise ConfigError(
            "a distributed CAT-RS run needs a trained teacher: train it first with "
            f"python -m rsbench method=gaussian sigma={TEACHER_SIGMA} dataset={cfg.dataset.name} (same recipe), "
            "then pass method.teacher_ckpt=<its run>/checkpoints/best.ckpt"
        )
    overrides = tuple(
        [arg for arg in _student_overrides() if (override_key(arg) or "").split(".")[0] not in STUDENT_ONLY]
        + list(TEACHER_OVERRIDES)
        + _student_schedule(cfg)
    )
    with _hydra():
        teacher = compose("config", overrides=[*overrides, *_search_path()])
    keys = [key for key in TRAINED if key != "callbacks"]  # checkpoint paths depend on the directory, not the recipe
    recipe = json.dumps(settings(teacher, keys), sort_keys=True, default=str)
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:10]
    name = f"{teacher.arch.arch}_sigma{TEACHER_SIGMA}_seed{teacher.seed}_{digest}"
    directory = Path(cfg.teacher_dir).expanduser() / str(teacher.dataset.name) / name
    OmegaConf.update(teacher, "output_dir", str(directory))
    return TeacherRun(teacher, overrides, directory)


def _student_schedule(cfg: DictConfig) -> list[str]:
    """The student's epochs and milestones, which a method's own recipe may set (``conf/method_recipe/``).

    The authors train the teacher with the student's schedule: CAT-RS on MNIST runs 150 epochs with drops at 51 and
    101 (``catrs_mnist``), and so did its teacher (``train_cohen.py mnist lenet --lr_step_size 50 --epochs 150``);
    composing ``method=gaussian`` alone would give the 90-epoch MNIST recipe.
    """
    schedule = [f"trainer.max_epochs={cfg.trainer.max_epochs}"]
    milestones = OmegaConf.select(cfg, "scheduler.milestones")
    if milestones is not None:
        schedule.append(f"scheduler.milestones=[{','.join(str(int(m)) for m in milestones)}]")
    return schedule


def _student_overrides() -> list[str]:
    return [str(arg) for arg in HydraConfig.get().overrides.task] if HydraConfig.initialized() else []


def _search_path() -> list[str]:
    """The student's ``hydra.searchpath`` override, so the teacher finds the same user configs."""
    if not HydraConfig.initialized():
        return []
    return [str(arg) for arg in HydraConfig.get().overrides.hydra if override_key(str(arg)) == "hydra.searchpath"]


@contextmanager
def _hydra() -> Iterator[None]:
    """Hydra's compose API: the running app's when there is one, else rsbench's configs."""
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        yield
