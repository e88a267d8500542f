"""A method's card: every fact about a training method and its authors' artifacts, beside the method, in one place.

A method is its class (``rsbench/methods/<name>.py``), its config (``conf/method/<name>.yaml``) and its card
(``rsbench/methods/<name>_card.py``, a module that defines ``CARD = MethodCard(...)``). The card says where the
authors' code is, how their released checkpoints are laid out (what ``python -m rsbench.importer origin=<origin>``
reads), what their released certification logs' folders are called and which column of rsbench's training log is
their "train loss", the certification settings its models are certified with, and which of its arguments are file
paths, execution settings or the checkpoints it needs first, and from which epoch a checkpoint is the method (where
its schedule starts with another method's loss). The importer, the report, the training tracking, DDRS's base
methods and the run layer (run names, resume, the checks before a run, checkpoint selection) read the cards and name
no method: adding a method touches only its own files (docs/method_cards.md).

This module, and every card, imports neither torch nor Lightning: the run layer reads the cards when Hydra composes
a command line, before anything heavy is loaded. The cards are found by their module names (``*_card`` in this
package); :func:`register` adds one from elsewhere (a plugin, a test).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from types import MappingProxyType
from typing import Any, Literal

from rsbench.errors import ConfigError

InputLayerKind = Literal["normalize", "center", "identity"]
"""What maps [0,1] pixels to a network's input (the same names as :data:`rsbench.archs.input_layer.InputLayerKind`,
which loads torch; a test keeps them equal)."""

MNIST_LIKE = ("mnist", "mnist_embedded", "fashion_mnist")
"""The datasets of MNIST's shape (``mnist_embedded``: 5,000 of MNIST's images), which the authors' code treats alike."""

CARD_SUFFIX = "_card"
"""A module of this package whose name ends so holds one card (``CARD``)."""


@dataclass(frozen=True)
class CheckpointLayout:
    """How the authors' code saves a trained model, as read in their code.

    Attributes:
        repository: the authors' GitHub repository (or repositories that share this layout).
        file_keys: the top-level keys its ``torch.save`` writes.
        weights_key: the entry that holds the network's state dict.
        arch_key: the entry naming the architecture (``None``: the file does not name it).
        prefixes: the state-dict key prefixes of its containers, longest first (``1.module.``: the network sits at
            index 1 of ``Sequential(NormalizeLayer, DataParallel(net))``).
        input_layers: per dataset, the input layers its code builds (one: documented; several: it depends on the
            model, see :meth:`documented_input_layer`).
        default_archs: per dataset, its architecture when the file does not name one.
        input_layer_by_path: where the input layer depends on the model, the authors' rule that tells it from the
            file's place in their released tree (``None``: it must be stated).
        notes: what an imported model should know about its source (recorded with it), e.g. a softmax the
            authors' network ends in.
    """

    repository: str
    file_keys: frozenset[str]
    weights_key: str
    arch_key: str | None
    prefixes: tuple[str, ...]
    input_layers: Mapping[str, tuple[InputLayerKind, ...]]
    default_archs: Mapping[str, str] = field(default_factory=dict)
    input_layer_by_path: Callable[[PurePath], InputLayerKind | None] | None = None
    notes: tuple[str, ...] = ()

    def documented_input_layer(self, dataset: str, path: PurePath) -> InputLayerKind | None:
        """The input layer the authors document for this file, or ``None`` when it must be stated."""
        kinds = self.input_layers[dataset]
        if len(kinds) == 1:
            return kinds[0]
        return self.input_layer_by_path(path) if self.input_layer_by_path is not None else None


def same_for(datasets: tuple[str, ...], kinds: tuple[InputLayerKind, ...]) -> dict[str, tuple[InputLayerKind, ...]]:
    """``{dataset: kinds}`` for each of ``datasets`` (a layout's ``input_layers`` where several datasets agree)."""
    return dict.fromkeys(datasets, kinds)


SEQUENTIAL_FILE = frozenset({"epoch", "arch", "state_dict", "optimizer"})
"""The file Cohen et al.'s ``train.py`` saves, and every codebase that copied it: ``torch.save`` of
``Sequential(normalize layer, net)``'s state dict with its epoch, architecture name and optimizer state."""


