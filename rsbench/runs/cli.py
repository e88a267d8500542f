"""The command line before Hydra sees it: where the configs are, ``resume=<run dir>``, and what is only a query.

Nothing here imports torch: ``--help`` and ``--cfg job`` must answer at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rsbench.errors import ConfigError
from rsbench.runs.quoting import override, override_key, unquote

QUERY_FLAGS = frozenset(
    {"--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i", "--shell-completion", "-sc", "--version"}
)
HELP_FLAGS = frozenset({"--help", "-h", "--hydra-help"})
MULTIRUN_FLAGS = frozenset({"--multirun", "-m"})
RESUME = "resume"
RUN_CONFIG = ".hydra"  # where a run keeps the config it was started with (config.yaml, overrides.yaml, hydra.yaml)


@dataclass(frozen=True)
class Command:
    """A command that runs one job per run directory (:mod:`rsbench.runs.commands` runs it).

    Attributes:
        module: what ``python -m`` runs (``rsbench``, ``rsbench.certify``); printed in resume hints.
        config_name: its primary config in ``conf/``.
        trains: whether it trains (a resumed run keeps its training settings) or only certifies a model (a resumed
            run keeps its model and dataset).
    """

    module: str
    config_name: str
    trains: bool


TRAIN = Command(module="rsbench", config_name="config", trains=True)
CERTIFY = Command(module="rsbench.certify", config_name="certify_model", trains=False)
DUAL = Command(module="rsbench.dual", config_name="dual", trains=False)
COMMANDS = (TRAIN, CERTIFY, DUAL)
CHANGED_DEFAULTS: dict[Command, dict[str, str]] = {TRAIN: {"train_layout": "contiguous"}}
"""Defaults that changed after runs were made, with the value a run that has none recorded had: a resumed run keeps
its own (``train_layout``: ``auto`` since channels-last trained cells pair with the authors' runs; a run started under
the old default was contiguous)."""


def config_dir() -> Path:
    """The folder of rsbench's Hydra configs: ``rsbench/conf`` in an installed wheel, ``conf/`` in a checkout."""
    package = Path(__file__).resolve().parents[1]  # rsbench/
    for candidate in (package / "conf", package.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"rsbench's configs are missing: neither {package / 'conf'} nor {package.parent / 'conf'}")


def is_query(argv: Sequence[str]) -> bool:
    """Whether the command only prints something (help, the composed config) instead of running a job."""
    return any(arg in QUERY_FLAGS for arg in argv)


def share_config_store() -> None:
    """Let Hydra's ``--help`` reuse its config store instead of deep-copying it once per config group.

    Hydra copies its config repository for every group it lists, and with it the process-wide ``ConfigStore``
    singleton (every installed plugin's structured configs): about 120 copies, 1.3 s of a 2.1 s ``--help`` with the
    Optuna and submitit plugins installed. The store is only read while listing, so the copies can share it.
    """
    from hydra.core.config_store import ConfigStore

    ConfigStore.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]


def expand_resume(argv: Sequence[str], command: Command = TRAIN) -> list[str]:
    """Replace ``resume=<run dir>`` by that run's own overrides, the ones given now, and ``hydra.run.dir=<run dir>``.

    The run's overrides come from ``<run dir>/.hydra/overrides.yaml`` (and its ``hydra.searchpath`` from
    ``hydra.yaml``); an override given now replaces the stored one with the same key. Whether the result may
    continue the run (same training settings) is checked by the job, which names any difference. The run directory
    may be written as typed or in Hydra's quotes; ``hydra.run.dir`` gets it quoted where Hydra's grammar needs it
    (a sweep folder named by an older rsbench holds ``=`` and ``,``).

    Raises:
        ConfigError: ``resume`` is combined with ``-m`` or ``hydra.run.dir``, names no run directory, or names one
            that another command wrote (the message gives that command).
    """
    requests = [arg for arg in argv if override_key(arg) == RESUME and "=" in arg]
    if not requests:
        return list(argv)
    if len(requests) > 1:
        raise ConfigError(f"resume= was given {len(requests)} times; give one run directory")
    if any(arg in MULTIRUN_FLAGS for arg in argv):
        raise ConfigError("resume= continues one run; to continue a sweep, rerun it with the same hydra.sweep.dir")
    if any(override_key(arg) == "hydra.run.dir" for arg in argv):
        raise ConfigError("resume=<run dir> already sets hydra.run.dir; give only one of them")
    run_dir = Path(unquote(requests[0].split("=", 1)[1])).expanduser()
    stored = _stored_overrides(run_dir, command)
    given = {override_key(arg) for arg in argv} - {"", RESUME}
    kept = [arg for arg in stored if override_key(arg) not in given]
    position = argv.index(requests[0])
    # hydra.run.dir beside the replayed overrides, not at the end: after a flag (--cfg job) argparse refuses it
    return [*argv[:position], *kept, override("hydra.run.dir", run_dir), *argv[position + 1 :]]


def _stored_overrides(run_dir: Path, command: Command) -> list[str]:
    from omegaconf import OmegaConf

    overrides = run_dir / RUN_CONFIG / "overrides.yaml"
    if not overrides.is_file():
        raise ConfigError(
            f"resume={run_dir}: no rsbench run there ({overrides} is missing); give the directory a run wrote into "
            "(it holds .hydra/, checkpoints/, certify.tsv)"
        )
    task = [str(arg) for arg in OmegaConf.to_container(OmegaConf.load(overrides))]  # type: ignore[union-attr]
    hydra_file = run_dir / RUN_CONFIG / "hydra.yaml"
    if hydra_file.is_file():
        hydra = OmegaConf.load(hydra_file)
        config_name = OmegaConf.select(hydra, "hydra.job.config_name", default=None)
        other = next((c for c in COMMANDS if c.config_name == config_name and c != command), None)
        if other is not None:
            from rsbench.runs.quoting import resume_command

            raise ConfigError(
                f"{run_dir} is a run of python -m {other.module}, not of python -m {command.module}: resume it with "
                f"{resume_command(other.module, run_dir)}"
            )
        stored = OmegaConf.select(hydra, "hydra.overrides.hydra", default=[]) or []
        task += [str(arg) for arg in stored if override_key(str(arg)) == "hydra.searchpath"]
    return [*task, *_pinned_defaults(run_dir, command, task)]


def _pinned_defaults(run_dir: Path, command: Command, task: Sequence[str]) -> list[str]:
    """Overrides that keep a resumed run on the defaults it started under (:data:`CHANGED_DEFAULTS`).

    A key the run's overrides set is left to them; otherwise the value comes from the run's ``.hydra/config.yaml``,
    or is the old default when the run recorded none.
    """
    from omegaconf import OmegaConf

    changed = CHANGED_DEFAULTS.get(command, {})
    given = {override_key(arg) for arg in task}
    config_file = run_dir / RUN_CONFIG / "config.yaml"
    config = OmegaConf.load(config_file) if config_file.is_file() and changed else None
    pinned = []
    for key, old_default in changed.items():
        if key in given:
            continue
        value = OmegaConf.select(config, key, default=None) if config is not None else None
        pinned.append(override(key, str(old_default if value is None else value)))
    return pinned
