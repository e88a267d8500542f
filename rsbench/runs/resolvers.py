"""OmegaConf resolvers that let method configs take the authors' defaults per dataset and sigma.

A method YAML writes, for a hyperparameter whose published value depends on sigma (and the dataset)::

    lbd: "${rs.lookup:{0.25: 0.5, 0.5: 1.0, 1.0: 2.0},${sigma}}"
    num_steps: "${rs.lookup:{cifar10: {0.25: 4, 1.0: 4}, mnist: {0.25: 2, 1.0: 8}},${dataset.family},${sigma}}"

``dataset.family`` names the dataset whose published values apply (``mnist`` for the embedded subset). So
``python -m rsbench method=catrs dataset=cifar10 sigma=1.0`` resolves to the published value, ``--cfg job`` shows
the whole table, and an explicit override (``method.lbd=4``) replaces the lookup. A combination the table does not
cover fails with a message naming the key, the values and what to set instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import DictConfig, Node, OmegaConf

from rsbench.errors import ConfigError
from rsbench.methods.card import first_method_epoch, method_card, origins
from rsbench.runs import naming


def lookup(table: Mapping[Any, Any], *keys: Any, _node_: Node | None = None) -> Any:
    """``table[keys[0]][keys[1]]...``, matching float keys to 1e-9 (so ``sigma=1`` finds ``1.0``).

    Raises:
        ConfigError: a key is not in its table; the message names the config key and the keys available.
    """
    value: Any = table
    for depth, key in enumerate(keys):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{_where(_node_)}: the table has {depth} levels, but {len(keys)} keys were given")
        match = _find(value, key)
        if match is _MISSING:
            where = _where(_node_)
            raise ConfigError(
                f"{where}: the authors' defaults cover {_describe(value)}, not {key!r}; "
                f"set {where}=<value> explicitly to run this combination"
            )
        value = value[match]
    return value


_MISSING = object()


def _find(table: Mapping[Any, Any], key: Any) -> Any:
    if key in table:
        return key
    if isinstance(key, int | float) and not isinstance(key, bool):
        for candidate in table:
            if isinstance(candidate, int | float) and math.isclose(candidate, key, rel_tol=1e-9, abs_tol=1e-12):
                return candidate
    return _MISSING


def _describe(table: Mapping[Any, Any]) -> str:
    return ", ".join(repr(k) for k in table)


def _where(node: Node | None) -> str:
    if node is None:
        return "this value"
    return str(node._get_full_key(None))


def register_resolvers() -> None:
    """Register rsbench's resolvers with OmegaConf (idempotent)."""
    OmegaConf.register_new_resolver("rs.lookup", lookup, replace=True)
    # Run names from the task overrides (rsbench/runs/naming.py): sweep folders, W&B names, groups and tags.
    OmegaConf.register_new_resolver("rs.job_dir", job_dir, replace=True)
    # ${rs.first:a,b}: a, or b when a is null (output_dir under --cfg job, before Hydra has made the run directory)
    OmegaConf.register_new_resolver("rs.first", first_set, replace=True)
    OmegaConf.register_new_resolver("rs.prerequisite_dir", prerequisite_dir, replace=True)
    # the form before prerequisite_dir, in the .hydra/config.yaml of runs made then: it still resolves as it did
    OmegaConf.register_new_resolver(
        "rs.teacher_dir", lambda *where: f"{prerequisite_dir(*where)}/teachers", replace=True
    )
    OmegaConf.register_new_resolver("rs.certify_dir", certify_dir, replace=True)
    OmegaConf.register_new_resolver("rs.threat_suffix", threat_suffix, replace=True)
    # What the method cards say (rsbench/methods/*_card.py): a method's certification defaults, the importer's origins.
    OmegaConf.register_new_resolver("rs.certify_default", certify_default, replace=True)
    OmegaConf.register_new_resolver("rs.origins", lambda: " | ".join(sorted(origins())), replace=True)
    OmegaConf.register_new_resolver("rs.first_method_epoch", method_epoch, replace=True)
    for name, function in (
        ("rs.run_name", naming.run_name),
        ("rs.group_name", naming.group_name),
        ("rs.run_tags", naming.run_tags),
    ):
        OmegaConf.register_new_resolver(name, _with_override_list(function), replace=True)


