"""The composed config checked before a run imports torch: required values, settings, files, a busy run directory.

:mod:`rsbench.runs.request` refuses a misspelt option or key, or a value of the wrong kind; this module composes the
whole command line (as Hydra will) and refuses what would otherwise surface after seconds of torch and Lightning
imports, or as a many-line traceback:

- a required value left unset (``???``: ``model.path`` of ``python -m rsbench.certify``, ``model.input_layer.kind``
  of ``model=module``), named with what it is (the comment beside it in its YAML) instead of OmegaConf's
  ``MissingMandatoryValue``;
- a certification count or subset that cannot be right (``certify.n=0``, ``certify.start=500`` beyond the test
  split of a stock dataset);
- ``trainer=gpu`` on a machine with no GPU device at all;
- a training run that ends before the epoch from which its method's checkpoints are the method (its card's
  :class:`~rsbench.methods.card.MethodEpoch`: ``method=sun2025`` with ``trainer.max_epochs`` <= ``method.ds_epoch``);
- a checkpoint the config names that is not a file (``ckpt_path``, a method card's checkpoint arguments such as
  ``method.teacher_ckpt``, the files of ``model=checkpoint|ensemble|torchscript|exported|denoised``);
- a run directory (``hydra.run.dir``, ``resume=``) that another process is writing.

Each message is the one the run's own, later check gives (tests compare them); those checks stay, for what this one
cannot judge (a custom dataset's size, a GPU that torch cannot use, a sweep's jobs). A sweep is only checked for
required values: its jobs record their own failures and the others run.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rsbench.certify.algorithm.checks import check_alpha, check_count, settings_error
from rsbench.certify.pipeline.dual_checks import check_dual_threat
from rsbench.certify.pipeline.subset import certification_indices, require_images
from rsbench.errors import ConfigError
from rsbench.methods.card import find_card, first_method_epoch
from rsbench.models.files import MODEL_FILES, check_model_file
from rsbench.runs.cli import DUAL, MULTIRUN_FLAGS, Command, config_dir
from rsbench.runs.layout_choice import check_layout
from rsbench.runs.lock import busy_error, is_global_zero, is_held

GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
"""Device files of an NVIDIA GPU, an AMD (ROCm) GPU and a WSL 2 GPU: without any of them torch finds no GPU."""

ROUTER_AS_CLASSIFIER = "router_denoiser.classifier"
ROUTERLESS_STAGES = ("labels", "iterate")
"""The ``python -m rsbench.dual`` stages that read no router (labels certify the experts; iterate trains its own)."""
"""The ``classifier`` of a router's denoiser node (``conf/model/denoised.yaml``'s): the router is it, so its unset
values are not asked for and its files not checked (:func:`rsbench.models.dual.build_router` leaves it out)."""

CONFIG_FLAGS = frozenset({"-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir"})
"""Hydra's flags that choose another primary config than the command's (then nothing is checked here)."""

_COMMENTED = re.compile(r"^(?P<indent>\s*)(?P<key>[^\s#:][^:#]*?):(?P<value>[^#]*?)(?:\s+#\s*(?P<comment>.*))?$")


def check_before_run(argv: Sequence[str], command: Command) -> None:
    """Refuse a command line whose composed config cannot run (see the module docstring), before torch is imported.

    Args:
        argv: the command line (after ``resume=`` was expanded), not a query (``--help``, ``--cfg``).
        command: the command it runs (``python -m rsbench`` or ``python -m rsbench.certify``).

    Raises:
        ConfigError: a required value is unset, a setting cannot be right, a named checkpoint is not a file.
        RunDirectoryBusyError: another process holds the run directory.
    """
    if any(arg.split("=", 1)[0] in CONFIG_FLAGS for arg in argv):
        return  # another primary config than the command's: its own checks judge it
    overrides, run_dir, sweep = _overrides(argv)
    if overrides is None:
        return  # Hydra's own parser will name the syntax error
    composed = _compose(command.config_name, overrides)
    if composed is None:
        return  # Hydra names what it refuses when the run composes
    cfg, choices = composed
    if command == DUAL or _get(cfg, "model.kind") == "dual":
        check_dual_threat(_get(cfg, "certify") or {})
    routerless = command == DUAL and _get(cfg, "stage") in ROUTERLESS_STAGES
    check_required(cfg, choices, ignored=("router.",) if routerless else ())
    if sweep:
        return
    if run_dir is not None and is_global_zero():
        check_free(Path(run_dir))
    check_certify(cfg, certifies=(not command.trains or bool(_get(cfg, "test"))) and bool(_get(cfg, "certify.enabled")))
    if command.trains:
        check_accelerator(str(_get(cfg, "trainer.accelerator", "auto")))
        check_layout(_get(cfg, "train_layout", "contiguous"))
        check_training_files(cfg, choices.get("method"))
        if bool(_get(cfg, "train", True)) and bool(_get(cfg, "test", True)):  # test=false: trained on elsewhere
            _check_method_epoch(cfg)
    else:
        check_model_files(cfg)


def check_required(cfg: Any, choices: Mapping[str, str], ignored: Sequence[str] = ()) -> None:
    """Refuse a config with required values (``???``) left unset, naming each and what it is.

    Keys starting with one of ``ignored`` are not required (``router.`` for the dual stages that read no router).

    Raises:
        ConfigError: ``model=module leaves required values unset: model.input_layer.kind (normalize (mean, std),
            center (mean) or identity), ...; set each on the command line (key=value)``.
    """
    missing = sorted(
        key for key in _missing_keys(cfg, "") if ROUTER_AS_CLASSIFIER not in key and not key.startswith(tuple(ignored))
    )
    if not missing:
        return
    found = {key: describe_key(key, choices) for key in missing}
    sources = {source for source, _ in found.values()}
    chosen = f"{sources.pop()} leaves" if len(sources) == 1 and "" not in sources else "the config leaves"
    described = [f"{key} ({hint})" if hint else key for key, (_, hint) in found.items()]
    values = "a required value" if len(missing) == 1 else "required values"
    raise ConfigError(
        f"{chosen} {values} unset: {', '.join(described)}; set each on the command line ({missing[0]}=<value>); "
        "--help shows examples, --cfg job the whole config"
    )


def describe_key(key: str, choices: Mapping[str, str]) -> tuple[str, str]:
    """Where a required key comes from (``model=module``) and what it is, from the comment beside it in that YAML.

    ``model.input_layer.kind`` with ``model=module`` reads ``conf/model/module.yaml``: ``kind: ???`` has no comment,
    its parent ``input_layer:`` says ``normalize (mean, std), center (mean) or identity``. A key of a global option
    (``init_ckpt`` of ``experiment=...``) is looked up in the chosen options that are ``# @package _global_``.
    Either part is ``""`` where unknown.
    """
    group, *inside = key.split(".")
    candidates = [(group, choices[group], inside)] if inside and group in choices else []
    candidates += [(g, option, [group, *inside]) for g, option in choices.items() if g != group]
    for name, option, parts in candidates:
        path = config_dir() / name / f"{option}.yaml"
        if not path.is_file() or (name != group and not path.read_text().startswith("# @package _global_")):
            continue
        comments = _comments(path.read_text())
        if tuple(parts) in comments:
            hint = next(
                (comments[tuple(parts[:d])] for d in range(len(parts), 0, -1) if comments[tuple(parts[:d])]), ""
            )
            return f"{name}={option}", hint
    return "", ""


def _comments(text: str) -> dict[tuple[str, ...], str]:
    """Each key of a YAML file (as its path of names) with the comment on its line (``""`` for none)."""
    comments: dict[tuple[str, ...], str] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        match = _COMMENTED.match(line)
        if match is None or line.lstrip().startswith(("#", "-")):
            continue
        indent = len(match.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group("key").strip()))
        comments[tuple(name for _, name in stack)] = (match.group("comment") or "").strip()
    return comments


def check_certify(cfg: Any, certifies: bool) -> None:
    """Refuse certification counts and subsets that cannot be right, as the run's settings would.

    Checked even when certification is off (as the run does); whether the subset selects a test image only when the
    run certifies, and only for a dataset whose config states its test split's size (``dataset.test_size``, as every
    stock dataset's does: a split on disk is never larger, so a subset refused here would be refused by the run too).

    Raises:
        ConfigError: naming the ``certify.<key>``, its value and what is allowed.
    """
    node = _get(cfg, "certify")
    if node is None:
        return
    alpha = node.get("alpha")
    start, skip, max_images = node.get("start", 0), node.get("skip", 1), node.get("max_images")
    subset = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, skip)) and (
        max_images is None or (isinstance(max_images, int) and not isinstance(max_images, bool))
    )  # (else a type the run's schema names)
    try:  # the settings' own checks, in their order (rsbench.certify.pipeline.settings)
        check_count(n0=node.get("n0"), n=node.get("n"))
        if isinstance(alpha, int | float) and not isinstance(alpha, bool):
            check_alpha(alpha)
        if subset:
            certification_indices(1, start, skip, max_images)
    except ValueError as error:
        raise settings_error(error) from None
    if not subset:
        return
    size = _get(cfg, "dataset.test_size")
    if certifies and isinstance(size, int) and not isinstance(size, bool):
        require_images(size, start, skip, max_images, f"the {_get(cfg, 'dataset.name', 'dataset')} test split")


def check_accelerator(accelerator: str) -> None:
    """Refuse ``trainer.accelerator=gpu`` where the machine has no GPU device at all (:data:`GPU_DEVICES`).

    macOS (Apple's GPU) and a machine with a GPU device are left to the run's own check, which asks torch.

    Raises:
        ConfigError: naming the accelerator and what to use instead, as the run's check does.
    """
    if accelerator not in ("gpu", "cuda") or sys.platform == "darwin":
        return
    if any(Path(device).exists() for device in GPU_DEVICES):
        return
    raise no_gpu_error(accelerator, f"no GPU device: {', '.join(GPU_DEVICES)}")


def no_gpu_error(accelerator: str, why: str) -> ConfigError:
    """The refusal of ``trainer.accelerator=gpu`` on a machine without a GPU (``why``: how that was found out)."""
    return ConfigError(
        f"trainer.accelerator={accelerator} (trainer=gpu) needs a GPU, and this machine has none ({why}): use "
        "trainer=default (a GPU when there is one, else the CPU) or trainer=cpu"
    )


def check_method_epoch(method: Mapping[str, Any], max_epochs: Any) -> None:
    """Refuse to train ``max_epochs`` epochs when none of them is the method (its card's first epoch comes later).

    Only a run that tests (certifies its selected checkpoint) is checked: one with ``test=false`` may train the
    epochs before the method deliberately, to be continued from its last checkpoint (MACER's deferred lambda-0
    epochs in experiments/fashion_mnist_macer_lambda/run.sh).

    Args:
        method: the method's config node (``cfg.method``).
        max_epochs: ``trainer.max_epochs`` (``None`` or -1: no limit, nothing to check).

    Raises:
        ConfigError: naming the method, its first epoch, what it trains before it, ``trainer.max_epochs`` and the
            keys to change.
    """
    if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 0:
        return
    epoch, card = first_method_epoch(method)
    if card is None or card.method_epoch is None or epoch < max_epochs:
        return
    keys = ", ".join(f"method.{key}" for key in card.method_epoch.keys)
    raise ConfigError(
        f"method={card.name} is itself from epoch {epoch} on (0-indexed; before it: {card.method_epoch.before}), "
        f"but trainer.max_epochs={max_epochs} ends before it, so no checkpoint would be {card.name}: raise "
        f"trainer.max_epochs above {epoch}, or set an earlier epoch ({keys})"
    )


def _check_method_epoch(cfg: Any) -> None:
    """:func:`check_method_epoch` of the composed config; a value only the run can resolve is left to the run."""
    from omegaconf.errors import OmegaConfBaseException

    method = _get(cfg, "method")
    if not isinstance(method, Mapping):
        return
    try:
        check_method_epoch(method, _get(cfg, "trainer.max_epochs"))
    except OmegaConfBaseException:
        return


def check_training_files(cfg: Any, method: str | None) -> None:
    """Refuse ``ckpt_path`` and the method card's checkpoint arguments (``method.teacher_ckpt``) naming no file.

    Raises:
        ConfigError: ``ckpt_path='x.ckpt' is not a file`` (the messages of the run's checks).
    """
    keys = ["ckpt_path"]
    card = find_card(method) if method else None
    if card is not None:
        keys += card.checkpoint_keys
    for key in keys:
        require_file(key, _get(cfg, key))


def require_file(key: str, value: Any) -> None:
    """Refuse ``key=value`` naming a file that is not there (an empty or unset value names none).

    Raises:
        ConfigError: ``ckpt_path='x.ckpt' is not a file``.
    """
    if isinstance(value, str) and value and not Path(value).expanduser().is_file():
        raise ConfigError(f"{key}={value!r} is not a file")


def check_model_files(cfg: Any) -> None:
    """Refuse a ``model`` (of ``python -m rsbench.certify``) whose checkpoint or archive is not a file.

    Raises:
        ConfigError: ``model: checkpoint x.ckpt is not a file`` (the builder's message, prefixed by its key).
    """
    for key, node in _model_nodes(_get(cfg, "model"), "model"):
        if ROUTER_AS_CLASSIFIER in key:
            continue
        target = str(node.get("_target_"))
        argument = MODEL_FILES[target][0] if target in MODEL_FILES else None
        value = node.get(argument) if argument else None
        paths = [value] if isinstance(value, str) else list(value) if value is not None and _is_list(value) else []
        for path in (p for p in paths if isinstance(p, str)):
            try:
                check_model_file(target, path)
            except ConfigError as error:
                raise ConfigError(f"{key}: {error}") from None


def check_free(run_dir: Path) -> None:
    """Refuse a run directory another live process holds (the message of :class:`~rsbench.runs.lock.RunLock`).

    Raises:
        RunDirectoryBusyError: naming the holder and what to do.
    """
    if is_held(run_dir):
        raise busy_error(run_dir)


def _missing_keys(node: Any, prefix: str) -> Iterator[str]:
    """The dotted keys under ``node`` whose value is ``???`` (nothing is resolved: interpolations stay as written)."""
    from omegaconf import DictConfig, ListConfig

    items = node.items_ex(resolve=False) if isinstance(node, DictConfig) else enumerate(node)
    for name, _ in items:
        child = node._get_node(name)
        key = f"{prefix}{name!s}"
        if child is None:
            continue
        if child._is_missing() and not child._is_interpolation():
            yield key
        elif isinstance(child, DictConfig | ListConfig) and not child._is_none():
            yield from _missing_keys(child, f"{key}.")


def _model_nodes(node: Any, key: str) -> Iterator[tuple[str, Any]]:
    """Each node with a ``_target_`` at or under ``node`` (``model``, ``model.classifier``), with its key.

    The nodes under a node come first, in the order Hydra builds them (its arguments before it).
    """
    from omegaconf import DictConfig

    if not isinstance(node, DictConfig):
        return
    for name in node:
        child = node._get_node(str(name))
        if isinstance(child, DictConfig):
            yield from _model_nodes(child, f"{key}.{name!s}")
    if "_target_" in node:
        yield key, node


def _is_list(value: Any) -> bool:
    from omegaconf import ListConfig

    return isinstance(value, list | tuple | ListConfig)


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    """``cfg``'s value at ``key``, or ``default`` where it is unset or needs the running app to resolve."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(cfg, key, default=default, throw_on_missing=False)
    except Exception:  # an interpolation only Hydra's running app resolves (${hydra:...})
        return default


def _overrides(argv: Sequence[str]) -> tuple[list[str] | None, str | None, bool]:
    """The overrides to compose (a sweep's first value of each), ``hydra.run.dir`` if given, and whether it sweeps."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep

    parser = OverridesParser.create()
    chosen: list[str] = []
    run_dir = None
    sweep = any(arg in MULTIRUN_FLAGS for arg in argv)
    for arg in argv:
        if arg.startswith("-"):
            continue
        try:
            override = parser.parse_override(arg)
        except Exception:
            return None, None, sweep
        key = override.get_key_element()
        if override.key_or_group == "hydra.run.dir" and not override.is_sweep_override():
            given = override.value()
            run_dir = given if isinstance(given, str) and "${" not in given else None
        if override.key_or_group.startswith("hydra") and override.key_or_group != "hydra.searchpath":
            continue
        if override.is_sweep_override():
            value = override.value()
            if not isinstance(value, ChoiceSweep) or not value.list:
                return None, run_dir, sweep  # ranges, globs: the jobs check themselves
            chosen.append(f"{key}={_override_text(value.list[0])}")
        else:
            chosen.append(arg)
    return chosen, run_dir, sweep


def _override_text(value: Any) -> str:
    """A parsed value as override text Hydra reads back (quoted strings, lists in brackets)."""
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ",".join(_override_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_override_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _compose(config_name: str, overrides: Sequence[str]) -> tuple[Any, dict[str, str]] | None:
    """The composed config (without ``hydra``) and the group choices, or ``None`` where Hydra refuses it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
            cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    except Exception:
        return None
    choices = {str(k): str(v) for k, v in (OmegaConf.select(cfg, "hydra.runtime.choices") or {}).items()}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices
