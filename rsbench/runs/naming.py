"""Names that say what a run varies, built from Hydra's task overrides (``hydra.overrides.task``).

A sweep such as ``python -m rsbench -m method=consistency method.lbd=5,10 seed=0,1`` gives each job

- a folder ``<job number>_method.lbd-5_method-consistency_seed-0`` (``hydra.sweep.subdir``), not ``0/``, that
  pastes back into an override (``resume=``, ``ckpt_path=``) as it is;
- a W&B run name ``consistency-mnist_embedded-sigma0.25[method.lbd=5,seed=0]``;
- a W&B group ``consistency-mnist_embedded-sigma0.25[method.lbd=5]``: the runs of one setting over seeds, which W&B
  draws as one line with a band;
- W&B tags ``consistency``, ``mnist_embedded``, ``sigma=0.25``, ``method.lbd=5``, ``seed=0``.

Overrides whose values are paths (checkpoints, data directories) name no hyperparameter and are left out: the
keys of :data:`PATH_KEYS` and each method card's path arguments (:func:`path_keys`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from pathlib import Path

from rsbench.methods.card import cards

PATH_KEYS = frozenset({"ckpt_path", "data_dir", "dataset.data_dir", "trainer.default_root_dir"})
"""The keys whose values are paths, besides the methods' (:func:`path_keys`)."""
# How a run is run or shown, not what it computes: left out of names (and of the report's setting columns).
PRESENTATION_KEYS = frozenset(
    {"trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps"}
)
PRESENTATION_PREFIXES = ("logger", "hydra")
# How fast a run computes, not what: the same distributions (another batching of the same noise, other loader
# processes). Kept in names (a sweep resumes its folders by name), but runs that differ only in these are seeds of one
# setting in the report (a cell run on a GPU with larger batches beside its CPU seeds).
EXECUTION_KEYS = frozenset(
    {
        "dataset.num_workers",
        "dataset.pin_memory",
        "dataset.download",
        "dataset.eval_batch_size",
        "trainer.accelerator",
        "certify.batch_size",
        "certify.images_per_batch",
        "attack.batch_size",
    }
)
"""The execution settings of every run, besides the methods' (:func:`execution_keys`)."""
MAX_DIRNAME = 200  # well under the 255 bytes most filesystems allow for one path component
MAX_TAG = 64  # W&B's limit on one tag
_LIST_BRACKETS = re.compile(r"[\[\](){}'\"]")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def path_keys() -> frozenset[str]:
    """Every key whose value is a path: :data:`PATH_KEYS` and each method card's (``method.teacher_ckpt``, ...)."""
    return PATH_KEYS.union(*(card.path_keys for card in cards()))


def execution_keys() -> frozenset[str]:
    """Every execution setting: :data:`EXECUTION_KEYS` and each method card's (``method.teacher_batch_size``)."""
    return EXECUTION_KEYS.union(*(card.execution_keys for card in cards()))


def override_key(override: str) -> str:
    """The config key an override sets: ``method.lbd`` for ``method.lbd=5``, ``+foo`` and ``~foo`` without the sign.

    >>> override_key("+trainer.max_epochs=3")
    'trainer.max_epochs'
    """
    return override.split("=", 1)[0].lstrip("+~")


def describes_setting(key: str, value: str) -> bool:
    """Whether an override ``key=value`` says what a run computes (not a path, a logger or a display option).

    >>> [describes_setting(k, v) for k, v in [("method.lbd", "5"), ("logger", "wandb"), ("ckpt_path", "a/b")]]
    [True, False, False]
    """
    return not (
        key in path_keys()
        or key in PRESENTATION_KEYS
        or key.split(".")[0].split("/")[0] in PRESENTATION_PREFIXES
        or "/" in value
    )


def descriptive_overrides(overrides: Sequence[str], drop: Collection[str] = ()) -> list[str]:
    """The overrides that describe a run (:func:`describes_setting`), sorted, without the keys in ``drop``.

    >>> descriptive_overrides(["seed=1", "method.teacher_ckpt=t/best.ckpt", "logger=wandb", "method.lbd=5"], ["seed"])
    ['method.lbd=5']
    """
    kept = []
    for override in overrides:
        key = override_key(override)
        value = override.split("=", 1)[1] if "=" in override else ""
        if key not in drop and describes_setting(key, value):
            kept.append(override.lstrip("+"))
    return sorted(kept)