@dataclass(frozen=True)
class MethodEpoch:
    """From which training epoch a checkpoint is the method its card names, where its schedule has an earlier phase.

    Before that epoch the loss is another method's (Sun et al. 2025 trains as Gaussian augmentation until
    ``ds_epoch``); ``protocol=rsbench`` selects the certified checkpoint among the later epochs only, and a run that
    trains no such epoch is refused before it starts.

    Attributes:
        rule: the first such epoch (0-indexed) from the method's config node (its ``method.*`` values, resolved); a
            key it leaves unset takes the class's default.
        keys: the method's arguments the rule reads (named in messages: what to change).
        before: what the training before that epoch is, in words (``Gaussian training with m noise copies``).
    """

    rule: Callable[[Mapping[str, Any]], int]
    keys: tuple[str, ...]
    before: str

    def first_epoch(self, method: Mapping[str, Any]) -> int:
        """The first epoch whose checkpoint is the method, for the config node ``method``.

        Raises:
            ConfigError: the rule gives no integer >= 0 (a key of the wrong kind), naming the keys.
        """
        epoch = self.rule(method)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            keys = ", ".join(f"method.{key}" for key in self.keys)
            raise ConfigError(f"{keys} must give the first epoch of the method as an integer >= 0, got {epoch!r}")
        return epoch


@dataclass(frozen=True)
class MethodCard:
    """One training method and its authors' artifacts (see the module docstring).

    Attributes:
        name: the method's name: ``conf/method/<name>.yaml``, ``method=<name>`` and the ``method_name`` of its class
            (the records' ``method``).
        target: the import path of its class or factory (the YAML's ``_target_``).
        paper: the paper it reproduces (authors, venue, year).
        repository: the authors' code (``owner/name`` on GitHub), ``""`` where none is followed.
        origin: the name ``python -m rsbench.importer origin=<origin>`` gives the authors' released checkpoints
            (``None``: the importer reads none of this method's releases).
        checkpoint_layout: how those checkpoints are saved (required with ``origin``).
        log_folders: the folder names of this method in the authors' released per-image logs and training logs
            (``cohen`` for Gaussian, ``cat-rs`` for CAT-RS in alinlab/smoothing-catrs ``data/``), read as this
            method by the report.
        train_loss_column: the column of rsbench's training log that equals the "train loss" the authors' training
            log prints (where their scripts log one term of the loss, e.g. the cross-entropy alone).
        logs_train_accuracy: whether the authors' training log has a train accuracy (some scripts write 0.0).
        certify_defaults: the certification settings this method's models are certified with where ``certify.*``
            leaves them unset (null); the method's YAML takes them from here (``${rs.certify_defaults:<name>}``).
        checkpoint_arguments: the method's arguments that name a checkpoint to read (``teacher_ckpt``): checked to
            exist before a run starts, and left out of run names (paths name no hyperparameter).
        path_arguments: its other arguments whose values are paths (a cache folder): left out of run names.
        execution_arguments: its arguments that change how fast it computes, not what (a batch size of the
            teacher's forward passes): left out of the report's settings, free to change when a run resumes.
        prerequisites: what it needs before it can train, in words (the class's ``prerequisites()`` computes it).
        prerequisite_folder: the folder under ``prerequisite_dir`` its prerequisite runs are kept in (``teachers``).
        ddrs_base: whether data-dependent smoothing (``method=ddrs method.base=<name>``) can wrap it.
        method_epoch: from which epoch a checkpoint is this method, when its schedule starts with a phase of another
            method's loss (:class:`MethodEpoch`); ``None``: from the first epoch (epoch 0).
        title: its name in tables and leaderboards (``CAT-RS``); the name itself when empty (:attr:`shown_name`).
        citation: the paper as a table cites it (``Jeong, Kim and Shin, AAAI 2023``).
        methods_table: its place (from 1) in the tables of the methods whose published ACR rsbench's defaults
            reproduce (the README's methods table, docs/methods.md's published defaults); ``None``: not listed there.
        published_sources: per dataset, the published source (a ``source`` of ``rsbench/report/published.csv``) its
            default reproduces where that dataset's usual line (CAT-RS's Table 1 for CIFAR-10, ...) lacks the method:
            its authors' own released runs.
        published_variants: per dataset, the ``variant`` of the source's lines its default is (SmoothMix on MNIST:
            ``eta=5;one_step=false``).
        lora_refusal: why it cannot fine-tune a pretrained network with LoRA (``+lora=default``), where its loss does
            not train the base classifier; ``""``: it can.
    """

    name: str
    target: str
    paper: str
    repository: str = ""
    origin: str | None = None
    checkpoint_layout: CheckpointLayout | None = None
    log_folders: tuple[str, ...] = ()
    train_loss_column: str = "train/loss_epoch"
    logs_train_accuracy: bool = True
    certify_defaults: Mapping[str, Any] = field(default_factory=dict)
    checkpoint_arguments: tuple[str, ...] = ()
    path_arguments: tuple[str, ...] = ()
    execution_arguments: tuple[str, ...] = ()
    prerequisites: str = ""
    prerequisite_folder: str = ""
    ddrs_base: bool = False
    method_epoch: MethodEpoch | None = None
    title: str = ""
    citation: str = ""
    methods_table: int | None = None
    published_sources: Mapping[str, str] = field(default_factory=dict)
    published_variants: Mapping[str, str] = field(default_factory=dict)
    lora_refusal: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a method card's name must be a Python identifier (its YAML's name), got {self.name!r}")
        if (self.origin is None) != (self.checkpoint_layout is None):
            raise ValueError(f"card {self.name!r}: an origin and a checkpoint layout go together (give both or none)")
        arguments = (*self.checkpoint_arguments, *self.path_arguments, *self.execution_arguments)
        for argument in arguments:
            if not argument.isidentifier():
                raise ValueError(f"card {self.name!r}: {argument!r} is not an argument name (write it without method.)")
        if len(set(arguments)) != len(arguments):
            raise ValueError(f"card {self.name!r}: an argument is listed twice in {arguments}")
        if self.methods_table is not None and (self.methods_table < 1 or not self.citation):
            raise ValueError(
                f"card {self.name!r}: methods_table must be a place >= 1 and needs a citation, got "
                f"{self.methods_table!r} with citation {self.citation!r}"
            )
        for key in ("certify_defaults", "published_sources", "published_variants"):
            object.__setattr__(self, key, MappingProxyType(dict(getattr(self, key))))

    @property
    def shown_name(self) -> str:
        """Its name in tables: the title, or the name where it has none."""
        return self.title or self.name

    def first_method_epoch(self, method: Mapping[str, Any]) -> int:
        """The first (0-indexed) training epoch whose checkpoint is this method, for its config node ``method``."""
        return 0 if self.method_epoch is None else self.method_epoch.first_epoch(method)

    @property
    def path_keys(self) -> tuple[str, ...]:
        """The config keys whose values are paths: ``method.<argument>`` of the checkpoint and path arguments."""
        return tuple(f"method.{a}" for a in (*self.checkpoint_arguments, *self.path_arguments))

    @property
    def checkpoint_keys(self) -> tuple[str, ...]:
        """The config keys that name a checkpoint to read: ``method.<argument>``."""
        return tuple(f"method.{a}" for a in self.checkpoint_arguments)

    @property
    def execution_keys(self) -> tuple[str, ...]:
        """The config keys of its execution settings: ``method.<argument>``."""
        return tuple(f"method.{a}" for a in self.execution_arguments)


_cards: dict[str, MethodCard] = {}
_discovered = False


def register(card: MethodCard) -> MethodCard:
    """Add ``card`` to the registry (a method outside this package, or a test); return it.

    Raises:
        ValueError: another card has the same name or the same importer origin.
    """
    _discover()
    return _add(card)


def unregister(name: str) -> None:
    """Remove the card named ``name`` (a card a test registered); nothing happens when there is none."""
    _cards.pop(name, None)


def cards() -> tuple[MethodCard, ...]:
    """Every card, by name."""
    _discover()
    return tuple(_cards[name] for name in sorted(_cards))


def find_card(name: str) -> MethodCard | None:
    """The card of method ``name``, or ``None`` when there is none (a method of another package, an ensemble)."""
    _discover()
    return _cards.get(name)


def method_card(name: str) -> MethodCard:
    """The card of method ``name``.

    Raises:
        ConfigError: there is none; the message names the close names and every method with a card.
    """
    card = find_card(name)
    if card is None:
        names = sorted(_cards)
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise ConfigError(f"no method card for {name!r}; {hint}(the methods with a card: {', '.join(names)})")
    return card


def card_of_target(target: str) -> MethodCard | None:
    """The card whose class (or factory) is ``target``, a method YAML's ``_target_``; ``None`` when none is.

    ``target`` may name the class through a package that re-exports it (``rsbench.methods.GaussianAugmentation``
    for the card's ``rsbench.methods.gaussian.GaussianAugmentation``); nothing is imported to tell.
    """
    return next((card for card in cards() if _names_the_same(target, card.target)), None)


def _names_the_same(target: str, card_target: str) -> bool:
    """``target`` is ``card_target``, or the same name in a package above its module (a re-export)."""
    if target == card_target:
        return True
    package, _, name = target.rpartition(".")
    module, _, card_name = card_target.rpartition(".")
    return bool(package) and name == card_name and module.startswith(f"{package}.")


def first_method_epoch(method: Mapping[str, Any]) -> tuple[int, MethodCard | None]:
    """The first training epoch whose checkpoint is the method of config node ``method``, with the method's card.

    The card is the one whose ``target`` is the node's ``_target_``; a method without a card is itself from epoch 0.
    """
    card = card_of_target(str(method.get("_target_", "")))
    return (0, None) if card is None else (card.first_method_epoch(method), card)


def card_of_origin(origin: str) -> MethodCard | None:
    """The card whose authors' checkpoints the importer reads as ``origin=<origin>``, if any."""
    return next((card for card in cards() if card.origin == origin), None)


def origins() -> tuple[str, ...]:
    """The importer's ``origin=`` values, in the order of the cards' names."""
    return tuple(card.origin for card in cards() if card.origin is not None)


def shown_name(method: str) -> str:
    """How tables name ``method``: its card's title (``catrs`` -> ``CAT-RS``); the name itself without a card."""
    card = find_card(method)
    return method if card is None else card.shown_name


def table_methods() -> tuple[MethodCard, ...]:
    """The cards of the methods tables list (``methods_table``), in their places.

    Raises:
        ValueError: two cards claim the same place.
    """
    listed = sorted((card for card in cards() if card.methods_table is not None), key=lambda c: c.methods_table or 0)
    places = [card.methods_table for card in listed]
    if len(set(places)) != len(places):
        clash = next(p for p in places if places.count(p) > 1)
        names = [card.name for card in listed if card.methods_table == clash]
        raise ValueError(f"cards {', '.join(names)} claim the same methods_table place {clash}")
    return tuple(listed)


def method_of_log_folder(folder: str) -> str:
    """The method whose released logs sit in a folder named ``folder`` (``cohen`` -> ``gaussian``); else ``folder``."""
    return next((card.name for card in cards() if folder in card.log_folders), folder)


def _add(card: MethodCard) -> MethodCard:
    existing = _cards.get(card.name)
    if existing is not None and existing is not card:
        raise ValueError(f"a method card named {card.name!r} is registered already ({existing.target})")
    same_origin = [c.name for c in _cards.values() if card.origin is not None and c.origin == card.origin]
    if same_origin and same_origin != [card.name]:
        raise ValueError(f"card {card.name!r}: origin {card.origin!r} is the origin of {same_origin[0]!r} already")
    _cards[card.name] = card
    return card


def _discover() -> None:
    """Load the cards of this package's ``*_card`` modules (once)."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    package = importlib.import_module(__name__.rsplit(".", 1)[0])
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.endswith(CARD_SUFFIX):
            card = importlib.import_module(f"{package.__name__}.{module.name}").CARD
            if not isinstance(card, MethodCard):
                raise TypeError(f"{package.__name__}.{module.name}.CARD is not a MethodCard")
            _add(card)
