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
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Any

from rsbench.methods.card import cards
from rsbench.runs.datasets import FACT_KEYS
from rsbench.runs.quoting import override_key

PATH_KEYS = frozenset({"ckpt_path", "data_dir", "dataset.data_dir", "trainer.default_root_dir"})
"""The keys whose values are paths, besides the methods' (:func:`path_keys`)."""
# How a run is run or shown, not what it computes: left out of names (and of the report's setting columns).
PRESENTATION_KEYS = frozenset(
    {"trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps", *FACT_KEYS}
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
MAX_MODEL_NAME = 100  # the model's part of a rsbench.certify folder name
GENERIC_STEMS = frozenset({"best", "last", "checkpoint", "model", "model_best", "final", "weights", "net"})
"""File names that say nothing of the model (``checkpoints/best.ckpt``): its folders name it instead."""
MODEL_SUFFIXES = frozenset({".ckpt", ".pt", ".pth", ".tar", ".pt2", ".bin", ".safetensors", ".pkl", ".rsbench"})
ROOT_FOLDERS = frozenset({"checkpoints", "outputs", "multirun", "", ".", ".."})
_LIST_BRACKETS = re.compile(r"[\[\](){}'\"]")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def path_keys() -> frozenset[str]:
    """Every key whose value is a path: :data:`PATH_KEYS` and each method card's (``method.teacher_ckpt``, ...)."""
    return PATH_KEYS.union(*(card.path_keys for card in cards()))


def execution_keys() -> frozenset[str]:
    """Every execution setting: :data:`EXECUTION_KEYS` and each method card's (``method.teacher_batch_size``)."""
    return EXECUTION_KEYS.union(*(card.execution_keys for card in cards()))


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


def certify_dirname(kind: str, model: Mapping[str, Any] | None, sigma: Any = None) -> str:
    """The folder of a ``python -m rsbench.certify`` run (under ``outputs/<dataset>/``): the model kind and model.

    ``certify_<kind>-<what the model is>[-sigma<s>]``: the checkpoint or archive's name (for a run's
    ``checkpoints/best.ckpt``, its run folders: :func:`file_label`), a network's class or ``name``, an ensemble's
    member count and first member, a composition's parts; ``sigma`` is the certification sigma (``certify.sigma``),
    else the model's stated one. So certifications of different models never share a folder and each says what it
    certified. Unset values (``???``) and interpolations are left out.

    >>> certify_dirname("checkpoint", {"path": "imported/cohen_cifar10_sigma0.25.ckpt"})
    'certify_checkpoint-cohen_cifar10_sigma0.25'
    >>> certify_dirname("module", {"network": {"_target_": "mypkg.nets.WideResNet"}, "weights": "wrn.pt", "sigma": 0.5})
    'certify_module-WideResNet-wrn-sigma0.5'
    >>> certify_dirname("checkpoint", {"path": "outputs/mnist/gaussian/sigma_0.25/2026-01-02/checkpoints/best.ckpt"})
    'certify_checkpoint-gaussian_sigma_0.25_2026-01-02_best'
    """
    parts = _model_parts(model or {})
    stated = sigma if _is_set(sigma) else (model or {}).get("sigma")
    if isinstance(stated, int | float) and not isinstance(stated, bool):
        parts.append(f"sigma{stated}")
    label = _UNSAFE.sub("-", "-".join(part for part in parts if part)).strip("-")
    if len(label) > MAX_MODEL_NAME:
        digest = hashlib.sha256(label.encode()).hexdigest()[:8]
        label = f"{label[: MAX_MODEL_NAME - 9]}-{digest}"
    return f"certify_{_UNSAFE.sub('-', kind)}" + (f"-{label}" if label else "")


def file_label(path: str) -> str:
    """A model file's name without its suffixes; a name that says nothing (``best.ckpt``) with the folders above it.

    >>> file_label("runs/noise_0.25/checkpoint.pth.tar"), file_label("multirun/x/3_method-catrs/checkpoints/last.ckpt")
    ('runs_noise_0.25_checkpoint', 'x_3_method-catrs_last')
    """
    file = PurePath(path)
    stem = file.name
    while PurePath(stem).suffix.lower() in MODEL_SUFFIXES:
        stem = stem[: -len(PurePath(stem).suffix)]
    if stem.lower() not in GENERIC_STEMS and not stem.startswith("epoch"):
        return stem
    folders = [part for part in file.parent.parts if part not in ROOT_FOLDERS and part != "/"]
    return "_".join([*folders[-3:], stem])


def _model_parts(model: Mapping[str, Any]) -> list[str]:
    """What names a model node: its ``name``, network class, files and members, and its classifier's (nested)."""
    parts: list[str] = []
    if _is_set(model.get("name")):
        parts.append(str(model["name"]))
    network = model.get("network")
    if isinstance(network, Mapping) and _is_set(network.get("_target_")):
        parts.append(str(network["_target_"]).rsplit(".", 1)[-1])
    for key in ("path", "weights", "denoiser_ckpt"):
        if _is_set(model.get(key)):
            parts.append(file_label(str(model[key])))
    for key in ("members", "experts"):  # an ensemble's members, dual smoothing's experts
        members = model.get(key)
        if isinstance(members, Sequence) and not isinstance(members, str) and members:
            parts += [f"{len(members)}x", file_label(str(members[0]))]
    for key in ("classifier", "router", "router_denoiser"):  # a composition's parts
        part = model.get(key)
        if isinstance(part, Mapping):
            parts += _model_parts(part)
    return parts


def _is_set(value: Any) -> bool:
    """Whether a config value is given: not None, not ``???``, not an unresolved interpolation."""
    return value is not None and not (isinstance(value, str) and (value == "???" or "${" in value or not value))