def job_dirname(num: int, overrides: Sequence[str], sweep_dir: str | Path | None = None) -> str:
    """A sweep job's folder: its number, then its descriptive overrides as ``key-value`` joined by ``_``.

    ``3_method.lbd-5_sigma-0.5`` for ``method.lbd=5 sigma=0.5``. The name holds no character Hydra's override grammar
    or a shell treats specially (no ``=``, ``,``, brackets, quotes, spaces), so ``resume=<it>``,
    ``ckpt_path=<it>/checkpoints/best.ckpt`` and ``'model.members=[<it>/...]'`` take it as typed; a list value's
    items are joined by ``+`` (``scheduler.milestones-31+61``), other characters become ``-``. The number keeps
    folders unique and in launch order; a name longer than :data:`MAX_DIRNAME` is cut and ends with a hash of the
    whole, so two long names never collide.

    A sweep folder that already holds this job under the name rsbench gave it before (``3_method.lbd=5,sigma=0.5``,
    :func:`legacy_job_dirname`) keeps that name, so a sweep started then continues in its own folders.

    >>> job_dirname(0, ["sigma=0.5", "method=consistency"])
    '0_method-consistency_sigma-0.5'
    """
    name = _shortened(f"{num}_" + "_".join(_fragment(override) for override in descriptive_overrides(overrides)))
    if sweep_dir is not None and not (Path(sweep_dir) / name).exists():
        legacy = legacy_job_dirname(num, overrides)
        if (Path(sweep_dir) / legacy).is_dir():
            return legacy
    return name


def legacy_job_dirname(num: int, overrides: Sequence[str]) -> str:
    """The folder name rsbench gave a sweep job before it avoided Hydra's grammar: ``3_method.lbd=5,sigma=0.5``.

    >>> legacy_job_dirname(0, ["sigma=0.5", "method=consistency"])
    '0_method=consistency,sigma=0.5'
    """
    name = f"{num}_" + ",".join(descriptive_overrides(overrides))
    if len(name) > MAX_DIRNAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_DIRNAME - 9]}~{digest}"
    return name.rstrip("_")


def _fragment(override: str) -> str:
    """``key=value`` as a piece of a folder name: ``key-value``, with only letters, digits and ``._+-`` in it."""
    key, _, value = override.partition("=")
    if key.startswith("~"):  # a deletion: ~key or ~key=value
        key = "no-" + key[1:]
    value = _LIST_SEPARATOR.sub("+", _LIST_BRACKETS.sub("", value))
    return _UNSAFE.sub("-", f"{key}-{value}" if value else key)


def _shortened(name: str) -> str:
    """``name`` (without a trailing ``_``) cut to :data:`MAX_DIRNAME` characters, ending with a hash when cut."""
    name = name.rstrip("_")
    if len(name) > MAX_DIRNAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_DIRNAME - 9]}-{digest}"
    return name


def run_name(method: str, dataset: str, sigma: float, overrides: Sequence[str], drop: Collection[str] = ()) -> str:
    """``<method>-<dataset>-sigma<sigma>`` followed by the other descriptive overrides in brackets, if any.

    >>> run_name("consistency", "mnist_embedded", 0.25, ["method=consistency", "method.lbd=5", "seed=1"])
    'consistency-mnist_embedded-sigma0.25[method.lbd=5,seed=1]'
    """
    rest = descriptive_overrides(overrides, drop={"method", "dataset", "sigma", *drop})
    return f"{method}-{dataset}-sigma{sigma}" + (f"[{','.join(rest)}]" if rest else "")


def group_name(method: str, dataset: str, sigma: float, overrides: Sequence[str]) -> str:
    """The run name without the seed: the runs of one setting that differ only in ``seed`` share it.

    >>> group_name("gaussian", "cifar10", 0.5, ["seed=2"])
    'gaussian-cifar10-sigma0.5'
    """
    return run_name(method, dataset, sigma, overrides, drop={"seed"})


def run_tags(method: str, dataset: str, sigma: float, overrides: Sequence[str]) -> list[str]:
    """W&B tags: the method, the dataset, ``sigma=<sigma>`` and each descriptive override (cut to 64 characters).

    >>> run_tags("catrs", "cifar10", 1.0, ["method.lbd=2"])
    ['catrs', 'cifar10', 'sigma=1.0', 'method.lbd=2']
    """
    rest = descriptive_overrides(overrides, drop={"method", "dataset", "sigma"})
    return [method, dataset, f"sigma={sigma}", *(tag[:MAX_TAG] for tag in rest)]