def job_dir(num: Any, overrides: Any, _root_: Any = None) -> str:
    """``${rs.job_dir:<job number>,${hydra.overrides.task}}``: the job's sweep folder (:func:`naming.job_dirname`).

    The sweep directory (``hydra.sweep.dir`` of the config being resolved) is passed along, so that a job a sweep
    started under the older naming keeps its folder.
    """
    sweep_dir = OmegaConf.select(_root_, "hydra.sweep.dir", default=None) if _root_ is not None else None
    return naming.job_dirname(int(num), [str(o) for o in overrides], sweep_dir)


def first_set(*values: Any) -> Any:
    """The first value that is not ``None`` (``None`` if all are).

    >>> first_set(None, "outputs/run")
    'outputs/run'
    """
    return next((value for value in values if value is not None), None)


def threat_suffix(noise: Any) -> str:
    """``${rs.threat_suffix:<noise name>}``: ``""`` for Gaussian noise (l2), else ``_<noise>`` (``_laplace``: l1).

    Appended to a run folder's sigma part, so that runs of another threat model do not land beside the l2 ones
    (``outputs/<dataset>/<method>/sigma_0.5_laplace/...``); Gaussian runs keep their folders.
    """
    name = str(noise or "gaussian")
    return "" if name == "gaussian" else f"_{name}"


def certify_dir(kind: Any, _root_: Any = None) -> str:
    """``${rs.certify_dir:${hydra:runtime.choices.model}}``: a ``rsbench.certify`` run's folder.

    See :func:`naming.certify_dirname`.

    Reads the config's ``model`` and ``certify.sigma`` as written (unresolved): a value not set yet names nothing.
    """
    model = OmegaConf.select(_root_, "model", default=None) if _root_ is not None else None
    written = OmegaConf.to_container(model, resolve=False) if isinstance(model, DictConfig) else None
    sigma = (
        OmegaConf.select(_root_, "certify.sigma", default=None, throw_on_missing=False) if _root_ is not None else None
    )
    written_model = {str(key): value for key, value in written.items()} if isinstance(written, dict) else None
    return naming.certify_dirname(str(kind), written_model, sigma)


def prerequisite_dir(mode: Any, sweep_dir: Any) -> str:
    """Where the runs a method needs first go: a sweep's own folder in a sweep, else ``outputs``.

    Each method's go in the folder its card names there (CAT-RS's teachers: ``outputs/teachers``).

    >>> prerequisite_dir("RunMode.MULTIRUN", "multirun/x"), prerequisite_dir("RunMode.RUN", "multirun/x")
    ('multirun/x', 'outputs')
    """
    return str(sweep_dir) if str(mode).upper().endswith("MULTIRUN") else "outputs"


def certify_default(key: Any, *methods: Any) -> Any:
    """``${rs.certify_default:<key>,<method>[,<method>...]}``: a certification default from the methods' cards.

    A method's YAML takes each certification default of its models from its card (``sigma_samples:
    ${rs.certify_default:sigma_samples,macer}``); with several methods the last card that sets ``key`` wins, so DDRS
    takes its base method's value over its own (``sigma_samples,ddrs,${method.base}``).

    >>> certify_default("sigma_samples", "ddrs", "macer"), certify_default("sigma_objective", "ddrs", "macer")
    (8, 'radius')

    Raises:
        ConfigError: a method has no card, or no card of them sets ``key``.
    """
    found = [
        card.certify_defaults[str(key)] for card in map(method_card, map(str, methods)) if key in card.certify_defaults
    ]
    if not found:
        names = ", ".join(str(m) for m in methods)
        raise ConfigError(f"no certification default {key!r} in the method card of {names} (rsbench/methods/*_card.py)")
    return found[-1]


def method_epoch(method: Any) -> int:
    """``${rs.first_method_epoch:${method}}``: the first epoch whose checkpoint is the method (its card says; else 0).

    >>> method_epoch({"_target_": "rsbench.methods.sun2025.Sun2025", "ds_hard": True, "ds_epoch": 8})
    8
    >>> method_epoch({"_target_": "rsbench.methods.gaussian.GaussianAugmentation"})
    0
    """
    return first_method_epoch(method)[0]


def _with_override_list(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function(method, dataset, sigma, overrides)`` taking Hydra's override ListConfig as a list of strings."""
    return lambda method, dataset, sigma, overrides: function(str(method), str(dataset), sigma, list(overrides))
