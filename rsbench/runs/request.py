"""The command line checked before a run imports torch: option names, keys and the type of each value.

A misspelt option (``method=catr``), an unknown key (``sigmaa=0.5``) or a value of the wrong kind (``sigma=abc``,
``trainer.max_epochs=abc``) would otherwise surface after seconds of imports, as Hydra's many-line block or as an
error deep in a library. :func:`check_request` refuses them at once, in one line that names the override, what is
allowed, and the close names when there are any. It composes the YAML alone (no schema, no torch); what it cannot
judge (a plugin's config group, an interpolated value) is left to the run's own checks, which come later.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rsbench.errors import ConfigError
from rsbench.runs.cli import MULTIRUN_FLAGS, config_dir

POLYMORPHIC = frozenset({"trainer.devices", "trainer.strategy", "trainer.precision", "trainer.accelerator"})
"""Keys whose value may be a number or a name (Lightning's ``devices=auto``, ``precision=16``): not type-checked."""


@dataclass(frozen=True)
class _Override:
    key: str
    values: tuple[Any, ...]  # one value, or every value of a sweep (``a,b``, ``choice(a,b)``)
    text: str
    adds: bool  # +key=, ++key= or ~key: the key need not exist


def check_request(argv: Sequence[str], config_name: str, folder: Path | None = None) -> None:
    """Refuse a command line whose options, keys or values cannot be right, before anything heavy is imported.

    Args:
        argv: the command line (after ``resume=`` was expanded).
        config_name: the command's primary config in ``folder``.
        folder: the command's config folder (default: ``conf/``, :func:`rsbench.runs.cli.config_dir`).

    Raises:
        ConfigError: naming the override, what is allowed, and the close names.
    """
    overrides = _parse(argv)
    if overrides is None:
        return  # Hydra's own parser will name the syntax error
    folder = folder or config_dir()
    search = _search_dirs(overrides, folder)
    groups = [o for o in overrides if search is not None and _is_group(o.key, search)]
    for override in groups:
        assert search is not None
        _check_options(override, search)
    base = _compose(config_name, [o for o in overrides if o in groups or o.key.startswith("hydra.")], folder)
    if base is None:
        return
    for override in overrides:
        if override in groups or override.key.startswith("hydra") or override.key.split(".")[0] == "resume":
            continue
        _check_value(base, override)


def _parse(argv: Sequence[str]) -> list[_Override] | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep

    parser = OverridesParser.create()
    parsed = []
    for arg in argv:
        if arg.startswith("-") or arg in MULTIRUN_FLAGS:
            continue
        try:
            override = parser.parse_override(arg)
        except Exception:
            return None
        value = override.value()
        values: tuple[Any, ...]
        if isinstance(value, ChoiceSweep):
            values = tuple(value.list)
        elif override.is_sweep_override():
            values = ()  # ranges, globs, intervals: not checked
        else:
            values = (value,)
        key = override.key_or_group
        adds = override.is_add() or override.is_force_add() or override.is_delete()
        parsed.append(_Override(key, values, arg, adds))
    return parsed


def _search_dirs(overrides: Iterable[_Override], folder: Path) -> list[Path] | None:
    """``folder`` and the ``file://`` folders of ``hydra.searchpath`` (``None`` if a ``pkg://`` one is in it)."""
    folders = [folder]
    for override in overrides:
        if override.key != "hydra.searchpath" or not override.values:
            continue
        for entry in override.values[0] if isinstance(override.values[0], list) else [override.values[0]]:
            text = str(entry)
            if not text.startswith("file://"):
                return None  # a package on the search path: its options cannot be listed here
            folders.append(Path(text.removeprefix("file://")))
    return folders


def _is_group(key: str, search: Sequence[Path]) -> bool:
    if key.startswith("hydra") or "." in key:
        return False
    return any((folder / key).is_dir() for folder in search)


def _check_options(override: _Override, search: Sequence[Path]) -> None:
    options = sorted({path.stem for folder in search for path in (folder / override.key).glob("*.yaml")})
    for value in override.values:
        if value is not None:
            check_choice(override.key, value, options)


def _compose(config_name: str, overrides: Sequence[_Override], folder: Path) -> Any:
    """The config with the command line's group choices (a sweep's first value) and no other override."""
    from hydra import compose, initialize_config_dir

    chosen = []
    for override in overrides:
        if len(override.values) > 1:
            chosen.append(f"{override.key}={override.values[0]}")
        elif override.values or override.key.startswith("hydra."):
            chosen.append(override.text)
    try:
        with initialize_config_dir(version_base="1.3", config_dir=str(folder)):
            return compose(config_name, overrides=chosen)
    except Exception:  # anything Hydra refuses here, it names itself when the run composes
        return None


def _exists(base: Any, key: str) -> bool:
    """Whether ``key`` (dotted) is in the config, set or not (``???``)."""
    from omegaconf import DictConfig

    node = base
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node.keys():  # noqa: SIM118 (`in` is False for a ??? value)
            return False
        node = node._get_node(part)
    return True


def _check_value(base: Any, override: _Override) -> None:
    from omegaconf import OmegaConf

    if not _exists(base, override.key):
        if not override.adds:
            raise ConfigError(_unknown_key(base, override))
        return
    try:
        current = OmegaConf.select(base, override.key, default=None, throw_on_missing=False)
    except Exception:  # an interpolation that needs the running app (${hydra:...}): not judged here
        return
    if override.key in POLYMORPHIC:
        return
    for value in override.values:
        problem = _kind_problem(override.key, current, value)
        if problem:
            raise ConfigError(problem)


def _kind_problem(key: str, current: Any, value: Any) -> str | None:
    """Why ``value`` cannot replace ``current`` (a number by a word, a switch by anything but true/false), or None."""
    if isinstance(value, str) and "${" in value:
        return None  # an interpolation: resolved later
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if key == "sigma":
        if not number or not math.isfinite(value) or value <= 0:
            return f"sigma must be a number > 0 (e.g. 0.25, 0.5, 1.0), got {value!r}"
        return None
    if key == "trainer.max_epochs" and value is not None and (not isinstance(value, int) or value < -1):
        if not (isinstance(value, int) and not isinstance(value, bool)):
            return f"trainer.max_epochs must be a whole number of epochs (>= 1; -1: no limit), got {value!r}"
        return f"trainer.max_epochs must be >= 1 (or -1: no limit), got {value!r}"
    if isinstance(current, bool):
        if not isinstance(value, bool) and value is not None:
            return f"{key} must be true or false, got {value!r}"
    elif isinstance(current, int | float) and value is not None and not number:
        kind = "a whole number" if isinstance(current, int) else "a number"
        return f"{key} must be {kind} (as its default {current!r}), got {value!r}"
    return None


def check_choice(key: str, value: object, options: Sequence[str]) -> None:
    """Refuse ``key=value`` unless ``value`` is one of ``options``, naming the close ones.

    Raises:
        ConfigError: ``value`` is not an option.
    """
    if str(value) in options:
        return
    close = difflib.get_close_matches(str(value), list(options), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigError(f"{key}={value} is not an option of {key}; {hint}(the {key} options: {', '.join(options)})")


def _unknown_key(base: Any, override: _Override) -> str:
    """``<key>=...: no such key``, with the close keys and how to add one on purpose."""
    from omegaconf import DictConfig

    parent, _, name = override.key.rpartition(".")
    node = base
    for part in parent.split(".") if parent else []:
        node = node.get(part) if isinstance(node, DictConfig) else None
    siblings = [str(k) for k in node] if isinstance(node, DictConfig) else []
    prefix = f"{parent}." if parent else ""
    close = [prefix + c for c in difflib.get_close_matches(name, siblings, n=3, cutoff=0.6)]
    if not close:  # a misspelt group (certfy.n), or a key that lives elsewhere (model.sigma: certify.sigma)
        keys = _key_paths(base)
        close = [k for k in keys if k.rpartition(".")[2] == name and k != override.key][:3]
        close = close or difflib.get_close_matches(override.key, keys, n=3, cutoff=0.8)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    where = f"in {parent}" if parent and siblings else "in the config"
    return (
        f"{override.text}: there is no key {override.key} {where}; {hint}(--cfg job lists every key; "
        f"+{override.text} adds a new one)"
    )


def _key_paths(node: Any, prefix: str = "", depth: int = 3) -> list[str]:
    """The dotted keys of a composed config, ``depth`` levels deep (``certify.n``, ``model.path``, ...)."""
    from omegaconf import DictConfig

    if not isinstance(node, DictConfig) or depth == 0:
        return []
    paths = []
    for key in node:
        path = f"{prefix}{key!s}"
        paths.append(path)
        try:
            child = node._get_node(key)  # the node itself, not its (possibly unresolvable) value
        except Exception:  # an interpolation only the running app resolves
            continue
        paths += _key_paths(child, f"{path}.", depth - 1)
    return paths
