"""The runs a method needs before it can train, planned for any method from what it declares.

A method declares its prerequisites (:class:`rsbench.methods.prerequisites.Prerequisite`, returned by the
``prerequisites`` class method of its ``_target_``); this module names none. For each prerequisite whose argument
the config leaves unset, :func:`plan_prerequisites` composes the prerequisite's config from this run's own command
line (its ``overrides`` replace the method, sigma and the run's role; its ``keep`` keys are copied), and names its run
directory ``<prerequisite_dir>/<folder>/<dataset>/<arch>_sigma<sigma>_seed<seed>_<digest>/``, where
``prerequisite_dir`` is ``outputs/``, a sweep's own folder, or ``$RSBENCH_PREREQUISITE_DIR``, ``folder`` the one the
method's card names, and the digest covers every training setting, so any other recipe gets its own. That directory
is an ordinary run directory: the job trains a prerequisite before the run that needs it (:mod:`rsbench.runs.job`),
reuses it once it completed, resumes it if it stopped half-way, and waits for another run that is training it.

``python -m rsbench method=catrs dataset=cifar10 sigma=1.0`` without ``method.teacher_ckpt`` thus first trains the
teacher the authors use, ``method=gaussian sigma=0.25`` with the same dataset, recipe, schedule and seed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf

from rsbench.errors import ConfigError
from rsbench.methods.prerequisites import Prerequisite
from rsbench.runs.cli import config_dir, override_key
from rsbench.runs.precheck import require_file
from rsbench.runs.resume import TRAINED, settings
from rsbench.runs.status import read_status

# Keys of this run's command line that describe this run only, never a prerequisite (besides what it overrides).
RUN_ONLY: tuple[str, ...] = (
    *("certify", "logger", "train", "test", "test_ckpt", "ckpt_path", "allow_sigma_mismatch"),
    *("optimized_metric", "output_dir", "hydra"),
)


@dataclass(frozen=True)
class PlannedRun:
    """A prerequisite run, planned: its config, where it runs, which checkpoint fills the method's argument.

    Attributes:
        prerequisite: what the method declared.
        cfg: the prerequisite's composed config (its ``output_dir`` is ``directory``).
        overrides: the overrides that compose it (stored for ``resume=``).
        directory: its run directory.
    """

    prerequisite: Prerequisite
    cfg: DictConfig
    overrides: tuple[str, ...]
    directory: Path

    @property
    def checkpoint(self) -> Path:
        """The checkpoint that fills the method's argument (``checkpoints/best.ckpt`` or ``last.ckpt``)."""
        return self.directory / "checkpoints" / f"{self.prerequisite.checkpoint}.ckpt"

    def completed(self) -> bool:
        """Whether the run completed earlier and left its checkpoint (then it is reused)."""
        status = read_status(self.directory) or {}
        return status.get("status") == "completed" and self.checkpoint.is_file()


def declared(cfg: DictConfig) -> tuple[Prerequisite, ...]:
    """What the method of ``cfg`` declares it needs (its ``_target_``'s ``prerequisites``; none without one)."""
    target = cfg.method.get("_target_")
    hook = getattr(get_object(str(target)), "prerequisites", None) if target else None
    return tuple(hook(cfg.method)) if callable(hook) else ()


def check_given(cfg: DictConfig) -> None:
    """Refuse a prerequisite's checkpoint that the config names but that is not a file.

    Raises:
        ConfigError: naming the argument and the path.
    """
    for prerequisite in declared(cfg):
        require_file(f"method.{prerequisite.argument}", cfg.method.get(prerequisite.argument))


def plan_prerequisites(cfg: DictConfig) -> list[PlannedRun]:
    """The prerequisite runs ``cfg`` needs: one for each declared prerequisite whose argument is not set.

    Raises:
        ConfigError: the run is distributed (each process would train the prerequisite): train it first.
    """
    needed = [p for p in declared(cfg) if not cfg.method.get(p.argument)]
    if needed and _distributed(cfg):
        first = needed[0]
        raise ConfigError(
            f"a distributed run cannot train its {first.name} first: train it with python -m rsbench "
            f"{' '.join(first.overrides)} dataset={cfg.dataset.name} (same recipe), then pass "
            f"method.{first.argument}=<its run>/checkpoints/{first.checkpoint}.ckpt"
        )
    return [_plan(cfg, prerequisite) for prerequisite in needed]


def _plan(cfg: DictConfig, prerequisite: Prerequisite) -> PlannedRun:
    """Compose the prerequisite's config and name its directory."""
    replaced = {*(override_key(arg) for arg in prerequisite.overrides), *RUN_ONLY}
    overrides = tuple(
        [arg for arg in _run_overrides() if override_key(arg).split(".")[0] not in replaced]
        + list(prerequisite.overrides)
        + _role(prerequisite.checkpoint)
        + _kept(cfg, prerequisite.keep)
    )
    with _hydra():
        planned = compose("config", overrides=[*overrides, *_search_path()])
    keys = [key for key in TRAINED if key != "callbacks"]  # checkpoint paths depend on the directory, not the recipe
    recipe = json.dumps(settings(planned, keys), sort_keys=True, default=str)
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:10]
    name = f"{planned.arch.arch}_sigma{planned.sigma}_seed{planned.seed}_{digest}"
    directory = Path(cfg.prerequisite_dir).expanduser() / prerequisite.folder / str(planned.dataset.name) / name
    OmegaConf.update(planned, "output_dir", str(directory))
    return PlannedRun(prerequisite, planned, overrides, directory)


def _role(checkpoint: str) -> list[str]:
    """What a prerequisite run does, whatever the method: it trains, keeps ``checkpoint``, and certifies nothing."""
    return [
        *("certify=off", "logger=csv", "train=true", "test=true"),
        f"test_ckpt={checkpoint}",
        *("ckpt_path=null", "allow_sigma_mismatch=false"),
    ]


def _kept(cfg: DictConfig, keys: Sequence[str]) -> list[str]:
    """``key=value`` overrides that copy ``keys`` of ``cfg`` (lists as ``[a,b]``; keys that are unset are left out)."""
    kept = []
    for key in keys:
        value: Any = OmegaConf.select(cfg, key)
        if value is None:
            continue
        if isinstance(value, ListConfig | list):
            value = f"[{','.join(str(item) for item in value)}]"
        kept.append(f"{key}={value}")
    return kept


def _distributed(cfg: DictConfig) -> bool:
    strategy, devices = str(cfg.trainer.get("strategy")), cfg.trainer.get("devices")
    nodes = cfg.trainer.get("num_nodes")
    return "ddp" in strategy or devices not in (1, "1", None) or nodes not in (1, None)


def _run_overrides() -> list[str]:
    return [str(arg) for arg in HydraConfig.get().overrides.task] if HydraConfig.initialized() else []


def _search_path() -> list[str]:
    """The run's ``hydra.searchpath`` override, so the prerequisite finds the same user configs."""
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
