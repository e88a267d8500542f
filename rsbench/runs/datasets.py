"""What rsbench knows about each stock dataset, read from its config ``conf/dataset/<name>.yaml`` (no torch).

A dataset's config owns its facts: its name in tables (``dataset.title``: ``CIFAR-10``), the size of its test split
(``dataset.test_size``), the architecture of its recipe (``recipe.arch``), whose published hyperparameters apply
(``dataset.family``), whose published results a run on it stands beside (``dataset.published_as``, the embedded
MNIST subset: MNIST's; else itself) and its other names in released logs' paths (``dataset.aliases``: CAT-RS's
``fmnist``). The checks before a run, the leaderboard and the report read them here; the files are read once (plain
YAML, without composing them: a reader of facts must not depend on a command line).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rsbench.errors import ConfigError
from rsbench.runs.cli import config_dir

FACT_KEYS = ("dataset.title", "dataset.test_size", "dataset.published_as", "dataset.aliases")
"""The composed config's keys that state facts about the dataset for the tools (not settings of a run): free on
resume (runs made before they existed lack them) and no part of a run's name or setting in the report."""


@dataclass(frozen=True)
class DatasetInfo:
    """One stock dataset's facts, as its config states them (see the module docstring).

    Attributes:
        name: ``dataset=<name>`` and the records' ``dataset``.
        title: its name in tables (``Fashion-MNIST``).
        test_size: the images of its test split (ImageNet's: the validation split's).
        arch: the architecture of its recipe (``arch=recipe``).
        family: the dataset whose published method hyperparameters apply.
        published_as: the dataset whose published results a run on it stands beside.
        aliases: its other names in released logs' paths.
    """

    name: str
    title: str
    test_size: int
    arch: str
    family: str
    published_as: str
    aliases: tuple[str, ...] = ()

    @property
    def training_set(self) -> str:
        """Its training data in words (``CIFAR-10 training set``), as the leaderboard says what a model trained on."""
        return f"{self.title} training set"


def _info(path: Path) -> DatasetInfo:
    """The facts of the config at ``path``; a missing or ill-typed fact is refused naming the file and the key."""
    raw = yaml.safe_load(path.read_text()) or {}
    node: Mapping[str, Any] = raw.get("dataset") or {}
    recipe: Mapping[str, Any] = raw.get("recipe") or {}
    name = str(node.get("name", path.stem))
    expected = {"title": str, "test_size": int, "family": str}
    for key, kind in expected.items():
        if not isinstance(node.get(key), kind) or isinstance(node.get(key), bool):
            raise ConfigError(f"{path}: dataset.{key} must be a {kind.__name__}, got {node.get(key)!r}")
    if not isinstance(recipe.get("arch"), str):
        raise ConfigError(f"{path}: recipe.arch must name the recipe's architecture, got {recipe.get('arch')!r}")
    return DatasetInfo(
        name=name,
        title=node["title"],
        test_size=node["test_size"],
        arch=recipe["arch"],
        family=node["family"],
        published_as=str(node.get("published_as") or name),
        aliases=tuple(str(alias) for alias in node.get("aliases") or ()),
    )


@functools.cache
def datasets() -> Mapping[str, DatasetInfo]:
    """Every stock dataset's facts, by name, from ``conf/dataset/*.yaml`` (read once)."""
    found = (_info(path) for path in sorted((config_dir() / "dataset").glob("*.yaml")))
    return {info.name: info for info in found}


def find_dataset(name: str) -> DatasetInfo | None:
    """The facts of dataset ``name`` (or of the dataset one of whose aliases it is); ``None`` for another dataset."""
    known = datasets()
    return known.get(name) or next((info for info in known.values() if name in info.aliases), None)


def dataset_info(name: str) -> DatasetInfo:
    """The facts of dataset ``name``.

    Raises:
        ConfigError: no stock dataset is called so; the message names the close names and every stock dataset.
    """
    info = find_dataset(name)
    if info is None:
        names = sorted(datasets())
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(f"no dataset config for {name!r}; {hint}(the stock datasets: {', '.join(names)})")
    return info


def path_names() -> tuple[str, ...]:
    """The names a path may name a dataset by (a folder of a released log): every dataset's name and aliases."""
    return tuple(name for info in datasets().values() for name in (info.name, *info.aliases))


def published_as(name: str) -> str:
    """The dataset whose published results a run on ``name`` stands beside; a dataset without a config: itself.

    ``mnist_embedded`` and ``mnist``: MNIST's; an alias (``fmnist``): its dataset's.
    """
    info = find_dataset(name)
    return name if info is None else info.published_as
